"""Resources owned by a communicator: registrations, windows, custom ops,
device communicators.  Each is closed by ``close()`` or by the
communicator's ``destroy()`` / ``abort()`` (which close all it tracks).

A resource created inside a group may get its handle only at the outermost
group end (a window: ``.handle`` is 0 until then); closing it before that
releases it at the group end.  In a fork() child ``close()`` only marks it
closed: the library state belongs to the parent."""
from __future__ import annotations

import os
from typing import Any

from nccl import _nccl
from nccl import bindings as _b
from nccl._errors import NcclInvalid

from .constants import WindowFlag
from .devhandles import CftLeInfo, view_of
from .team import check_team
from .typing import NcclDataType

__all__ = ["RegisteredBufferHandle", "RegisteredWindowHandle", "CustomRedOp", "DevCommResource"]


def check_owner(owner: int, comm: int, what: str, made: str, kind: str) -> None:
    """NcclInvalid unless a handle made by communicator ``owner`` (0: none
    known) is used with that communicator: the library would look it up in
    the tables of ``comm``."""
    if owner and owner != comm:
        raise NcclInvalid(f"{what} was {made} communicator {owner:#x}, not on communicator "
                          f"{comm:#x} it is used with: {kind} belongs to the communicator that "
                          "made it")


class CommResource:
    """Base of the resources: created against a live communicator, closed once."""

    def __init__(self, comm_ptr: int):
        if not comm_ptr:
            raise NcclInvalid("Invalid communicator: cannot create resource with communicator ptr=0")
        self._comm = int(comm_ptr)
        self._closed = False
        self._pid = os.getpid()

    def _check_valid(self) -> None:
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} has been closed and is no longer valid")

    @property
    def is_valid(self) -> bool:
        return not self._closed

    def close(self) -> None:
        """Release the resource; calling it again does nothing."""
        if not self._closed:
            self._closed = True
            if os.getpid() == self._pid:  # never the parent's library state from a child
                self._deallocate()

    def _check_comm(self, comm: int, what: str) -> None:
        """NcclInvalid unless used with the communicator that made it."""
        check_owner(self._comm, int(comm), what,
                    "registered on" if isinstance(self, RegisteredWindowHandle) else "created on",
                    f"a {type(self).__name__}")

    def _forget(self) -> None:
        """Closed without a library call (its communicator was aborted)."""
        self._closed = True

    def _deallocate(self) -> None:  # pragma: no cover - every subclass overrides it
        raise NotImplementedError


class RegisteredBufferHandle(CommResource):
    """A buffer registered with ``ncclCommRegister``."""

    def __init__(self, comm_ptr: int, buffer_ptr: int, size: int):
        super().__init__(comm_ptr)
        self._size = int(size)
        self._buffer: Any = None  # set by Communicator.register_buffer: kept while registered
        self._handle = _b.comm_register(self._comm, buffer_ptr, self._size)

    @property
    def handle(self) -> int:
        self._check_valid()
        return self._handle

    @property
    def size(self) -> int:
        return self._size

    def _deallocate(self) -> None:
        _b.comm_deregister(self._comm, self._handle)
        self._buffer = None

    def __repr__(self) -> str:
        if self._closed:
            return "<RegisteredBufferHandle: closed>"
        return f"<RegisteredBufferHandle: size={self._size}, handle={self._handle:#x}>"


