"""Which torch dtypes travel how.

* NCCL's own types (``nccl._dtypes``: int8 ... float8_e5m2) and bool (as
  uint8) go to the library as they are.
* Every other dtype with whole bytes per element moves as raw bytes in the
  collectives that only move data (broadcast, all-gather, gather, scatter,
  all-to-all, send/recv): exact for any dtype.
* Reductions need arithmetic on the type: int16 and uint16 are widened to
  int32 / uint32 and narrowed back (exact: integer sums, products, minima and
  maxima agree modulo 2**16; averages are of the exact sum, truncated);
  complex64 / complex128 / complex32 are pairs of float32 / float64 /
  float16 for SUM, AVG and a real PREMUL_SUM; everything else (complex
  MIN/MAX/PRODUCT, float8 *fnuz* and e8m0, float4, bits, sub-byte and
  quantized types) is refused with the conversion to make.
"""
from __future__ import annotations

import torch

from nccl import _dtypes

from .errors import UnsupportedError

__all__ = ["NATIVE", "WIDENED", "COMPLEX_PARTS", "BYTES_REFUSED", "reduction_error"]

# NCCL's types by their array names (torch uses the same names), and bool
NATIVE: frozenset = frozenset({getattr(torch, name) for name in _dtypes.NAMES.values()
                               if hasattr(torch, name)} | {torch.bool})

# reductions of these run on the wider type
WIDENED: dict = {torch.int16: torch.int32, torch.uint16: torch.uint32}

# complex -> the real type of its two parts (SUM, AVG, real PREMUL_SUM only)
COMPLEX_PARTS: dict = {torch.complex64: torch.float32, torch.complex128: torch.float64,
                       torch.complex32: torch.float16}

# quantized tensors have no plain byte view to move
BYTES_REFUSED: frozenset = frozenset(getattr(torch, n) for n in
                                     ("qint8", "quint8", "qint32", "quint4x2", "quint2x4")
                                     if hasattr(torch, n))


def reduction_error(dtype, op: str) -> UnsupportedError:
    """The refusal of reduction ``op`` (a ReduceOp name) on ``dtype``."""
    if dtype in COMPLEX_PARTS:
        return UnsupportedError(
            f"ReduceOp.{op} on {dtype}: complex numbers have no order and their product is "
            "not elementwise on the parts; nccl4py_host reduces complex tensors with SUM, AVG "
            "and a real PREMUL_SUM only (reduce torch.view_as_real(t) yourself for other ops)")
    if dtype in BYTES_REFUSED:
        return UnsupportedError(
            f"ReduceOp.{op} on quantized {dtype}: reduce t.dequantize() (or t.int_repr()) instead")
    return UnsupportedError(
        f"ReduceOp.{op} on {dtype}: NCCL has no such type; reduce t.to(torch.float32) "
        "(or torch.bfloat16) and convert back")
