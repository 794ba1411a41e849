"""Where this process sits in a multi-process job: :func:`environment`.

Recognised launchers, first match wins:

1. ``python -m nccl.run``: ``NCCL4PY_RANK``, ``NCCL4PY_NRANKS``,
   ``NCCL4PY_LOCAL_RANK``; the id comes ready in ``NCCL4PY_UNIQUE_ID``.
2. torchrun: ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``; rank 0 makes the id and
   publishes it in a ``torch.distributed.TCPStore`` at ``MASTER_ADDR:MASTER_PORT``.
3. mpirun / mpiexec: ``OMPI_COMM_WORLD_RANK``, ``PMI_RANK`` or ``PMIX_RANK``;
   rank 0 makes the id and broadcasts it with mpi4py.
4. srun: ``SLURM_PROCID``, ``SLURM_NTASKS``, ``SLURM_LOCALID``; id as for MPI.

None of them (``python prog.py``): the process is rank 0 of 1, as under
mpi4py, and a one-line note on stderr says so.

torch and mpi4py are imported only when an id has to be exchanged through them.
"""

from __future__ import annotations

import itertools
import os
import re
import sys
from dataclasses import dataclass
from typing import Mapping

from nccl._launch import uniqueid

__all__ = ["RankEnvironment", "environment"]


@dataclass(frozen=True, repr=False)
class RankEnvironment:
    """This process's place in a job started by a launcher.

    Attributes:
        rank: this process's rank, ``0 <= rank < nranks``.
        nranks: the number of ranks in the job.
        local_rank: the rank's index among the ranks on this machine; use it to
            choose a GPU (``local_rank % device_count``).
        unique_id: the 128-byte ``ncclUniqueId`` shared by all ranks, or
            ``None`` when :func:`environment` was called with
            ``exchange_id=False``.
        launcher: what started the job: ``"nccl.run"``, ``"torchrun"``,
            ``"mpi"`` or ``"slurm"``; ``"none"`` when no launcher did (the
            process is then the only rank).
    """

    rank: int
    nranks: int
    local_rank: int
    unique_id: bytes | None
    launcher: str

    def __repr__(self) -> str:
        uid = "None" if self.unique_id is None else f"<{len(self.unique_id)} bytes>"
        return (
            f"RankEnvironment(rank={self.rank}, nranks={self.nranks}, "
            f"local_rank={self.local_rank}, unique_id={uid}, launcher={self.launcher!r})"
        )


_SINGLE_NOTE = ("nccl4py: no launcher (nccl.run, torchrun, mpirun, srun) started this "
                "process: it runs as rank 0 of 1; `python -m nccl.run -n N prog.py` starts N")
_noted = False

# Keys in a shared TCPStore must differ between calls, so number the calls.
# Every rank calls environment() the same number of times, in the same order.
_exchange_counter = itertools.count()


def environment(exchange_id: bool = True, *, timeout: float = 300.0) -> RankEnvironment:
    """Read the rank layout set by the launcher and get the job's unique id.

    Args:
        exchange_id: when true (the default) the result carries the unique id
            shared by all ranks.  Under ``python -m nccl.run`` it is read from
            the environment; under torchrun rank 0 creates it with
            ``nccl.bindings.get_unique_id()`` and shares it through a
            ``torch.distributed.TCPStore``; under mpirun/srun rank 0 creates it
            and broadcasts it with mpi4py.  In the last two cases this call is
            collective: every rank must make it.  When false, only the rank
            numbers are read (no library, torch or mpi4py is needed) and
            ``unique_id`` is ``None``.
        timeout: seconds to wait for the other ranks during the exchange
            (torchrun only; MPI has no timeout).

    Without a launcher's variables this process is the only rank (rank 0
    of 1, launcher ``"none"``; the id is made here), as under mpi4py; the
    first such call prints a one-line note to stderr.

    Raises:
        RuntimeError: the exchange needs a package that is not installed
            (the message names it), or fails.
        ValueError: a variable is present but malformed (not an integer, a
            rank, size or ``MASTER_PORT`` out of its range, a ``MASTER_ADDR``
            that is no host name, bad unique id hex); the message names it.
            These are checked before torch or mpi4py is imported.
        Whatever ``nccl.bindings`` raises when rank 0 cannot create the id
        (rank 0 re-raises it; the other ranks get a ``RuntimeError`` quoting it).
    """
    found = detect(exchange_id, timeout)
    if found is not None:
        return found
    global _noted
    if not _noted:
        _noted = True
        print(_SINGLE_NOTE, file=sys.stderr, flush=True)
    uid = uniqueid.create_unique_id() if exchange_id else None
    return RankEnvironment(0, 1, 0, uid, "none")


