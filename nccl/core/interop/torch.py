"""PyTorch helpers (imported lazily as ``nccl.core.torch``)."""
from __future__ import annotations

from typing import Any

from nccl import _nccl
from nccl._errors import NcclInvalid

from ..typing import NcclDataType

__all__ = ["empty", "resolve_tensor"]


def _torch():
    try:
        import torch
    except ImportError:
        raise ModuleNotFoundError("PyTorch is not installed") from None
    return torch


def resolve_tensor(tensor: Any, writable: bool = False) -> tuple[int, int, NcclDataType, int]:
    """``(data_ptr, numel, NcclDataType, device index)`` of a tensor.

    nccl.core's own buffer resolution (the C one, docs/semantics.md) decides:
    a tensor whose memory is not in its row-major order, or with the
    negative or conjugate bit set (its memory does not hold its values), is
    NcclInvalid; with ``writable`` (the library writes into it) so is a
    tensor that requires grad."""
    torch = _torch()
    if not isinstance(tensor, torch.Tensor):
        raise NcclInvalid(f"expected a torch.Tensor, got {type(tensor).__name__}")
    ptr, count, dtype, _, _, _ = _nccl.resolve_buffer(tensor, "the tensor", writable)
    return ptr, count, NcclDataType(dtype), tensor.device.index


def empty(*size: Any, dtype: Any = None, device: Any = None, morder: str = "C"):
    """A tensor in memory from ``ncclMemAlloc`` (CUDA/ROCm devices only)."""
    torch = _torch()
    from ..memory import mem_alloc

    if morder not in ("C", "F"):
        raise NcclInvalid(f"morder must be 'C' or 'F', got {morder!r}")
    shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
    dtype = dtype or torch.get_default_dtype()
    dev = torch.device("cuda", device) if isinstance(device, int) else torch.device(device or "cuda")
    if dev.type != "cuda":
        raise NcclInvalid(f"NCCL tensors must be on CUDA device, got {dev}")
    numel = 1
    for s in shape:
        numel *= int(s)
    itemsize = torch.empty((), dtype=dtype).element_size()
    buf = mem_alloc(max(numel * itemsize, 1), dev.index)
    t = torch.from_dlpack(buf).view(dtype)[:numel]
    if morder == "F":
        strides, acc = [], 1
        for s in shape:
            strides.append(acc)
            acc *= int(s)
        return t.as_strided(shape, strides)
    return t.view(shape)
