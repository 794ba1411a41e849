"""What the collectives of ``HostProcessGroup`` share: running nccl.core
calls (one NCCL group when there are several) on the calling thread or on
the group's lane (``lane``), checking roots and per-rank lists, and the
test of a tensor the library can take as it is."""
from __future__ import annotations

import ctypes
import functools
from typing import Sequence

import nccl.core as nc
from nccl._errors import NCCLError, NcclInvalid

import torch
from torch.distributed import ReduceOp

from .dtypes import NATIVE
from .lane import Lane
from .reduce_op import nccl_op
from .staging import STRIDED
from .work import completed

__all__ = ["After", "Calls", "fast", "same_dtype", "overlap", "tag_of", "alike",
           "check_outputs"]

_OWN = NATIVE - {torch.bool}  # the library sees these as they are
_set_call_tag = None  # the host backend's nccl4pyHostSetCallTag


def tag_of(*tensors) -> bytes | None:
    """The call's tag for the host backend's mismatch check: the torch dtypes
    of its tensors that the library sees as another type (int16 widened or
    moved as bytes, bool as uint8, ...), None when there are none."""
    names = [str(t.dtype) for t in tensors if t.dtype not in _OWN]
    return ",".join(dict.fromkeys(names)).encode() if names else None


def set_call_tag(comm: nc.Communicator, tag: bytes | None) -> None:
    """Tag the collectives ``comm`` submits from now on (None: untagged)."""
    global _set_call_tag
    if _set_call_tag is None:
        path = nc.get_lib_path()
        if path is None:
            raise NcclInvalid("call tags need the host backend, and no library is loaded")
        fn = ctypes.CDLL(str(path)).nccl4pyHostSetCallTag
        fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_char_p], ctypes.c_int
        _set_call_tag = fn
    rc = _set_call_tag(comm.ptr, tag)
    if rc:
        raise NcclInvalid(f"nccl4pyHostSetCallTag failed ({rc}) on {comm!r}")


def fast(t) -> bool:
    """t goes to the library as it is."""
    return (t.dtype in NATIVE and t.layout is STRIDED and t.is_cpu and t.is_contiguous()
            and not t.is_neg() and not t.requires_grad)


def same_dtype(what: str, tensors, dtype) -> None:
    for t in tensors:
        if t.dtype != dtype:
            raise NcclInvalid(f"{what}: every tensor must have the input's dtype {dtype}, "
                              f"got {t.dtype}")


# the tag of the stand-in call a rank makes for a call it refused (``alike``)
REFUSED_TAG = b"arguments refused on that rank"
_RAN = "_nccl4py_host_ran"  # set on an error raised once the library calls began


