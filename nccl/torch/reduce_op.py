"""torch.distributed ``ReduceOp`` -> the NCCL reduction.

SUM, PRODUCT, MIN, MAX and AVG are NCCL's own; PREMUL_SUM (``factor`` a
number or a one-element tensor) becomes a PreMulSum op made for the call.
The PreMulSum op of each
reduced dtype is made once per communicator over a one-element tensor that
the library reads at each use (``ncclScalarDevice``, a host pointer on the
host backend): a call sets the factor there.  On bool tensors (uint8 0/1, as ProcessGroupNCCL and gloo treat them) SUM is
a logical or (MAX) and PRODUCT a logical and (MIN); AVG and PREMUL_SUM are
refused.  NCCL has no bitwise reductions: BAND, BOR and BXOR are refused,
naming the alternatives.
"""
from __future__ import annotations

import math

import torch
from torch.distributed import ReduceOp

import nccl.core as nc

from .dtypes import COMPLEX_PARTS, NATIVE, WIDENED, reduction_error
from .errors import UnsupportedError

__all__ = ["SUM", "nccl_op", "reduce_dtype"]

SUM = ReduceOp.SUM  # compared first: the common case costs one comparison

# (torch op, NCCL op, its name); a ReduceOp compares equal to its RedOpType
_BUILTIN = ((ReduceOp.SUM, int(nc.SUM), "SUM"), (ReduceOp.AVG, int(nc.AVG), "AVG"),
            (ReduceOp.MAX, int(nc.MAX), "MAX"), (ReduceOp.MIN, int(nc.MIN), "MIN"),
            (ReduceOp.PRODUCT, int(nc.PROD), "PRODUCT"))
_BY_NAME = {name: n for _, n, name in _BUILTIN}
_BOOL = {"SUM": int(nc.MAX), "PRODUCT": int(nc.MIN), "MAX": int(nc.MAX), "MIN": int(nc.MIN)}
_BITWISE = {ReduceOp.BAND: "BAND", ReduceOp.BOR: "BOR", ReduceOp.BXOR: "BXOR"}


def reduce_dtype(dtype):
    """The dtype the library reduces for a tensor of ``dtype`` (None: none)."""
    if dtype in NATIVE:
        return dtype
    return WIDENED.get(dtype) or COMPLEX_PARTS.get(dtype)


def _name(op) -> str:
    for torch_op, _, name in _BUILTIN:
        if op == torch_op:
            return name
    if op == ReduceOp.PREMUL_SUM:
        return "PREMUL_SUM"
    for torch_op, name in _BITWISE.items():
        if op == torch_op:
            return name
    return repr(op)


def nccl_op(op, dtype, comm: nc.Communicator, premul: dict):
    """The NCCL op (an int or a CustomRedOp) for ReduceOp ``op`` on tensors
    of ``dtype``; ``premul`` holds the communicator's PreMulSum ops by dtype."""
    name = _name(op)
    if name in _BITWISE.values():
        raise UnsupportedError(
            f"ReduceOp.{name}: NCCL has no bitwise reductions; on bool tensors use "
            "ReduceOp.MIN (and) or ReduceOp.MAX (or), otherwise use a gloo group "
            "(dist.new_group(backend='gloo'))")
    if name not in _BOOL and name not in ("AVG", "PREMUL_SUM"):
        raise UnsupportedError(f"unknown reduction {name}")
    if dtype is torch.bool:
        if name not in _BOOL:
            raise UnsupportedError(f"ReduceOp.{name} on bool tensors: use SUM (or), "
                                   "PRODUCT (and), MIN or MAX, or convert to an integer type")
        return _BOOL[name]
    rdt = reduce_dtype(dtype)
    if rdt is None or (dtype in COMPLEX_PARTS and name not in ("SUM", "AVG", "PREMUL_SUM")):
        raise reduction_error(dtype, name)
    if name != "PREMUL_SUM":
        return _BY_NAME[name]
    return _pre_mul_sum(op.factor, dtype, rdt, comm, premul)


def _pre_mul_sum(factor, dtype, rdt, comm: nc.Communicator, premul: dict):
    if isinstance(factor, torch.Tensor):
        if factor.numel() != 1 or factor.is_complex() or not factor.is_cpu:
            raise UnsupportedError("PREMUL_SUM needs a real factor: a number or a one-element "
                                   f"CPU tensor, got a tensor of shape {tuple(factor.shape)}, "
                                   f"{factor.dtype} on {factor.device}")
        value = factor.item()
    else:
        value = factor
    if isinstance(value, complex):
        raise UnsupportedError("PREMUL_SUM with a complex factor: reduce with SUM and "
                               "multiply the result")
    value = float(value)
    if not rdt.is_floating_point and not (math.isfinite(value) and value == int(value)):
        raise UnsupportedError(f"PREMUL_SUM with factor {value} on {dtype}: the factor must "
                               "be an integer for integer tensors")
    entry = premul.get(rdt)
    if entry is None:
        scalar = torch.zeros(1, dtype=rdt)  # read by the library at every use
        entry = premul[rdt] = (scalar, comm.create_pre_mul_sum(scalar))
    entry[0].fill_(value)
    return entry[1]