def detect(exchange_id: bool = False, timeout: float = 300.0) -> RankEnvironment | None:
    """What :func:`environment` returns when a launcher started this
    process; None (and no note) when none did."""
    env = os.environ
    for kind in (_from_nccl_run, _from_torchrun, _from_mpi, _from_slurm):
        found = kind(env, exchange_id, timeout)
        if found is not None:
            return found
    return None


# --------------------------------------------------------------------- parsing

_DECIMAL = re.compile(r"-?[0-9]+")

def _int_var(env: Mapping[str, str], name: str, default: int | None = None,
             context: str = "") -> int:
    value = env.get(name)
    if value is None or value.strip() == "":
        if default is not None:
            return default
        raise ValueError(f"{name} is not set{context}")
    text = value.strip()
    if not _DECIMAL.fullmatch(text):  # int() would take "1_000", "+5" and other digits
        raise ValueError(f"{name}={value!r} is not an integer")
    return int(text)


def _first_var(env: Mapping[str, str], names: tuple[str, ...]) -> str | None:
    for name in names:
        if env.get(name, "").strip() != "":
            return name
    return None


# The library takes the number of ranks as a C int.
MAX_NRANKS = 2**31 - 1


def _check(rank: int, nranks: int, local_rank: int,
           variables: tuple[str | None, str | None, str | None],
           local_below_nranks: bool = True) -> None:
    """*variables*: where the rank, the size and the local rank came from
    (None: not from a variable).  The local rank is checked against the number
    of ranks unless the caller checks it against a local size instead."""
    _, size_var, local_var = variables
    names = "/".join(filter(None, variables))
    if nranks < 1:
        raise ValueError(f"the number of ranks must be at least 1, got {nranks} ({names})")
    if nranks > MAX_NRANKS:
        raise ValueError(f"{size_var or 'the number of ranks'}={nranks} is above "
                         f"{MAX_NRANKS}, the most ranks a communicator has ({names})")
    if not 0 <= rank < nranks:
        raise ValueError(f"rank {rank} is outside 0..{nranks - 1} ({names})")
    if local_rank < 0:
        raise ValueError(f"the local rank must not be negative, got {local_rank} ({names})")
    if local_below_nranks and local_rank >= nranks:
        raise ValueError(f"{local_var or 'the local rank'}={local_rank} is not below the "
                         f"number of ranks, {nranks} ({names})")


# A host name or address: no blanks or control characters, at most 253 characters
# (RFC 1035), with IPv6 literals (``::1``, ``[fe80::1%eth0]``) allowed.
_HOST = re.compile(r"[^\x00-\x20\x7f/]{1,253}")


def _master(env: Mapping[str, str]) -> tuple[str, int]:
    """MASTER_ADDR and MASTER_PORT, checked (both are known to be set)."""
    addr = env["MASTER_ADDR"].strip()
    if not _HOST.fullmatch(addr):
        raise ValueError(f"MASTER_ADDR={env['MASTER_ADDR']!r} is not a host name or address")
    port = _int_var(env, "MASTER_PORT")
    if not 1 <= port <= 65535:
        raise ValueError(f"MASTER_PORT={port} is outside 1..65535 (a TCP port)")
    return addr, port


# ------------------------------------------------------------------- launchers

def _from_nccl_run(env, exchange_id, timeout):
    if "NCCL4PY_RANK" not in env:
        return None
    ctx = " (NCCL4PY_RANK is set, so python -m nccl.run is assumed)"
    rank = _int_var(env, "NCCL4PY_RANK")
    nranks = _int_var(env, "NCCL4PY_NRANKS", context=ctx)
    local_rank = _int_var(env, "NCCL4PY_LOCAL_RANK", default=rank)
    _check(rank, nranks, local_rank, ("NCCL4PY_RANK", "NCCL4PY_NRANKS", "NCCL4PY_LOCAL_RANK"),
           local_below_nranks=False)  # below NCCL4PY_LOCAL_SIZE <= nranks, next
    local_size = _int_var(env, "NCCL4PY_LOCAL_SIZE", default=nranks)
    if not 1 <= local_size <= nranks:
        raise ValueError(f"NCCL4PY_LOCAL_SIZE={local_size} is outside 1..{nranks} "
                         f"(NCCL4PY_NRANKS={nranks})")
    if local_rank >= local_size:
        raise ValueError(f"NCCL4PY_LOCAL_RANK={local_rank} is not below "
                         f"NCCL4PY_LOCAL_SIZE={local_size}")
    uid = None
    if exchange_id:
        text = env.get(uniqueid.UNIQUE_ID_ENV)
        if text is None:
            raise ValueError(f"{uniqueid.UNIQUE_ID_ENV} is not set{ctx}")
        uid = uniqueid.decode(text)
    return RankEnvironment(rank, nranks, local_rank, uid, "nccl.run")


