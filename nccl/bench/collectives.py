"""The collectives the benchmark knows: buffer sizes, bandwidth factors, calls,
input patterns and expected results (nccl-tests' conventions).

Sizes follow nccl-tests: for a test size of ``S`` bytes and element size
``e`` the base count is ``S // e``.  The collectives that split it across
ranks use ``(count // nranks)`` rounded down to a multiple of ``16 // e``
elements per rank.  ``algbw = bytes / 1e9 / seconds`` and ``busbw = algbw *
factor`` with nccl-tests' factors (see ``busbw_factor``).
"""
from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from nccl import _dtypes

__all__ = ["Collective", "COLLECTIVES", "TYPES", "OPS", "resolve_name", "method_name",
           "busbw_factor", "counts", "pattern", "expected", "tolerance"]

# nccl-tests' type names, in ncclDataType_t order (value = index).
TYPES = ("int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double",
         "bfloat16", "f8e4m3", "f8e5m2")
ITEMSIZE = _dtypes.SIZES  # bytes per element, by ncclDataType_t value
# nccl-tests' op names; "mulsum" is PreMulSum (here with the scalar 2).
OPS = ("sum", "prod", "max", "min", "avg", "mulsum")
MULSUM_SCALAR = 2


@dataclass(frozen=True)
class Collective:
    name: str          # nccl-tests' name, without _perf
    split: str         # "none", "gather" (recv = n * send), "scatter" (send = n * recv), "a2a"
    factor: Callable[[int], float]  # busbw factor for n ranks
    multiplier: bool   # algbw bytes are count * size * n (else count * size)
    rccl_symbol: str | None = None  # only in libraries exporting this symbol

    @property
    def binary(self) -> str:
        return f"{self.name}_perf"

    @property
    def reduces(self) -> bool:
        """Whether it takes a reduction op (its Communicator method has ``op``)."""
        return "op" in _parameters(self.name)

    @property
    def rooted(self) -> bool:
        """Whether it takes a root (its Communicator method has ``root``)."""
        return "root" in _parameters(self.name)


@functools.cache
def _parameters(name: str) -> tuple[str, ...]:
    """The parameter names of the Communicator method that runs collective
    ``name`` (none for sendrecv)."""
    from nccl.core import Communicator

    method = method_name(COLLECTIVES[name], Communicator)
    if method is None:
        return ()
    return tuple(inspect.signature(getattr(Communicator, method)).parameters)


def _ring(n: int) -> float:
    return (n - 1) / n


def _allreduce(n: int) -> float:
    return 2 * (n - 1) / n


def _one(n: int) -> float:
    return 1.0


COLLECTIVES: dict[str, Collective] = {c.name: c for c in (
    Collective("all_reduce", "none", _allreduce, False),
    Collective("all_gather", "gather", _ring, True),
    Collective("broadcast", "none", _one, False),
    Collective("reduce", "none", _one, False),
    Collective("reduce_scatter", "scatter", _ring, True),
    Collective("alltoall", "a2a", _ring, True),
    Collective("gather", "gather", _ring, True),
    Collective("scatter", "scatter", _ring, True),
    Collective("sendrecv", "none", _one, False),
    Collective("allreduce_with_bias", "none", _allreduce, False, "ncclAllReduceWithBias"),
    Collective("alltoallv", "a2a", _ring, True, "ncclAllToAllv"),
)}

_ALIASES = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter":
            "reduce_scatter", "all_to_all": "alltoall", "send_recv": "sendrecv", "bcast":
            "broadcast", "all_reduce_with_bias": "allreduce_with_bias", "all_to_all_v":
            "alltoallv"}


def resolve_name(text: str) -> str:
    """A collective's canonical name from nccl-tests' (``all_reduce_perf``) or ours."""
    name = text.strip().lower().replace("-", "_")
    if name.endswith("_perf"):
        name = name[:-5]
    name = _ALIASES.get(name, name)
    if name not in COLLECTIVES:
        raise ValueError(f"unknown collective {text!r}; choose from "
                         + ", ".join(COLLECTIVES) + " or all")
    return name