class RegisteredWindowHandle(CommResource):
    """A window registered with ``ncclCommWindowRegister``."""

    def __init__(self, comm_ptr: int, buffer_ptr: int, size: int, flags: WindowFlag | None = None,
                 buffer: Any = None):
        super().__init__(comm_ptr)
        self._size = int(size)
        self._user_ptr = int(buffer_ptr)
        self._buffer = buffer  # the registered memory lives as long as the window
        self._box = _b.PointerBox()  # the library may fill it at group end
        _b.comm_window_register(self._comm, self._user_ptr, self._size, self._box.address,
                                int(WindowFlag.DEFAULT if flags is None else flags))

    @property
    def handle(self) -> int:
        self._check_valid()
        return self._box.ptr

    @property
    def is_valid(self) -> bool:
        return not self._closed and self._box.ptr != 0

    @property
    def size(self) -> int:
        return self._size

    @property
    def user_ptr(self) -> int:
        return self._user_ptr

    def get_lsa_multimem_device_pointer(self, offset: int = 0) -> int | None:
        return _b.get_lsa_multimem_device_pointer(self.handle, offset) or None

    def get_lsa_device_pointer(self, lsa_rank: int, offset: int = 0) -> int:
        return _b.get_lsa_device_pointer(self.handle, offset, lsa_rank)

    def get_peer_device_pointer(self, peer: int, offset: int = 0) -> int | None:
        return _b.get_peer_device_pointer(self.handle, offset, peer) or None

    def get_multimem_device_pointer(self, multimem: Any, offset: int = 0) -> int | None:
        """The multicast address of offset for the team of ``multimem`` (a
        MultimemHandle of a device communicator of this window's communicator)."""
        check_owner(getattr(multimem, "_comm", 0), self._comm, "multimem", "made by",
                    "a MultimemHandle")
        return _b.get_multimem_device_pointer(self.handle, offset, multimem._lowpp) or None

    def get_multimem_le_info(self, offset: int = 0) -> CftLeInfo:
        return CftLeInfo(*_b.get_multimem_device_le_info(self.handle, offset))

    def get_cft_le_info(self, peer_cft: int, cft_team: Any, offset: int = 0) -> CftLeInfo:
        check_team(cft_team, self._comm, "cft_team")
        return CftLeInfo(*_b.get_cft_device_le_info(self.handle, offset, peer_cft, cft_team))

    def get_peer_le_info(self, peer: int, offset: int = 0) -> CftLeInfo:
        return CftLeInfo(*_b.get_peer_device_le_info(self.handle, offset, peer))

    def _deallocate(self) -> None:
        # Inside a group the library may still fill the handle: deregister then.
        if not self._box.ptr and _nccl._group_defer(self._deregister):
            return
        self._deregister()

    def _deregister(self) -> None:
        if self._box.ptr:
            _b.comm_window_deregister(self._comm, self._box.ptr)
        self._buffer = None

    def __repr__(self) -> str:
        if self._closed:
            return "<RegisteredWindowHandle: closed>"
        return f"<RegisteredWindowHandle: size={self._size}, handle={self._box.ptr:#x}>"


class CustomRedOp(CommResource):
    """A PreMulSum reduction op; pass it as ``op`` to reductions."""

    def __init__(self, comm_ptr: int, scalar_ptr: int, datatype: NcclDataType, residence: int):
        super().__init__(comm_ptr)
        self._dtype = NcclDataType(datatype)
        self._residence = _b.ScalarResidence(int(residence))
        self._op = _b.red_op_create_pre_mul_sum(scalar_ptr, int(self._dtype), int(self._residence),
                                                self._comm)
        self._scalar_array: Any = None  # host scalar kept alive by the Communicator

    @property
    def op(self) -> int:
        self._check_valid()
        return self._op

    def __int__(self) -> int:
        return self.op

    __index__ = __int__

    def _deallocate(self) -> None:
        _b.red_op_destroy(self._op, self._comm)

    def __repr__(self) -> str:
        return (f"<CustomRedOp: type=PreMulSum, dtype={self._dtype.name}, "
                f"residence={self._residence.name}, op={self._op}"
                f"{', closed' if self._closed else ''}>")


class DevCommResource(CommResource):
    """A device communicator (``ncclDevCommCreate``).  ``requirements`` is the
    address of a requirements struct, or the structs nccl.core built for it
    (with their team and resource chains and the handles the library fills):
    they stay alive as long as this object."""

    def __init__(self, comm_ptr: int, requirements: Any):
        super().__init__(comm_ptr)
        self._reqs = requirements if not isinstance(requirements, int) else None
        self._dev_comm = _b.dev_comm_create(self._comm, requirements if self._reqs is None
                                            else requirements.ptr)

    @property
    def resource_handles(self) -> tuple:
        """The handles of ``requirements.resources``, in their order."""
        return tuple(view_of(h, self._comm) for h in getattr(self._reqs, "handles", ()))

    def multimem_handle(self, team: Any) -> Any:
        """The multimem handle of a team its requirements asked multimem for."""
        check_team(team, self._comm)
        handles = getattr(self._reqs, "multimem", {})
        if team not in handles:
            raise KeyError(f"no multimem handle for {team!r}; it was not requested with "
                           "multimem=True in this device communicator's requirements")
        return view_of(handles[team], self._comm)

    @property
    def dev_comm(self):
        self._check_valid()
        return self._dev_comm

    @property
    def ptr(self) -> int:
        return self.dev_comm.ptr

    def _deallocate(self) -> None:
        _b.dev_comm_destroy(self._comm, self._dev_comm)
