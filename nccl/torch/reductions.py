"""The reductions of ``HostProcessGroup``: all-reduce, reduce,
reduce-scatter (lists, tensors, coalesced).

The common case (one contiguous CPU tensor of an NCCL type, SUM) takes a
short path straight to ``Communicator.allreduce``; everything else goes
through the reduction's translation (``reduce_op``) and staging."""
from __future__ import annotations

import torch

import nccl.core as nc
from nccl._errors import NCCLError, NcclInvalid

from . import p2p
from .calls import Calls, alike, fast, same_dtype, tag_of
from .dtypes import NATIVE
from .reduce_op import SUM
from .staging import IN, INOUT, OUT, STRIDED, check_tensor, stage
from .work import completed

__all__ = ["Reductions"]

_NC_SUM = int(nc.SUM)
_FAST = NATIVE - {torch.bool}  # a SUM of these needs no translation


class Reductions(Calls):
    def allreduce(self, tensors, opts=None):
        if p2p.queue or p2p.running:
            p2p.flush()
        red = opts.reduceOp if opts is not None else SUM
        if len(tensors) == 1:
            t = tensors[0]
            if (red == SUM and t.dtype in _FAST and t.layout is STRIDED and t.is_cpu
                    and t.is_contiguous() and not t.is_neg() and not t.requires_grad):
                if opts is not None and opts.asyncOp:
                    return self._launch([lambda: self._comm.allreduce(t, t, _NC_SUM)], (),
                                        tensors, opts)
                lane = self._lane
                if lane is not None and lane.busy:
                    lane.drain()
                try:
                    self._comm.allreduce(t, t, _NC_SUM)
                except NCCLError:
                    self._failed = True
                    raise
                return completed(tensors)
        return self._allreduce(tensors, red, opts)

    @alike
    def _allreduce(self, tensors, red, opts):
        calls, staged, op = [], [], None
        for t in tensors:
            check_tensor(t, "all_reduce tensor")
            op = self._op(red, t.dtype)
            s = stage(t, "all_reduce tensor", INOUT, reduce=True)
            calls.append(lambda b=s.buf, op=op: self._comm.allreduce(b, b, op))
            staged.append(s)
        return self._launch(calls, staged, tensors, opts, op, tag_of(*tensors))

    @alike
    def allreduce_coalesced(self, tensors, opts=None):
        if p2p.queue or p2p.running:
            p2p.flush()
        return self._allreduce(tensors, opts.reduceOp if opts is not None else SUM, opts)

    @alike
    def reduce(self, tensors, opts):
        if p2p.queue or p2p.running:
            p2p.flush()
        root = self._check_root(opts.rootRank)
        calls, staged, op = [], [], None
        for t in tensors:
            check_tensor(t, "reduce tensor")
            op = self._op(opts.reduceOp, t.dtype)
            s = stage(t, "reduce tensor", INOUT, reduce=True)
            calls.append(lambda b=s.buf, op=op: self._comm.reduce(b, b, op, root=root))
            if self._rank == root:
                staged.append(s)
        return self._launch(calls, staged, tensors, opts, op, tag_of(*tensors))

    @alike
    def reduce_scatter(self, outputs, input_lists, opts):
        if p2p.queue or p2p.running:
            p2p.flush()
        if len(outputs) != len(input_lists):
            raise NcclInvalid("reduce_scatter: one list of inputs per output")
        calls, staged, op = [], [], None
        for out, inputs in zip(outputs, input_lists):
            check_tensor(out, "reduce_scatter output")
            self._parts("reduce_scatter input_list", inputs, out)
            op = self._op(opts.reduceOp, out.dtype)
            so = stage(out, "reduce_scatter output", OUT, reduce=True)
            staged.append(so)
            ins = [stage(t, "reduce_scatter input", IN, reduce=True) for t in inputs]
            if not out.numel() and not any(t.numel() for t in inputs):
                continue  # nothing to reduce, on any rank
            if all(t.numel() == out.numel() for t in inputs):
                flat = torch.cat([s.buf.reshape(-1) for s in ins])
                calls.append(lambda f=flat, b=so.buf, op=op: self._comm.reduce_scatter(f, b, op))
            else:  # uneven parts: one reduce per rank, to that rank
                if inputs[self._rank].numel() != out.numel():
                    raise NcclInvalid(f"reduce_scatter: input {self._rank} has "
                                      f"{inputs[self._rank].numel()} elements, the output "
                                      f"{out.numel()}")
                for r, s in enumerate(ins):
                    calls.append(lambda i=s.buf, r=r, b=so.buf, op=op: self._comm.reduce(
                        i, b if r == self._rank else None, op, root=r))
        return self._launch(calls, staged, outputs, opts, op, tag_of(*outputs))

    def _reduce_scatter_one(self, out, inp, red, calls: list, staged: list):
        check_tensor(out, "reduce_scatter output")
        check_tensor(inp, "reduce_scatter input")
        same_dtype("reduce_scatter_tensor", (inp,), out.dtype)
        if inp.numel() != self._size * out.numel():
            raise NcclInvalid(f"reduce_scatter_tensor: the input has {inp.numel()} elements, "
                              f"expected {self._size} x the output's {out.numel()}")
        op = self._op(red, out.dtype)
        if not out.numel():  # nothing to reduce, on any rank
            return op
        if fast(out) and fast(inp):
            calls.append(lambda: self._comm.reduce_scatter(inp, out, op))
            return op
        so = stage(out, "reduce_scatter output", OUT, reduce=True)
        si = stage(inp, "reduce_scatter input", IN, reduce=True)
        calls.append(lambda: self._comm.reduce_scatter(si.buf, so.buf, op))
        staged.append(so)
        return op

    @alike
    def reduce_scatter_single(self, output, input, opts):
        if p2p.queue or p2p.running:
            p2p.flush()
        calls, staged = [], []
        op = self._reduce_scatter_one(output, input, opts.reduceOp, calls, staged)
        return self._launch(calls, staged, [output], opts, op, tag_of(output))

    _reduce_scatter_base = reduce_scatter_single

    @alike
    def reduce_scatter_single_coalesced(self, outputs, inputs, opts):
        if p2p.queue or p2p.running:
            p2p.flush()
        calls, staged, op = [], [], None
        for out, inp in zip(outputs, inputs, strict=True):
            op = self._reduce_scatter_one(out, inp, opts.reduceOp, calls, staged)
        return self._launch(calls, staged, outputs, opts, op, tag_of(*outputs))

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