def alike(method):
    """A collective method whose refusals of its arguments (raised before
    any library call) fail the group's other ranks too: the refusing rank
    makes a stand-in call, a one-byte all-reduce tagged ``REFUSED_TAG``,
    which every rank that did not refuse finds mismatched (an NCCLError
    naming it, at that call or, on a rank that waits for nobody in it, at
    its next one); ranks that all refused make matching stand-ins and keep
    their group.  Then the refusal is raised."""
    @functools.wraps(method)
    def call(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except (NcclInvalid, TypeError, ValueError) as e:
            if not getattr(e, _RAN, False):
                self._stand_in()
            raise
    return call


def check_outputs(what: str, outs) -> None:
    """Outputs a result is copied into must take it exactly: no elements
    that share memory (expanded views), no two outputs over the same memory."""
    spans = []
    for i, o in enumerate(outs):
        if o.numel() == 0:
            continue
        if not o.is_contiguous() and torch._debug_has_internal_overlap(o) == 1:
            raise NcclInvalid(f"{what} {i} has elements that share memory (an expanded or "
                              "overlapping view, stride 0): a result cannot be written into "
                              "it; pass a tensor with distinct elements")
        if o.is_contiguous():
            start = o.data_ptr()
            spans.append((start, start + o.numel() * o.element_size(), i))
    spans.sort()
    for (_, end, i), (start, _, j) in zip(spans, spans[1:]):
        if start < end:
            raise NcclInvalid(f"{what}s {min(i, j)} and {max(i, j)} share memory: each "
                              "receives another rank's part; pass distinct tensors")


class After:
    """A step run after a call's library calls, as a staged output's copy back."""

    __slots__ = ("back",)

    def __init__(self, fn):
        self.back = fn


class Calls:
    """The helpers of the collective mixins (the process group sets these)."""

    _comm: nc.Communicator
    _rank: int
    _size: int
    _premul: dict
    _failed: bool
    _lane: Lane | None
    _group_name: str

    def _op(self, op, dtype):
        if op == ReduceOp.PREMUL_SUM:
            self._drain()  # its factor is set now, in the op's scalar, for this call
        return nccl_op(op, dtype, self._comm, self._premul)

    def _drain(self) -> None:
        lane = self._lane
        if lane is not None and lane.busy:
            lane.drain()

    def _launch(self, calls: list, staged: Sequence, result: list, opts, op=None,
                tag: bytes | None = None, group: bool = False):
        """Run the calls on the lane when the caller asked for async_op (not
        from the lane's own thread, not with a PREMUL_SUM, whose factor is
        set now), else here; the Work.  *staged* may hold any objects with a
        ``back()`` run after the calls."""
        lane = self._lane
        if (opts is not None and getattr(opts, "asyncOp", False)
                and not isinstance(op, nc.CustomRedOp)
                and not (lane is not None and lane.here())):
            if lane is None:
                lane = self._lane = Lane(f"nccl4py_host lane {self._group_name}")
            return lane.submit(lambda: self._execute(calls, staged, group, tag), result)
        self._drain()
        self._execute(calls, staged, group, tag)
        return completed(result)

    def _execute(self, calls: list, staged: Sequence = (), always_group: bool = False,
                 tag: bytes | None = None) -> None:
        """Run the calls (one NCCL group when several, or always when
        *always_group*), tagged with *tag* (``tag_of``), then copy the staged
        outputs back."""
        if tag is not None and calls:
            set_call_tag(self._comm, tag)
        try:
            if len(calls) == 1 and not always_group:
                calls[0]()
            elif calls or always_group:
                with nc.group():
                    for call in calls:
                        call()
        except NCCLError:
            self._failed = True
            raise
        except Exception as e:  # nccl.core's own checks: every rank made the call
            try:
                setattr(e, _RAN, True)
            except AttributeError:
                pass
            raise
        finally:
            if tag is not None and calls:
                set_call_tag(self._comm, None)
        for s in staged:
            s.back()

    def _stand_in(self) -> None:
        """The call a rank makes in place of one it refused (``alike``)."""
        b = torch.zeros(1, dtype=torch.uint8)
        try:
            self._drain()
            set_call_tag(self._comm, REFUSED_TAG)
            try:
                self._comm.allreduce(b, b, 0)  # ncclSum
            finally:
                set_call_tag(self._comm, None)
        except NCCLError:
            self._failed = True  # a mismatch with the ranks that did not refuse
        except Exception:  # noqa: S110 - the refusal is what the caller gets
            pass

    def _check_root(self, root: int) -> int:
        if not 0 <= root < self._size:
            raise NcclInvalid(f"root {root} is not a rank of this group of {self._size}")
        return root

    def _parts(self, what: str, parts, like) -> None:
        """``parts`` is one tensor per rank, each with ``like``'s dtype."""
        if len(parts) != self._size:
            raise NcclInvalid(f"{what}: expected {self._size} tensors (one per rank), "
                              f"got {len(parts)}")
        same_dtype(what, parts, like.dtype)


def overlap(a, b) -> bool:
    """Whether the memory of tensors a and b may overlap."""
    if a.numel() == 0 or b.numel() == 0:
        return False
    sa = a.untyped_storage()
    sb = b.untyped_storage()
    a0, b0 = sa.data_ptr(), sb.data_ptr()
    return a0 < b0 + sb.nbytes() and b0 < a0 + sa.nbytes()

