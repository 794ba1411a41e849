"""``Communicator``: the Pythonic communicator of nccl4py.

The collectives and point-to-point calls (``allreduce``, ``reduce``,
``broadcast``, ``allgather``, ``gather``, ``reduce_scatter``, ``alltoall``,
``scatter``, ``send``, ``recv``, and RCCL's ``allreduce_with_bias`` and
``alltoallv``) are implemented in C by the base class
(``nccl._nccl._CommunicatorBase``, src/communicator.c): buffers and streams
are resolved, validated and handed to the library without returning to
Python.  This module adds the life cycle, resources and properties.

The rules (docs/semantics.md): buffers in row-major order; send and receive
buffers disjoint or exactly in place; one call at a time per communicator
(another thread gets NcclInvalid); unusable in a fork() child; inside a
group every call keeps its buffers, and every handle it creates, alive until
the outermost group end; a communicator created here and dropped without
destroy() is aborted on garbage collection with a ResourceWarning.
"""
from __future__ import annotations

import atexit
import contextlib
import hashlib
import operator
import os
import sys
import warnings
from typing import Any, Iterator, Sequence, TypeVar

from nccl import _dtypes, _nccl
from nccl import bindings as _b
from nccl._errors import NcclInvalid

from .config import NCCLConfig, NCCLDevCommRequirements, WaitSignalDesc
from .requirements import _Typed, build_requirements
from .constants import UNIQUE_ID_BYTES, CommShrinkFlag, CommSuspendFlag, WindowFlag
from .resources import (CommResource, CustomRedOp, DevCommResource, RegisteredBufferHandle,
                        RegisteredWindowHandle)
from .enums import NcclCftTeamMode, decode_gin_type
from .host_device import CPUDevice, host_device_count
from .properties import NCCLCommProperties
from .team import NCCLTeam, check_team
from .typing import NcclDataType
from .utils import UniqueId

__all__ = ["Communicator", "CPUDevice"]

_DEV_CPU = 1


_R = TypeVar("_R", bound=CommResource)


def _cfg_ptr(config: NCCLConfig | None) -> int:
    if config is None:
        return 0
    if not isinstance(config, NCCLConfig):
        raise NcclInvalid(f"config must be an NCCLConfig or None, got {type(config).__name__}")
    return config.ptr


def _uid_bytes(unique_id: Any) -> bytes:
    try:
        data = bytes(unique_id)
    except TypeError:
        raise NcclInvalid("unique_id must be a UniqueId or a sequence of UniqueIds") from None
    if len(data) != UNIQUE_ID_BYTES:
        raise NcclInvalid(f"a unique id has {UNIQUE_ID_BYTES} bytes, got {len(data)}")
    return data


_DESTROY, _ABORT = False, True

_dump_at_exit = False


def _trace_hash(*parts: Any) -> str:
    """The communicator hash of flight records: the same on every rank."""
    return hashlib.blake2b(repr(parts).encode(), digest_size=8).hexdigest()


def _device_id(device: Any) -> int:
    """A device id of init_all's list: an integer (``operator.index``), not a bool."""
    if isinstance(device, bool):
        raise TypeError(f"init_all: a device id must be an integer, got {device!r}")
    return operator.index(device)


def _register_exit_dump() -> None:
    """With NCCL4PY_TRACE_DIR set, every rank leaves its records at exit."""
    global _dump_at_exit
    if not _dump_at_exit and os.environ.get("NCCL4PY_TRACE_DIR"):
        _dump_at_exit = True
        atexit.register(_nccl._trace_dump_all, "exit")


