"""Tensors as the library gets them, and the results put back.

The library reads and writes a buffer as ``count`` elements of one of its
types, one flat block in memory order.  A tensor that is not that (a strided
or transposed view, a conj or neg view, a dtype NCCL lacks) is *staged*: a
contiguous copy of its values goes to the library, and the result is copied
back into the tensor after the call, so the result is exact whatever the
layout.  What cannot be staged exactly is refused before the call (its peers
fail too: ``calls.alike``).
"""
from __future__ import annotations

import torch

from nccl._errors import NcclInvalid

from .dtypes import BYTES_REFUSED, COMPLEX_PARTS, NATIVE, WIDENED
from .errors import UnsupportedError

__all__ = ["Staged", "stage", "check_tensor", "copy_into", "STRIDED", "IN", "OUT", "INOUT"]

# how a call uses a tensor
IN, OUT, INOUT = 1, 2, 3

STRIDED = torch.strided


class Staged:
    """``buf`` goes to the library for ``tensor``; ``copy`` (if not None) is
    the contiguous copy behind ``buf``, written back by ``back()``."""

    __slots__ = ("tensor", "copy", "buf")

    def __init__(self, tensor, copy, buf):
        self.tensor = tensor
        self.copy = copy
        self.buf = buf

    def back(self) -> None:
        if self.copy is not None:
            copy_into(self.tensor, self.copy)


def copy_into(dst, src) -> None:
    """``dst[...] = src`` (same number of elements), also into tensors that
    require grad: the collective writes them as gloo does, outside autograd."""
    if src.shape != dst.shape:
        src = src.reshape(dst.shape)
    if dst.requires_grad:
        with torch.no_grad():
            dst.copy_(src)
    else:
        dst.copy_(src)


def check_tensor(t, what: str) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{what} must be a torch.Tensor, got {type(t).__name__}")
    if t.device.type != "cpu":
        raise UnsupportedError(
            f"{what} is on {t.device}: nccl4py_host works on CPU tensors; use the 'nccl' "
            "backend (or PyTorch's 'nccl4py') for GPU tensors, in a group of its own "
            "(dist.new_group(backend='nccl'))")
    if t.layout is not STRIDED:
        raise UnsupportedError(f"{what} has layout {t.layout}: nccl4py_host works on dense "
                               "(strided) tensors; pass t.to_dense()")


def _plain(t) -> bool:
    return t.is_contiguous() and not t.is_neg() and not t.is_conj()


def _resolved(t):
    """A contiguous copy of t's values without view bits."""
    c = t.resolve_conj().resolve_neg()
    return c.contiguous() if c is not t else t.clone(memory_format=torch.contiguous_format)


def _writable(t, what: str) -> None:
    if torch._debug_has_internal_overlap(t) == 1:
        raise NcclInvalid(f"{what} has elements that share memory (an expanded or "
                          "overlapping view): a result cannot be written into it; pass a "
                          "tensor with distinct elements")


def stage(t, what: str, use: int = INOUT, reduce: bool = False) -> Staged:
    """What the library gets for tensor ``t``, which the call reads (IN),
    writes (OUT) or both (INOUT).  reduce: the call computes on the values
    (int16 widened, complex as float pairs) rather than moving bytes."""
    check_tensor(t, what)
    dt = t.dtype
    if dt in BYTES_REFUSED:
        raise UnsupportedError(f"{what} is a quantized tensor ({dt}): send t.int_repr() and "
                               "the quantization parameters instead")
    src = t.detach() if t.requires_grad else t  # same memory and view bits
    plain = _plain(src)
    if reduce and dt in WIDENED:
        plain = False
    if not plain and use & OUT:
        _writable(src, what)
    copy = None
    if plain:
        base = src
    elif reduce and dt in WIDENED:
        wide = WIDENED[dt]
        base = copy = (src.to(wide, memory_format=torch.contiguous_format) if use & IN
                       else torch.empty(src.shape, dtype=wide))
    else:
        base = copy = _resolved(src) if use & IN else torch.empty(src.shape, dtype=dt)
    back = copy if use & OUT else None  # an input's copy only lives in buf
    if dt in NATIVE or (reduce and dt in WIDENED):
        return Staged(t, back, base)
    if reduce:
        if dt in COMPLEX_PARTS:
            return Staged(t, back, torch.view_as_real(base))
        raise AssertionError(f"no reduction for {dt}")  # nccl_op refused it first
    try:
        return Staged(t, back, base.reshape(-1).view(torch.uint8))
    except RuntimeError as e:
        raise UnsupportedError(f"{what} ({dt}) has no byte view to move: {e}") from None
