"""PyTorch helpers (imported lazily as ``nccl.core.torch``)."""
from __future__ import annotations

from typing import Any

from nccl import _dtypes
from nccl._errors import NcclInvalid

from ..typing import NcclDataType

__all__ = ["empty", "resolve_tensor"]


def _torch():
    try:
        import torch
    except ImportError:
        raise ModuleNotFoundError("PyTorch is not installed") from None
    return torch


def _dtype_map(torch) -> dict:
    """torch dtype -> NcclDataType, for every data type this torch has."""
    m = {getattr(torch, name): NcclDataType(value) for value, name in _dtypes.NAMES.items()
         if hasattr(torch, name)}
    m[torch.bool] = NcclDataType(_dtypes.BOOL_AS)
    return m


def _row_major(tensor) -> bool:
    """Whether memory order is the tensor's row-major order (size-1
    dimensions may have any stride), as NCCL reads a buffer."""
    want = 1
    for size, stride in zip(reversed(tensor.shape), reversed(tensor.stride())):
        if size == 1:
            continue
        if stride != want:
            return tensor.numel() == 0
        want *= size
    return True


def resolve_tensor(tensor: Any, writable: bool = False) -> tuple[int, int, NcclDataType, int]:
    """``(data_ptr, numel, NcclDataType, device index)`` of a tensor.

    The rules of nccl.core's own buffer resolution (docs/semantics.md) apply:
    a tensor whose memory is not in its row-major order, or with the
    negative or conjugate bit set (its memory does not hold its values), is
    NcclInvalid; with ``writable`` (the library writes into it) so is a
    tensor that requires grad."""
    torch = _torch()
    if not isinstance(tensor, torch.Tensor):
        raise NcclInvalid(f"expected a torch.Tensor, got {type(tensor).__name__}")
    dt = _dtype_map(torch).get(tensor.dtype)
    if dt is None:
        raise NcclInvalid(f"Unsupported torch dtype {tensor.dtype} has no NCCL equivalent. "
                          "NCCL does not support complex, int16, or quantized types.")
    if tensor.is_neg():
        raise NcclInvalid("the tensor has the negative bit set (a lazy negation such as "
                          "x.conj().imag): its memory holds the values un-negated; pass "
                          "x.resolve_neg()")
    if writable and tensor.requires_grad:
        raise NcclInvalid("the tensor requires grad: the library would write into it behind "
                          "autograd's back; pass x.detach() to write its memory on purpose")
    if not _row_major(tensor):
        raise NcclInvalid(f"the tensor is not contiguous in row-major (C) order (shape "
                          f"{tuple(tensor.shape)}, strides {tensor.stride()} elements): NCCL "
                          "reads a buffer as one flat block; pass x.contiguous()")
    return tensor.data_ptr(), tensor.numel(), dt, tensor.device.index


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
