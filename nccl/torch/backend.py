"""``HostBackend``: nccl4py_host as one device's backend of a torch group.

A device:backend string that names nccl4py_host beside another backend
(``init_process_group("cpu:nccl4py_host,cuda:nccl")``) makes one torch
``ProcessGroup`` that hands each tensor to its device's backend.  torch takes
only a ``Backend`` there: a ``ProcessGroup`` returned by a backend's creator
replaces the whole group, and the other devices' backends with it.  torch
2.14 calls the methods of a Python subclass of its C++ ``Backend`` (2.13
cannot construct one).  ``HostBackend`` is that subclass: each call goes to
a ``HostProcessGroup`` of the same ranks, which does the work.

torch tells a backend's creator nothing of the group's other devices; the
creator reads them from the ``BackendConfig`` of torch's group-creating
function (``mixed_group``).  Where that cannot be read the group is taken
to be nccl4py_host's alone.
"""
from __future__ import annotations

import sys
from types import FrameType

from torch._C._distributed_c10d import Backend as _C10dBackend

from .errors import UnsupportedError
from .registration import BACKEND

__all__ = ["HostBackend", "mixed_group", "wrap"]


def _calls(group_class) -> list[str]:
    """The methods of torch's C++ Backend that HostProcessGroup implements."""
    ours = [k for k in group_class.__mro__ if k.__module__.startswith("nccl.")]
    return [n for n in dir(_C10dBackend) if not n.startswith("__") and n != "name"
            and callable(getattr(group_class, n, None)) and any(n in vars(k) for k in ours)]


class HostBackend(_C10dBackend):
    """The CPU backend of a mixed torch group; ``group`` is the
    ``HostProcessGroup`` that runs its calls, ``communicator`` its
    ``nccl.core.Communicator``."""

    def __init__(self, group):
        super().__init__(group.rank(), group.size())
        self.group = group

    # torch's own properties and queries of a backend go through the
    # trampoline back to themselves when a Python subclass does not define
    # them (RecursionError): this backend says what it does not do.
    supports_coalescing = supports_splitting = supports_shrinking = property(lambda self: False)
    supports_reconfigure = supports_time_estimate = supports_window = property(lambda self: False)

    def supports_tensor_alloc(self, device) -> bool:
        return False

    @property
    def options(self):
        return _C10dBackend.Options(BACKEND, self.group._timeout)

    @property
    def communicator(self):
        return self.group.communicator

    def getBackendName(self) -> str:
        return BACKEND

    def name(self) -> str:
        return BACKEND

    def __repr__(self) -> str:
        return f"<HostBackend of {self.group!r}>"


def _forward(name: str):
    def call(self, *args, **kwargs):
        return getattr(self.group, name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    return call


def _forward_all() -> None:
    from .process_group import HostProcessGroup

    for name in _calls(HostProcessGroup):
        setattr(HostBackend, name, _forward(name))


_forward_all()


def mixed_group(depth: int = 2) -> list[str]:
    """The other ``device:backend`` pairs of the group torch is creating
    (empty when nccl4py_host serves it alone, or when torch does not say)."""
    f: FrameType | None = sys._getframe(depth)
    for _ in range(4):
        if f is None or f.f_code.co_name == "_new_process_group_helper":
            break
        f = f.f_back
    config = None
    if f is not None and f.f_code.co_name == "_new_process_group_helper":
        config = f.f_locals.get("backend_config")
    pairs: dict = getattr(config, "get_device_backend_map", dict)()
    return sorted(f"{d}:{b}" for d, b in pairs.items() if str(b).lower() != BACKEND)


def _constructible() -> bool:
    try:
        type("Probe", (_C10dBackend,), {})(0, 1)
    except TypeError:  # torch 2.13: "No constructor defined!"
        return False
    return True


def check(others: list[str]) -> None:
    """Refuse a mixed group where torch cannot call a Python backend."""
    if others and not _constructible():
        import torch

        raise UnsupportedError(
            f"nccl4py_host beside {', '.join(others)} in one group needs torch >= 2.14 "
            f"(this is {torch.__version__}, which cannot call a Python backend of one "
            "device): make a group per backend (init_process_group for one, "
            "dist.new_group(backend=...) for the other)")


def wrap(group) -> HostBackend:
    return HostBackend(group)