class Communicator(_nccl._CommunicatorBase):
    """An NCCL/RCCL communicator.

    Collectives (every rank calls them, in the same order)::

        allreduce(sendbuf, recvbuf, op)     broadcast(sendbuf, recvbuf, root)
        reduce(sendbuf, recvbuf, op, root)  allgather(sendbuf, recvbuf)
        reduce_scatter(sendbuf, recvbuf, op)
        alltoall(sendbuf, recvbuf)          gather(sendbuf, recvbuf, root)
        scatter(sendbuf, recvbuf, root)
        allreduce_with_bias(sendbuf, recvbuf, op, bias)        (RCCL only)
        alltoallv(sendbuf, sendcounts, sdispls, recvbuf, ...)  (RCCL only)

    Each takes ``stream=`` too, and all but the RCCL ones ``config=`` (an
    ``NCCLCollConfig``).
    Point to point: ``send(sendbuf, peer)``, ``recv(recvbuf, peer)``, with
    ``stream=`` (pair them inside ``nccl.core.group()``).  Creation:
    ``init``, ``from_env``, ``init_all``, ``split``, ``shrink``, ``grow``;
    the end: ``destroy``, ``abort``.

    ``Communicator.init(nranks, rank, unique_id, config=None)`` creates one;
    ``Communicator(ptr)`` wraps an existing ``ncclComm_t`` (which it does not
    own: it is never released on garbage collection); ``Communicator()`` is
    the null communicator.  It is a context manager: leaving the block
    destroys it, or aborts it when an exception is propagating.  A
    communicator created by this class (init, from_env, init_all, split,
    shrink, grow) and dropped without destroy() is aborted on garbage
    collection, with a ResourceWarning.

    One thread at a time may call into a communicator; a fork() child cannot
    use its parent's communicators.
    """

    def __init__(self, ptr: Any = 0):
        super().__init__(operator.index(ptr) if ptr else 0)
        self._owns = False  # made here: released on garbage collection
        self._resources: list[CommResource] = []
        self._children_in_progress: list[Communicator] = []
        self._comm_properties = None
        self._cached_device = None
        self._trace_key = ""
        self._trace_timeout: float | None = None
        self._children_made = 0

    # ----------------------------------------------------------- creation

    @classmethod
    def init(cls, nranks: int, rank: int, unique_id: Any,
             config: NCCLConfig | None = None, timeout: float | None = None) -> "Communicator":
        """``timeout``: seconds after which the watchdog aborts an operation
        that has not completed (NcclTimeoutError); None: NCCL4PY_WATCHDOG_TIMEOUT
        (default 0, off); see docs/debugging-hangs.md."""
        comm = cls()
        comm.initialize(nranks, rank, unique_id, config, timeout)
        return comm

    @classmethod
    def from_env(cls, config: NCCLConfig | None = None,
                 timeout: float | None = None) -> "Communicator":
        """A communicator for this process from its launcher: ``python -m
        nccl.run``, torchrun, mpirun or srun (see ``nccl.run.environment``)."""
        import nccl.run

        env = nccl.run.environment()
        assert env.unique_id is not None  # always there when environment() exchanges it
        return cls.init(env.nranks, env.rank, UniqueId.from_bytes(env.unique_id), config,
                        timeout)

    @classmethod
    def init_all(cls, devices: int | Sequence[int] | None = None) -> list["Communicator"]:
        """One communicator per device, all in this process (``ncclCommInitAll``).

        ``devices``: a count n (devices 0..n-1), a sequence of device ids, or
        None: every visible GPU, and on the host backend
        ``NCCL4PY_HOST_DEVICES`` (default 2; docs/environment.md).

        Refused before the library is called, as NCCL itself refuses them: a
        negative count, a negative or repeated device id (``NcclInvalid``), an
        id that is not an integer (``TypeError``; ``True`` and ``False`` too)."""
        if devices is None:
            if _nccl.library_family() == "host":
                devices = range(host_device_count())
            else:
                from nccl import _runtime

                devices = range(_runtime.device_count())
        elif isinstance(devices, int) and not isinstance(devices, bool):
            if devices < 0:
                raise NcclInvalid(f"init_all: the number of devices must not be negative, "
                                  f"got {devices}")
            devices = range(devices)
        elif not isinstance(devices, (list, tuple, range)):
            raise TypeError("devices must be an integer, sequence of integers, or None, "
                            f"got {type(devices).__name__}")
        devlist = [_device_id(d) for d in devices]
        if any(d < 0 for d in devlist):
            raise NcclInvalid(f"init_all: device ids must not be negative, got {devlist}")
        seen: set[int] = set()
        repeats: set[int] = set()
        for d in devlist:
            (repeats if d in seen else seen).add(d)
        repeated = sorted(repeats)
        if repeated:
            raise NcclInvalid(f"init_all: a device may appear once only; repeated: "
                              f"{', '.join(map(str, repeated))} (in {devlist})")
        if not devlist:
            return []
        return [cls._owning(int(p)) for p in _b.comm_init_all(len(devlist), devlist)]

    @classmethod
    def _owning(cls, ptr: int) -> "Communicator":
        comm = cls(ptr)
        comm._owns = True
        return comm

    def initialize(self, nranks: int, rank: int, unique_id: Any,
                   config: NCCLConfig | None = None, timeout: float | None = None) -> None:
        """Create the communicator in place (``ncclCommInitRankScalable``)."""
        if self.ptr:
            raise NcclInvalid("Communicator is already initialized")
        if isinstance(unique_id, (list, tuple)):
            ids = list(unique_id)
        elif isinstance(unique_id, (UniqueId, _b.UniqueId, bytes, bytearray, memoryview)):
            ids = [unique_id]
        else:
            raise NcclInvalid("unique_id must be a UniqueId or a sequence of UniqueIds")
        if not ids:
            raise NcclInvalid("unique_id must be a UniqueId or a sequence of UniqueIds")
        blob = bytearray(b"".join(_uid_bytes(u) for u in ids))
        self._setup_trace(timeout, _trace_hash(bytes(blob)), rank, nranks)  # checks settings first
        self._owns = True
        # inside a group the library fills the handle at the outermost group end
        self._queued(config)
        _b.comm_init_rank_scalable(self._comm_address, nranks, rank, len(ids), blob,
                                   _cfg_ptr(config))
        self._reset()

    def _setup_trace(self, timeout: float | None, key: str, rank: int | None = None,
                     nranks: int | None = None) -> None:
        self._trace_key = key
        self._trace_timeout = timeout  # children inherit it
        self._children_made = 0
        known = type(rank) is int and type(nranks) is int  # else init reports the error
        self._trace_setup(timeout, key, rank if known else None, nranks if known else None)
        _register_exit_dump()

    def _reset(self) -> None:
        self._set_ptr(self.ptr)  # forget cached size/rank/device
        self._comm_properties = None
        self._cached_device = None

    def _check_valid(self, operation: str) -> None:
        self._check(operation)  # initialized, and of this process (not a fork() child)

    @contextlib.contextmanager
    def _using(self, operation: str, exclusive: bool = False) -> Iterator[int]:
        """The handle, with this thread as the one calling into the
        communicator (NcclInvalid if another thread is)."""
        ptr = self._acquire(operation, exclusive)
        try:
            yield ptr
        finally:
            self._release()

    def _child(self, operation: str, fill, config: NCCLConfig | None,
               from_null: bool = False, key: tuple = ()) -> "Communicator":
        """A new communicator whose handle the library writes into its slot:
        at once, at the outermost group end (inside a group), or later (a
        non-blocking config).  Until then it must stay alive.  from_null: made
        from the null communicator (a new rank of grow)."""
        newcomm = type(self)()
        newcomm._owns = True
        self._children_in_progress = [c for c in self._children_in_progress if not c.ptr]
        self._children_made += 1
        newcomm._setup_trace(self._trace_timeout,
                             _trace_hash(self._trace_key, operation, self._children_made, *key))
        with contextlib.ExitStack() as stack:
            ptr = 0 if from_null else stack.enter_context(self._using(operation))
            self._queued(newcomm, config)
            status = fill(ptr, newcomm._comm_address)
        newcomm._reset()
        if status == _b.Result.InProgress and not newcomm.ptr:
            self._children_in_progress.append(newcomm)
        return newcomm

    def split(self, color: int | None = None, key: int = 0,
              config: NCCLConfig | None = None) -> "Communicator":
        """Split by ``color`` (ordered by ``key``); ``color=None`` opts out and
        returns a null communicator.  Inside a group the new communicator's
        handle is filled at the outermost group end."""
        c = -1 if color is None else operator.index(color)
        k = operator.index(key)
        return self._child("split", lambda ptr, out: _b.comm_split(ptr, c, k, out,
                                                                   _cfg_ptr(config)), config,
                           key=(c,))

    def shrink(self, exclude_ranks: Sequence[int] | None = None, config: NCCLConfig | None = None,
               flag: CommShrinkFlag = CommShrinkFlag.DEFAULT) -> "Communicator":
        """A new communicator without ``exclude_ranks``."""
        ranks = [operator.index(r) for r in (exclude_ranks or [])]
        f = operator.index(flag)
        return self._child("shrink", lambda ptr, out: _b.comm_shrink(
            ptr, ranks, len(ranks), out, _cfg_ptr(config), f), config)

    def get_unique_id(self) -> UniqueId:
        """The id new ranks need to join this communicator's next ``grow``
        (``ncclCommGetUniqueId``).  One rank, the coordinator, makes it and
        hands it to the new ranks; one id serves one grow."""
        with self._using("get unique id") as ptr:
            return UniqueId(_b.comm_get_unique_id(ptr))

    def grow(self, nranks: int, unique_id: UniqueId | None = None, rank: int | None = None,
             config: NCCLConfig | None = None) -> "Communicator":
        """A communicator of ``nranks`` ranks: this one's and new ones (``ncclCommGrow``).

        Every rank calls it with the same ``nranks``.  Existing ranks call it on
        their communicator with ``rank=None`` and keep their ranks; the one that
        made the id with ``get_unique_id()`` passes it, the others may pass
        None.  New ranks call it on ``Communicator()`` with that id and their
        ``rank``, from the old size up."""
        n = operator.index(nranks)
        r = -1 if rank is None else operator.index(rank)
        if rank is not None and self.ptr:
            raise NcclInvalid("New ranks must use a null communicator (Communicator())")
        if rank is None and not self.ptr:
            raise NcclInvalid("Existing ranks must use an initialized communicator")
        uid = UniqueId.from_bytes(_uid_bytes(unique_id)) if unique_id is not None else None
        self._queued(uid)
        return self._child("grow", lambda ptr, out: _b.comm_grow(
            ptr, n, uid.ptr if uid else 0, r, out, _cfg_ptr(config)), config,
            from_null=rank is not None)

    # --------------------------------------------------------- life cycle

    def destroy(self) -> None:
        """Close every tracked resource, then ``ncclCommDestroy``; null afterwards.

        Refused (NcclInvalid) while another thread is in a call on the
        communicator (``abort()`` interrupts it) or while calls on it are
        queued in an open group.  In a fork() child it only forgets the
        handle: the library state belongs to the parent."""
        ptr = self._take_handle(_DESTROY)
        self.close_all_resources()
        if ptr:
            _b.comm_destroy(ptr)

    def abort(self) -> None:
        """Like ``destroy`` but ``ncclCommAbort``: for use after an error, also
        from another thread to interrupt a blocked call.  With calls queued in
        an open group the communicator is null at once and aborted when that
        group ends."""
        ptr = self._take_handle(_ABORT)
        self.close_all_resources()
        if ptr:
            _b.comm_abort(ptr)

    def finalize(self) -> None:
        """``ncclCommFinalize``; refused while calls on the communicator are
        queued in an open group or another thread is in a call on it."""
        if self.ptr:
            with self._using("finalize", exclusive=True) as ptr:
                _b.comm_finalize(ptr)

    def revoke(self, flags: int = 0) -> None:
        f = operator.index(flags)
        with self._using("revoke") as ptr:
            _b.comm_revoke(ptr, f)

    def suspend(self, flags: CommSuspendFlag = CommSuspendFlag.MEM) -> None:
        f = operator.index(flags)
        with self._using("suspend") as ptr:
            _b.comm_suspend(ptr, f)

    def resume(self) -> None:
        with self._using("resume") as ptr:
            _b.comm_resume(ptr)

    def close_all_resources(self) -> None:
        """Close every resource this communicator tracks (errors are ignored)."""
        resources, self._resources = self._resources, []
        for r in reversed(resources):
            try:
                r.close()
            except Exception:
                pass

    def __del__(self) -> None:
        # A communicator made here and dropped without destroy(): abort it, as
        # a file is closed, with a ResourceWarning.  Abort and not destroy: a
        # finalizer must not block, and destroy may wait for peers that are
        # still in a collective (or gone).  Nothing at interpreter exit, and
        # nothing but forgetting in a fork() child (see _take_handle).
        if not getattr(self, "_owns", False) or not self.ptr or sys.is_finalizing():
            return
        ptr = self._take_handle(_ABORT)
        for r in self._resources:
            r._forget()  # freed with the communicator
        self._resources = []
        if ptr:
            try:
                warnings.warn(f"Communicator at {ptr:#x} was not destroyed: aborted on garbage "
                              "collection; call destroy() (or use it as a context manager)",
                              ResourceWarning, source=self)
            finally:
                try:
                    _b.comm_abort(ptr)
                except Exception:
                    pass

    def __enter__(self) -> "Communicator":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.destroy()
        else:
            self.abort()

    # ------------------------------------------------------------ queries

    def get_last_error(self) -> str:
        return _b.get_last_error(self.ptr)

    def get_async_error(self):
        self._check_valid("get async error")
        v = _b.comm_get_async_error(self.ptr)
        if v != _b.Result.InProgress:
            self._children_in_progress.clear()
        try:
            return _b.Result(v)
        except ValueError:
            return v

    def get_mem_stat(self, stat) -> int:
        s = operator.index(stat)
        self._check_valid("get memory statistics")
        return _b.comm_mem_stats(self.ptr, s)

    @property
    def nranks(self) -> int:
        self._check_valid("get nranks")
        return self._info()[0]

    @property
    def rank(self) -> int:
        self._check_valid("get rank")
        return self._info()[1]

    @property
    def device(self):
        """The communicator's device: a cuda.core ``Device`` on GPUs (cuda.core's
        own when installed, else nccl's shim of it on the C runtime layer), a
        :class:`CPUDevice` on the host backend (its ``device_id`` is the
        index ``init_all`` gave it, 0 for ``init``)."""
        self._check_valid("get device")
        if self._cached_device is None:
            _, _, dev_type, dev_id = self._info()
            if dev_type == _DEV_CPU:
                self._cached_device = CPUDevice(dev_id)
            else:
                from nccl._hip_compat import core_module

                self._cached_device = core_module().Device(dev_id)
        return self._cached_device

    def _properties(self):
        if self._comm_properties is None:
            self._check_valid("query properties")
            self._comm_properties = _b.comm_query_properties(self.ptr)
        return self._comm_properties

    @property
    def properties(self) -> NCCLCommProperties:
        """What the library reports about this communicator (nccl4py 0.6)."""
        return NCCLCommProperties._from_struct(self._properties())

    # --- teams (nccl4py 0.6) ---
    def _team(self, fn: str, *args: int) -> NCCLTeam:
        self._check_valid(fn)
        t = getattr(_b, fn)(self.ptr, *args)
        return NCCLTeam._of(t.n_ranks, t.rank, t.stride, self.ptr)

    @property
    def team_world(self) -> NCCLTeam:
        """Every rank of the communicator, as a team."""
        return self._team("team_world")

    @property
    def team_lsa(self) -> NCCLTeam:
        """The ranks that can load and store this rank's memory."""
        return self._team("team_lsa")

    @property
    def team_rail(self) -> NCCLTeam:
        """The ranks at this rank's position in the other lsa teams."""
        return self._team("team_rail")

    @property
    def team_cft_multimem(self) -> NCCLTeam:
        """The ranks sharing this rank's connection-fabric multicast (NCCL 2.31+)."""
        return self._team("team_cft_multimem")

    def team_cft(self, mode: NcclCftTeamMode = NcclCftTeamMode.FLAT) -> NCCLTeam:
        """The connection-fabric team of this rank, shaped by mode (NCCL 2.31+)."""
        return self._team("team_cft", int(mode))

    def team_rank_to_world(self, team: NCCLTeam, team_rank: int) -> int:
        """The world rank of member team_rank of team (anchored at this rank:
        team.rank is this rank, neighbours are team.stride apart)."""
        self._check_valid("team_rank_to_world")
        check_team(team, self.ptr)
        return _b.team_rank_to_world(self.ptr, team, team_rank)

    def team_rank_to_lsa(self, team: NCCLTeam, team_rank: int) -> int:
        """The lsa rank of member team_rank of team (-1 when it is not in this
        rank's lsa team)."""
        self._check_valid("team_rank_to_lsa")
        check_team(team, self.ptr)
        return _b.team_rank_to_lsa(self.ptr, team, team_rank)

    # --- generated by tools/gen from src/structs.def: properties ---
    cuda_dev = property(lambda self: self._properties().cuda_dev)
    nvml_dev = property(lambda self: self._properties().nvml_dev)
    device_api_support = property(lambda self: bool(self._properties().device_api_support))
    multimem_support = property(lambda self: bool(self._properties().multimem_support))
    gin_type = property(lambda self: decode_gin_type(self._properties().gin_type))
    n_lsa_teams = property(lambda self: self._properties().n_lsa_teams)
    host_rma_support = property(lambda self: bool(self._properties().host_rma_support))
    railed_gin_type = property(lambda self: decode_gin_type(self._properties().railed_gin_type))
    # --- end of generated properties ---

    def __repr__(self) -> str:
        if not self.ptr:
            return "<Communicator: null (ptr=0)>"
        try:
            n, r, dev_type, dev_id = self._info()
            family = _nccl.library_family()
        except Exception:
            return f"<Communicator: ptr={self.ptr:#x}>"
        where = "host" if dev_type == _DEV_CPU else f"device {dev_id}"
        backend = {"host": "host backend", "rccl": "RCCL", "nccl": "NCCL"}[family]
        return f"<Communicator: rank={r}/{n}, {where}, {backend}, ptr={self.ptr:#x}>"

    # -------------------------------------------------------- resources

    def _track(self, res: _R) -> _R:
        self._resources.append(res)
        return res

    def _resolve(self, buffer: Any, name: str = "buffer", keep: bool = False):
        ptr, count, dtype, _dev_type, _dev_id, _ro = _nccl.resolve_buffer(buffer, name,
                                                                          keep=keep)
        return ptr, count, NcclDataType(dtype)

    def register_buffer(self, buffer: Any) -> RegisteredBufferHandle:
        """Register ``buffer`` with the communicator (``ncclCommRegister``).
        The handle keeps ``buffer`` alive until it is closed."""
        with self._using("register buffer") as comm:
            ptr, count, dtype = self._resolve(buffer)
            handle = RegisteredBufferHandle(comm, ptr, count * dtype.itemsize)
        handle._buffer = buffer
        return self._track(handle)

    def register_window(self, buffer: Any,
                        flags: WindowFlag | None = None) -> RegisteredWindowHandle:
        """Register a window (``ncclCommWindowRegister``).  Always a tracked
        handle: inside a group its ``.handle`` is 0 until the outermost group
        end fills it.  It keeps ``buffer`` alive until it is closed
        (``close()``, or ``destroy()`` / ``abort()`` of the communicator)."""
        with self._using("register window") as comm:
            ptr, count, dtype = self._resolve(buffer)
            handle = RegisteredWindowHandle(comm, ptr, count * dtype.itemsize, flags,
                                            buffer=buffer)
            self._queued(handle)  # the library fills its slot at the group end
        return self._track(handle)

    def create_pre_mul_sum(self, scalar: Any, datatype: Any = None) -> CustomRedOp:
        """A PreMulSum op: ``sum(scalar * x)``.  An int/float or a 1-element
        NumPy array is read now (host immediate); any other buffer is a
        1-element scalar read when the collective runs."""
        self._check_valid("create PreMulSum")
        if isinstance(scalar, bool):
            raise TypeError("scalar must be a number or a buffer, not bool")
        import numpy as np

        dt = NcclDataType(datatype) if datatype is not None else None
        if isinstance(scalar, (int, float)) and not isinstance(scalar, bool):
            arr = np.array([scalar], dtype=dt.numpy_dtype if dt is not None else None)
            dt = dt if dt is not None else NcclDataType.from_numpy_dtype(arr.dtype)
            op = CustomRedOp(self.ptr, arr.ctypes.data, dt, _b.ScalarResidence.HostImmediate)
            op._scalar_array = arr
            return self._track(op)
        if isinstance(scalar, np.ndarray):
            if scalar.size != 1:
                raise NcclInvalid(f"NumPy array must contain exactly 1 element for scalar, got "
                                  f"{scalar.size} elements")
            arr = np.ascontiguousarray(scalar.reshape(1))
            if dt is not None and NcclDataType.from_numpy_dtype(arr.dtype) != dt:
                arr = arr.astype(dt.numpy_dtype)
            dt = dt if dt is not None else NcclDataType.from_numpy_dtype(arr.dtype)
            op = CustomRedOp(self.ptr, arr.ctypes.data, dt, _b.ScalarResidence.HostImmediate)
            op._scalar_array = arr
            return self._track(op)
        try:
            ptr, count, bdt = self._resolve(scalar, "scalar")
        except (TypeError, ValueError) as e:
            raise NcclInvalid(f"scalar must be int, float, numpy.ndarray, or NcclSupportedBuffer, "
                              f"got {type(scalar).__name__}: {e}") from None
        if count != 1:
            raise NcclInvalid(f"Device buffer must contain exactly 1 element for scalar, got "
                              f"{count} elements")
        if dt is not None and dt != bdt:
            raise NcclInvalid(f"Device buffer datatype {_dtypes.NAMES[bdt]} doesn't match "
                              f"requested datatype {_dtypes.NAMES[dt]}")
        op = CustomRedOp(self.ptr, ptr, bdt, _b.ScalarResidence.Device)
        op._scalar_array = scalar  # read at every use: keep it alive
        return self._track(op)

    def create_dev_comm(self, requirements: _Typed | None = None) -> DevCommResource:
        req = requirements if requirements is not None else NCCLDevCommRequirements()
        if not isinstance(req, NCCLDevCommRequirements):
            raise TypeError("requirements must be an NCCLDevCommRequirements, not "
                            f"{type(req).__name__}")
        with self._using("create device communicator") as comm:
            reqs = build_requirements(comm, req)
            res = DevCommResource(comm, reqs)
            self._queued(res, reqs)  # inside a group: filled at the group end
        return self._track(res)

    # ------------------------------------------------------------ signals

    def signal(self, peer: int, signal_index: int = 0, context: int = 0, flags: int = 0, *,
               stream: Any = None) -> None:
        s = _nccl.resolve_stream(stream)
        with self._using("signal") as comm:
            _b.signal(peer, signal_index, context, flags, comm, s)
            self._queued(stream)

    def put_signal(self, local_buffer: Any, peer: int, peer_window: RegisteredWindowHandle,
                   peer_window_offset: int = 0, signal_index: int = 0, context: int = 0,
                   flags: int = 0, *, stream: Any = None) -> None:
        """Put ``local_buffer`` into the peer's window at ``peer_window_offset``
        elements, then signal.  Inside a group ``local_buffer`` (and its
        export) stays alive until the outermost group end."""
        offset = operator.index(peer_window_offset)
        s = _nccl.resolve_stream(stream)
        with self._using("put signal") as comm:
            peer_window._check_comm(comm, "peer_window")
            ptr, count, dtype = self._resolve(local_buffer, "local_buffer", keep=True)
            _b.put_signal(ptr, count, int(dtype), peer, peer_window.handle,
                          offset * dtype.itemsize, signal_index, context, flags, comm, s)
            self._queued(stream, peer_window)

    def wait_signal(self, descs: WaitSignalDesc | Sequence[WaitSignalDesc], *,
                    stream: Any = None) -> None:
        items = [descs] if isinstance(descs, WaitSignalDesc) else list(descs)
        s = _nccl.resolve_stream(stream)
        with self._using("wait signal") as comm:
            _b.wait_signal(len(items), [d._lowpp for d in items], comm, s)
            self._queued(stream, *items)
