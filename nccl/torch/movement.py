"""The collectives of ``HostProcessGroup`` that move data: broadcast,
all-gather, gather, scatter, all-to-all (lists, tensors, uneven sizes).

They work for every dtype with whole bytes per element (moved as bytes when
NCCL lacks the type).  Uneven parts become one NCCL group of broadcasts
(all_gather) or of sends and receives (all-to-all)."""
from __future__ import annotations

import torch

from nccl._errors import NcclInvalid

from . import p2p
from .calls import After, Calls, alike, check_outputs, fast, overlap, same_dtype, tag_of
from .staging import IN, OUT, check_tensor, copy_into, stage

__all__ = ["DataMovement"]


class DataMovement(Calls):
    @alike
    def broadcast(self, tensors, opts):
        if p2p.queue or p2p.running:
            p2p.flush()
        root = self._check_root(opts.rootRank)
        calls, staged = [], []
        for t in tensors:
            s = stage(t, "broadcast tensor", IN if self._rank == root else OUT)
            calls.append(lambda b=s.buf: self._comm.broadcast(b, b, root))
            staged.append(s)
        return self._launch(calls, staged, tensors, opts, tag=tag_of(*tensors))

    def _gather_flat(self, inp, what: str):
        """(staged input, flat buffer of size x its elements, the buffer's
        per-rank view as the input's dtype)."""
        si = stage(inp, what, IN)
        flat = torch.empty((self._size,) + tuple(inp.shape), dtype=inp.dtype)
        buf = flat.reshape(-1)
        if si.buf.dtype != inp.dtype:  # moved as bytes
            buf = buf.view(torch.uint8)
        return si, flat, buf

    @alike
    def allgather(self, output_lists, inputs, opts=None):
        if p2p.queue or p2p.running:
            p2p.flush()
        if len(output_lists) != len(inputs):
            raise NcclInvalid("all_gather: one output list per input")
        calls, backs = [], []
        for outs, inp in zip(output_lists, inputs):
            check_tensor(inp, "all_gather input")
            self._parts("all_gather tensor_list", outs, inp)
            for o in outs:
                check_tensor(o, "all_gather output")
            check_outputs("all_gather output", outs)
            if all(o.numel() == inp.numel() for o in outs):
                si, flat, buf = self._gather_flat(inp, "all_gather input")
                calls.append(lambda b=si.buf, f=buf: self._comm.allgather(b, f))
                backs.append(lambda outs=outs, flat=flat: [copy_into(o, flat[r])
                                                           for r, o in enumerate(outs)])
            else:  # uneven: one broadcast per rank
                if outs[self._rank].numel() != inp.numel():
                    raise NcclInvalid(f"all_gather: output {self._rank} has "
                                      f"{outs[self._rank].numel()} elements, the input "
                                      f"{inp.numel()}")
                si = stage(inp, "all_gather input", IN)
                for r, o in enumerate(outs):
                    so = stage(o, "all_gather output", OUT)
                    send = si.buf if r == self._rank else so.buf
                    calls.append(lambda s=send, b=so.buf, r=r: self._comm.broadcast(s, b, r))
                    backs.append(so.back)
        return self._launch(calls, [After(b) for b in backs], output_lists, opts,
                            tag=tag_of(*inputs))

    allgather_coalesced = allgather

    def _all_gather_one(self, out, inp, calls: list, staged: list) -> None:
        check_tensor(out, "all_gather output")
        check_tensor(inp, "all_gather input")
        same_dtype("all_gather_into_tensor", (inp,), out.dtype)
        if out.numel() != self._size * inp.numel():
            raise NcclInvalid(f"all_gather_into_tensor: the output has {out.numel()} "
                              f"elements, expected {self._size} x the input's {inp.numel()}")
        if fast(out) and fast(inp):
            calls.append(lambda: self._comm.allgather(inp, out))
            return
        so = stage(out, "all_gather output", OUT)
        si = stage(inp, "all_gather input", IN)
        calls.append(lambda: self._comm.allgather(si.buf, so.buf))
        staged.append(so)

    @alike
    def all_gather_single(self, output, input, opts=None):
        if p2p.queue or p2p.running:
            p2p.flush()
        calls, staged = [], []
        self._all_gather_one(output, input, calls, staged)
        return self._launch(calls, staged, [output], opts, tag=tag_of(input))

    _allgather_base = all_gather_single

    @alike
    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        if p2p.queue or p2p.running:
            p2p.flush()
        calls, staged = [], []
        for out, inp in zip(outputs, inputs, strict=True):
            self._all_gather_one(out, inp, calls, staged)
        return self._launch(calls, staged, outputs, opts, tag=tag_of(*inputs))

    allgather_into_tensor_coalesced = all_gather_single_coalesced

    @alike
    def gather(self, output_lists, inputs, opts):
        if p2p.queue or p2p.running:
            p2p.flush()
        root = self._check_root(opts.rootRank)
        calls, backs = [], []
        for i, inp in enumerate(inputs):
            check_tensor(inp, "gather input")
            if self._rank != root:
                si = stage(inp, "gather input", IN)
                calls.append(lambda b=si.buf: self._comm.gather(b, None, root))
                continue
            outs = output_lists[i]
            self._parts("gather gather_list", outs, inp)
            for o in outs:
                check_tensor(o, "gather output")
                if o.numel() != inp.numel():
                    raise NcclInvalid(f"gather: every output needs the input's {inp.numel()} "
                                      f"elements, got {o.numel()}")
            check_outputs("gather output", outs)
            si, flat, buf = self._gather_flat(inp, "gather input")
            calls.append(lambda b=si.buf, f=buf: self._comm.gather(b, f, root))
            backs.append(lambda outs=outs, flat=flat: [copy_into(o, flat[r])
                                                       for r, o in enumerate(outs)])
        return self._launch(calls, [After(b) for b in backs], output_lists, opts,
                            tag=tag_of(*inputs))

    @alike
    def scatter(self, outputs, input_lists, opts):
        if p2p.queue or p2p.running:
            p2p.flush()
        root = self._check_root(opts.rootRank)
        calls, staged = [], []
        for i, out in enumerate(outputs):
            so = stage(out, "scatter output", OUT)
            staged.append(so)
            if self._rank != root:
                if out.numel():
                    calls.append(lambda b=so.buf: self._comm.scatter(None, b, root))
                continue
            parts = input_lists[i]
            self._parts("scatter scatter_list", parts, out)
            for p in parts:
                check_tensor(p, "scatter input")
                if p.numel() != out.numel():
                    raise NcclInvalid(f"scatter: every input needs the output's {out.numel()} "
                                      f"elements, got {p.numel()}")
            flat = torch.cat([stage(p, "scatter input", IN).buf.reshape(-1) for p in parts])
            if out.numel():  # nothing moves: every rank skips it alike
                calls.append(lambda f=flat, b=so.buf: self._comm.scatter(f, b, root))
        return self._launch(calls, staged, outputs, opts, tag=tag_of(*outputs))

    @alike
    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes,
                          opts=None):
        if p2p.queue or p2p.running:
            p2p.flush()
        check_tensor(output, "all_to_all_single output")
        check_tensor(input, "all_to_all_single input")
        same_dtype("all_to_all_single", (input,), output.dtype)
        n = self._size
        if not output_split_sizes and not input_split_sizes:
            if input.numel() != output.numel() or input.numel() % n:
                raise NcclInvalid(f"all_to_all_single: input ({input.numel()} elements) and "
                                  f"output ({output.numel()}) must be equal and divisible by "
                                  f"{n}")
            if not input.numel():  # nothing moves, on any rank
                return self._launch([], (), [output], opts)
            if fast(output) and fast(input):
                return self._launch([lambda: self._comm.alltoall(input, output)], (), [output],
                                    opts, tag=tag_of(input))
            so = stage(output, "all_to_all_single output", OUT)
            si = stage(input, "all_to_all_single input", IN)
            return self._launch([lambda: self._comm.alltoall(si.buf, so.buf)], [so], [output],
                                opts, tag=tag_of(input))
        ins = self._splits("input", input, input_split_sizes)
        outs = self._splits("output", output, output_split_sizes)
        so = stage(output, "all_to_all_single output", OUT)
        si = stage(input, "all_to_all_single input", IN)
        if so.copy is None and si.copy is None and overlap(input, output):
            si = stage(input.clone(), "all_to_all_single input", IN)  # read before written
        per_in = si.buf.numel() // max(input.numel(), 1)  # bytes (or 1) per element
        per_out = so.buf.numel() // max(output.numel(), 1)
        calls = []
        for r in range(n):
            (i0, ic), (o0, oc) = ins[r], outs[r]
            if ic:
                calls.append(lambda b=si.buf.reshape(-1).narrow(0, i0 * per_in, ic * per_in),
                             r=r: self._comm.send(b, r))
            if oc:
                calls.append(lambda b=so.buf.reshape(-1).narrow(0, o0 * per_out, oc * per_out),
                             r=r: self._comm.recv(b, r))
        return self._launch(calls, [so], [output], opts, group=True)

    alltoall_base = all_to_all_single

    def _splits(self, what: str, t, sizes) -> list:
        """(first element, elements) of each rank's part of t along dim 0."""
        n = self._size
        rows = t.shape[0] if t.dim() else 1
        if not sizes:
            if rows % n:
                raise NcclInvalid(f"all_to_all_single: {what} has {rows} rows, not divisible "
                                  f"by {n}")
            sizes = [rows // n] * n
        sizes = [int(s) for s in sizes]
        if len(sizes) != n or sum(sizes) != rows or min(sizes) < 0:
            raise NcclInvalid(f"all_to_all_single: {what}_split_sizes {sizes} must be {n} "
                              f"sizes adding up to the {rows} rows of the {what}")
        per_row = t.numel() // rows if rows else 0
        out, start = [], 0
        for s in sizes:
            out.append((start * per_row, s * per_row))
            start += s
        return out

    @alike
    def alltoall(self, outputs, inputs, opts=None):
        if p2p.queue or p2p.running:
            p2p.flush()
        if len(inputs) != self._size:
            raise NcclInvalid(f"all_to_all: expected {self._size} input tensors (one per "
                              f"rank), got {len(inputs)}")
        self._parts("all_to_all input_tensor_list", inputs, inputs[0])
        self._parts("all_to_all output_tensor_list", outputs, inputs[0])
        check_outputs("all_to_all output", outputs)
        calls, staged = [], []
        for r in range(self._size):
            si = stage(inputs[r], "all_to_all input", IN)
            so = stage(outputs[r], "all_to_all output", OUT)
            if inputs[r].numel() and si.copy is None and so.copy is None and \
                    overlap(inputs[r], outputs[r]):
                si = stage(inputs[r].clone(), "all_to_all input", IN)
            if si.buf.numel():
                calls.append(lambda b=si.buf, r=r: self._comm.send(b, r))
            if so.buf.numel():
                calls.append(lambda b=so.buf, r=r: self._comm.recv(b, r))
            staged.append(so)
        return self._launch(calls, staged, outputs, opts, group=True)