def _from_torchrun(env, exchange_id, timeout):
    if "RANK" not in env or "WORLD_SIZE" not in env:
        return None
    rank = _int_var(env, "RANK")
    nranks = _int_var(env, "WORLD_SIZE")
    local_rank = _int_var(env, "LOCAL_RANK", default=rank)
    _check(rank, nranks, local_rank, ("RANK", "WORLD_SIZE", "LOCAL_RANK"))
    uid = _exchange_torch(env, rank, nranks, timeout) if exchange_id else None
    return RankEnvironment(rank, nranks, local_rank, uid, "torchrun")


_MPI_KINDS = (
    # (rank variable, size variables, local-rank variables)
    ("OMPI_COMM_WORLD_RANK", ("OMPI_COMM_WORLD_SIZE",),
     ("OMPI_COMM_WORLD_LOCAL_RANK",)),
    ("PMI_RANK", ("PMI_SIZE",),
     ("MPI_LOCALRANKID", "PMI_LOCAL_RANK", "PALS_LOCAL_RANKID", "SLURM_LOCALID")),
    ("PMIX_RANK", ("PMIX_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "SLURM_NPROCS"),
     ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMI_LOCAL_RANK", "SLURM_LOCALID")),
)


def _from_mpi(env, exchange_id, timeout):
    for rank_var, size_vars, local_vars in _MPI_KINDS:
        if rank_var in env:
            break
    else:
        return None
    rank = _int_var(env, rank_var)
    size_var = _first_var(env, size_vars)
    local_var = _first_var(env, local_vars)
    nranks = _int_var(env, size_var) if size_var else None
    local_rank = _int_var(env, local_var) if local_var else None
    if nranks is None and not exchange_id:
        raise ValueError(
            f"{rank_var} is set but none of {', '.join(size_vars)} says how many ranks "
            "there are; call environment() with exchange_id=True to ask MPI"
        )
    uid = None
    if exchange_id:
        uid, nranks, local_rank = _exchange_mpi(rank, nranks, local_rank, rank_var, "mpirun")
    if local_rank is None:
        local_rank = rank  # the launcher did not say: assume one machine
    _check(rank, nranks, local_rank, (rank_var, size_var, local_var))
    return RankEnvironment(rank, nranks, local_rank, uid, "mpi")


def _from_slurm(env, exchange_id, timeout):
    if "SLURM_PROCID" not in env:
        return None
    rank = _int_var(env, "SLURM_PROCID")
    size_var = _first_var(env, ("SLURM_NTASKS", "SLURM_NPROCS")) or "SLURM_NTASKS"
    nranks = _int_var(env, size_var, context=" (SLURM_PROCID is set, so srun is assumed)")
    local_rank = _int_var(env, "SLURM_LOCALID", default=rank)
    _check(rank, nranks, local_rank, ("SLURM_PROCID", size_var, "SLURM_LOCALID"))
    uid = None
    if exchange_id:
        uid, _, _ = _exchange_mpi(rank, nranks, local_rank, "SLURM_PROCID", "srun")
    return RankEnvironment(rank, nranks, local_rank, uid, "slurm")


# ------------------------------------------------------------------ exchanges

def _rank0_id() -> tuple[bytes | None, BaseException | None]:
    try:
        return uniqueid.create_unique_id(), None
    except Exception as exc:  # reported to the other ranks, then re-raised
        return None, exc


def _exchange_torch(env, rank: int, nranks: int, timeout: float) -> bytes:
    addr = env.get("MASTER_ADDR", "").strip()
    port_text = env.get("MASTER_PORT", "").strip()
    if not addr or not port_text:
        raise RuntimeError(
            "torchrun variables RANK and WORLD_SIZE are set but MASTER_ADDR/MASTER_PORT "
            "are not; the unique id is exchanged through a TCPStore at that address "
            "(torchrun sets both). Set them, or call environment(exchange_id=False) "
            "and share the id yourself."
        )
    addr, port = _master(env)
    agent_store = env.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    attempt = _int_var(env, "TORCHELASTIC_RESTART_COUNT", default=0) if agent_store else 0
    if attempt < 0:
        raise ValueError(f"TORCHELASTIC_RESTART_COUNT={attempt} is negative")
    try:
        from datetime import timedelta

        from torch.distributed import PrefixStore, TCPStore
    except ImportError as exc:
        raise RuntimeError(
            "this program was started by torchrun (RANK, WORLD_SIZE, MASTER_ADDR are set); "
            "exchanging the unique id needs PyTorch: pip install torch "
            "(or call environment(exchange_id=False) and share the id yourself)"
        ) from exc

    wait = timedelta(seconds=timeout)
    where = f"the TCPStore at {addr}:{port}"
    key = f"nccl4py/unique_id/{next(_exchange_counter)}"
    error = None
    try:
        if agent_store:
            # torchrun's agent already serves the store: be a client, under
            # the prefix torch's own env:// rendezvous uses.
            store = PrefixStore(
                f"/worker/attempt_{attempt}",
                TCPStore(addr, port, world_size=nranks, is_master=False, timeout=wait),
            )
        else:
            # multi_tenant: a later init_process_group(init_method="env://")
            # in this process shares the server instead of failing to bind.
            store = TCPStore(addr, port, world_size=nranks, is_master=(rank == 0),
                             timeout=wait, multi_tenant=True)
        if rank == 0:
            uid, error = _rank0_id()
            # One tag byte: 0 = the id follows, 1 = rank 0's error message follows.
            store.set(key, b"\0" + uid if uid is not None
                      else b"\1" + f"{type(error).__name__}: {error}".encode())
            # Keep the store (and so, on rank 0, its server) alive until every
            # rank has read the id.
            if nranks > 1:
                store.wait([f"{key}/read/{r}" for r in range(1, nranks)], wait)
        else:
            value = bytes(store.get(key))
            store.set(f"{key}/read/{rank}", b"1")
    except Exception as exc:  # torch reports store failures and timeouts as RuntimeError
        raise RuntimeError(f"exchanging the unique id through {where} failed: {exc}") from exc
    if rank == 0:
        if uid is None:  # rank 0's error, sent to the other ranks above
            assert error is not None
            raise error
        return uid
    if value[:1] == b"\0" and len(value) == 1 + uniqueid.UNIQUE_ID_BYTES:
        return value[1:]
    reason = value[1:].decode(errors="replace") if value[:1] == b"\1" else repr(value[:40])
    raise RuntimeError(f"rank 0 could not create the unique id: {reason}")


def _exchange_mpi(rank: int, nranks: int | None, local_rank: int | None,
                  rank_var: str, what: str) -> tuple[bytes, int, int | None]:
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise RuntimeError(
            f"this program was started by {what} ({rank_var} is set); exchanging the "
            "unique id needs mpi4py: pip install mpi4py "
            "(or call environment(exchange_id=False) and share the id yourself)"
        ) from exc
    comm = MPI.COMM_WORLD
    mpi_rank, mpi_size = comm.Get_rank(), comm.Get_size()
    if nranks is None:
        nranks = mpi_size
    if (mpi_rank, mpi_size) != (rank, nranks):
        raise RuntimeError(
            f"MPI says this is rank {mpi_rank} of {mpi_size}, but the environment says "
            f"rank {rank} of {nranks} ({rank_var}); was the program started by {what} "
            "with an MPI that matches mpi4py?"
        )
    if local_rank is None:
        node = comm.Split_type(MPI.COMM_TYPE_SHARED)
        try:
            local_rank = node.Get_rank()
        finally:
            node.Free()
    uid, error = _rank0_id() if rank == 0 else (None, None)
    payload = comm.bcast(uid if error is None else f"{type(error).__name__}: {error}", root=0)
    if error is not None:
        raise error
    if not isinstance(payload, (bytes, bytearray)):
        raise RuntimeError(f"rank 0 could not create the unique id: {payload}")
    return bytes(payload), nranks, local_rank

