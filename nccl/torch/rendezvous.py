"""A group's communicator: its unique id through the group's store.

torch gives the backend of every group (the default group, each
``new_group``, each DeviceMesh dimension) a store of its own (a PrefixStore
named after the group), the group's ranks and its timeout.  Rank 0 of the
group makes a unique id and puts it in the store; the other ranks read it;
all call ``Communicator.init`` with the timeout as the watchdog's.  Ranks
outside the group never take part.

A store can outlive its groups (an explicit ``store=``, torchrun's agent
store) and torch reuses group names after ``destroy_process_group``, so each
creation takes a fresh key: every rank adds 1 to a counter in the store, and
creation ``n`` (counting from 0) reads key ``n``.  All ranks of a creation
add before any of them can finish it (the library waits for all), so they
agree on ``n``.

The host backend has a timeout of its own for a peer that never arrives
(``NCCL4PY_HOST_TIMEOUT``, default 300 s).  Unless it is set, the
communicators of this backend get the group's timeout plus 2 s there, so
that the group's timeout governs and the watchdog reports it first.
"""
from __future__ import annotations

import os
import threading
from datetime import timedelta

import nccl.core as nc
from nccl import _nccl

from .errors import UnsupportedError

__all__ = ["communicator", "timeout_seconds"]

_PREFIX = "nccl4py_host"
_MAX_SECONDS = 31536000.0  # NCCL4PY_WATCHDOG_TIMEOUT's and NCCL4PY_HOST_TIMEOUT's limit
_HOST_TIMEOUT = "NCCL4PY_HOST_TIMEOUT"
_env_lock = threading.Lock()


def timeout_seconds(timeout) -> float:
    """A group's timeout (timedelta) in seconds for the watchdog, at most a year."""
    if isinstance(timeout, timedelta):
        seconds = timeout.total_seconds()
    else:
        raise TypeError(f"timeout must be a datetime.timedelta, got {type(timeout).__name__}")
    if not seconds > 0:
        raise ValueError(f"timeout must be positive, got {timeout}")
    return min(seconds, _MAX_SECONDS)


def _check_library() -> None:
    family = _nccl.library_family()
    if family != "host":
        raise UnsupportedError(
            f"nccl4py_host needs nccl4py's host backend, but this process uses "
            f"{nc.get_lib_path()} ({family}); a process loads one library: set "
            "NCCL4PY_BACKEND=host before its first nccl call (for GPU tensors use the "
            "'nccl' backend, or PyTorch's 'nccl4py')")


def communicator(store, rank: int, size: int, timeout) -> tuple[nc.Communicator, bytes]:
    """The communicator of a new group and its unique id's bytes."""
    seconds = timeout_seconds(timeout)
    _check_library()
    n = (store.add(f"{_PREFIX}/creations", 1) - 1) // size
    key = f"{_PREFIX}/uid/{n}"
    if rank == 0:
        uid = bytes(nc.get_unique_id())
        store.set(key, uid)
    else:
        uid = bytes(store.get(key))
    with _env_lock:
        own = os.environ.get(_HOST_TIMEOUT) is None
        if own:
            os.environ[_HOST_TIMEOUT] = repr(min(seconds + 2.0, _MAX_SECONDS))
        try:
            comm = nc.Communicator.init(size, rank, nc.UniqueId.from_bytes(uid), timeout=seconds)
        finally:
            if own:
                os.environ.pop(_HOST_TIMEOUT, None)
    return comm, uid
