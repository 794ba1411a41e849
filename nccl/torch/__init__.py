"""``nccl4py_host``: a torch.distributed backend for CPU tensors on
nccl4py's host backend (see docs/torch.md).

    import nccl.torch  # registers the backend (torch also loads it on its own)
    import torch.distributed as dist
    dist.init_process_group("nccl4py_host")   # under torchrun, or init_method=/store=

Importing this module registers the backend; the process group class,
``HostProcessGroup``, and ``UnsupportedError`` (what the backend cannot do
exactly) are imported on first use.  Needs PyTorch (tested with 2.13 and 2.14).
"""
from __future__ import annotations

try:
    import torch  # noqa: F401
except ImportError as e:
    raise ImportError("nccl.torch needs PyTorch: pip install 'nccl4py[torch]'") from e

from .registration import BACKEND, register, registered

__all__ = ["BACKEND", "register", "registered", "HostProcessGroup", "UnsupportedError"]

register()


def __getattr__(name: str):
    if name == "HostProcessGroup":
        from .process_group import HostProcessGroup

        return HostProcessGroup
    if name == "UnsupportedError":
        from .errors import UnsupportedError

        return UnsupportedError
    raise AttributeError(f"module 'nccl.torch' has no attribute {name!r}")