def method_name(coll: Collective, comm_type: type) -> str | None:
    """The method of ``comm_type`` (a Communicator class) that runs ``coll``:
    the one of its names (ours or an alias) that the class has; None for
    sendrecv (a send and a recv in a group)."""
    for name in (coll.name, *(a for a, c in _ALIASES.items() if c == coll.name)):
        if callable(getattr(comm_type, name, None)):
            return name
    return None


def busbw_factor(coll: Collective, nranks: int) -> float:
    return coll.factor(nranks)


def counts(coll: Collective, size: int, dtype: int, nranks: int) -> tuple[int, int, int]:
    """(send count, recv count, count passed to the call) for a test size in bytes."""
    esz = ITEMSIZE[dtype]
    count = size // esz
    if coll.split == "none":
        return count, count, count
    per_rank = (count // nranks) & ~(max(16 // esz, 1) - 1)
    if coll.split == "gather":
        return per_rank, per_rank * nranks, per_rank
    if coll.split == "scatter":
        return per_rank * nranks, per_rank, per_rank
    return per_rank * nranks, per_rank * nranks, per_rank  # a2a


def algbw_bytes(coll: Collective, paramcount: int, dtype: int, nranks: int) -> int:
    return paramcount * ITEMSIZE[dtype] * (nranks if coll.multiplier else 1)


def pattern(rank: int, nelem: int, op: str | None, nranks: int, salt: int = 0) -> Any:
    """Rank ``rank``'s input as float64 values exact in every type.

    Reductions use 0..3 (prod: 1 everywhere except a single 2 per element
    across ranks, so products stay exact); data movement uses 0..60.
    """
    i = np.arange(nelem, dtype=np.int64)
    if op == "prod":
        return np.where((i + rank) % max(nranks, 1) == 0, 2.0, 1.0)
    if op is not None:
        return ((i * 3 + rank * 5 + salt) % 4).astype(np.float64)
    return ((i * 7 + rank * 13 + salt * 3) % 61).astype(np.float64)


def reduce_values(inputs: list[Any], op: str, nranks: int) -> Any:
    stack = np.stack(inputs)
    if op == "sum":
        return stack.sum(axis=0)
    if op == "prod":
        return stack.prod(axis=0)
    if op == "max":
        return stack.max(axis=0)
    if op == "min":
        return stack.min(axis=0)
    if op == "avg":
        return stack.sum(axis=0) / nranks
    if op == "mulsum":
        return (stack * MULSUM_SCALAR).sum(axis=0)
    raise ValueError(op)


def expected(coll: Collective, rank: int, nranks: int, root: int, op: str | None,
             sendcount: int, recvcount: int, paramcount: int,
             inputs: Callable[[int], Any]) -> Any | None:
    """The float64 values this rank's receive buffer must hold, or None when
    this rank's result is not defined (non-root of reduce/gather)."""
    name = coll.name
    if name in ("all_reduce", "allreduce_with_bias"):
        return reduce_values([inputs(r) for r in range(nranks)], op or "sum", nranks)
    if name == "reduce":
        if rank != root:
            return None
        return reduce_values([inputs(r) for r in range(nranks)], op or "sum", nranks)
    if name == "broadcast":
        return inputs(root)
    if name == "all_gather":
        return np.concatenate([inputs(r) for r in range(nranks)]) if nranks else None
    if name == "gather":
        if rank != root:
            return None
        return np.concatenate([inputs(r) for r in range(nranks)])
    if name == "reduce_scatter":
        lo = rank * paramcount
        return reduce_values([inputs(r)[lo:lo + paramcount] for r in range(nranks)],
                             op or "sum", nranks)
    if name == "scatter":
        lo = rank * paramcount
        return inputs(root)[lo:lo + paramcount]
    if name in ("alltoall", "alltoallv"):
        lo = rank * paramcount
        return np.concatenate([inputs(r)[lo:lo + paramcount] for r in range(nranks)])
    if name == "sendrecv":
        return inputs((rank - 1) % nranks)
    raise ValueError(name)


def tolerance(dtype: int, op: str | None, nranks: int) -> float:
    """Relative tolerance of a check: 0 (exact) for data movement and integer
    reductions, a few units in the last place for floating reductions."""
    if op is None:
        return 0.0
    bits = _dtypes.MANTISSA_BITS.get(dtype)
    if bits is None:
        return 0.0
    return float(max(nranks, 2) * 2.0 ** -bits)
