"""Registration of the ``nccl4py_host`` backend with torch.distributed.

``register()`` (run by ``import nccl.torch``) calls
``torch.distributed.Backend.register_backend("nccl4py_host", ...,
devices=["cpu"])``.  Without that import torch finds the backend through
nccl4py's entry points (pyproject.toml):

- torch >= 2.14: ``register`` is the ``torch.distributed.backends`` entry
  point, which torch loads when ``init_process_group`` / ``new_group`` /
  ``is_backend_available`` first names the backend;
- torch 2.13: the ``torch.backends`` entry point
  (``_nccl4py_torch_autoload``, which does nothing on torch >= 2.14) calls
  ``autoload()`` while torch is imported (unless
  ``TORCH_DEVICE_BACKEND_AUTOLOAD=0``).  It must never fail torch's import:
  it warns instead.

This module imports nothing heavy; the process group and nccl.core are
imported when the first group of this backend is created.
"""
from __future__ import annotations

import warnings

__all__ = ["BACKEND", "register", "registered", "autoload"]

BACKEND = "nccl4py_host"


def _create(store, rank: int, size: int, timeout):
    from .backend import check, mixed_group, wrap
    from .process_group import HostProcessGroup

    others = mixed_group()  # "cpu:nccl4py_host,cuda:nccl": the CPU's backend of a group
    check(others)
    group = HostProcessGroup(store, rank, size, timeout)
    return wrap(group) if others else group


def registered() -> bool:
    import torch.distributed as dist

    return dist.is_available() and BACKEND.upper() in dist.Backend._plugins


def register() -> None:
    """Register the backend (again: nothing happens).  It serves CPU tensors;
    the default backend of CPU tensors stays gloo unless chosen by name."""
    import torch.distributed as dist

    if not dist.is_available():
        raise ImportError("this torch was built without torch.distributed; nccl4py_host "
                          "needs it")
    if not registered():
        dist.Backend.register_backend(BACKEND, _create, devices=["cpu"])


def autoload() -> None:
    try:
        import torch.distributed as dist

        if dist.is_available():
            register()
    except Exception as e:  # never break `import torch`
        warnings.warn(f"nccl4py could not register the {BACKEND} backend: {e}", RuntimeWarning,
                      stacklevel=2)
