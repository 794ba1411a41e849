"""The rank side of the benchmark: one communicator per process, every
size timed out of place and in place, checked, and printed by rank 0."""
from __future__ import annotations

import argparse
import datetime
import functools
import inspect
import json
import os
import socket
import sys
import time
from typing import Any, Callable

import numpy as np

from . import arrays, report
from .collectives import (COLLECTIVES, ITEMSIZE, MULSUM_SCALAR, OPS, TYPES, Collective,
                          algbw_bytes, busbw_factor, counts, expected_range, method_name, pattern,
                          tolerance)

__all__ = ["run", "CORRUPT_ENV"]

# Test-only: when set to 1, rank 0 flips one byte of every result it checks,
# so the tests can prove that #wrong counts real errors.  Never set it otherwise.
CORRUPT_ENV = "NCCL4PY_BENCH_TEST_CORRUPT"
GUARD = 64          # bytes after each result that must stay untouched
GUARD_BYTE = 0xA5
JUNK_BYTE = 0x5B    # fills receive buffers before a check
# Elements written, read back and compared at a time by a check: its memory
# is a few of these blocks as float64 whatever the message size, so that a
# check needs no more than the send and receive buffers the run holds.
CHECK_BLOCK = 1 << 20


def _np_dtype(dtype: int) -> Any:
    from nccl.core import NcclDataType

    return np.dtype(NcclDataType(dtype).numpy_dtype)


def _types_available(names: list[str]) -> tuple[list[int], list[str]]:
    """The requested types that NumPy can represent (bf16/fp8 need ml_dtypes)."""
    ok: list[int] = []
    skipped: list[str] = []
    for name in names:
        t = TYPES.index(name)
        try:
            _np_dtype(t)
            ok.append(t)
        except Exception:
            skipped.append(name)
    return ok, skipped


class Bench:
    def __init__(self, ns: argparse.Namespace, emit: Callable[[str], None]) -> None:
        import nccl.core as nc
        import nccl.run
        from nccl import _nccl
        from nccl import bindings as b

        self.ns = ns
        self.nc = nc
        self.emit = emit
        env = nccl.run.environment()
        self.rank, self.nranks, self.local_rank = env.rank, env.nranks, env.local_rank
        self.library_code = int(b.get_version())
        self.family = str(_nccl.library_family())
        self.abi = int(_nccl.ABI_VERSION)
        self.missing = set(_nccl._loader_report()["missing"] or [])
        self.lib_path = b.get_library_path()
        self.arr = arrays.select(self.family, self.local_rank, ns.array)
        self.stream = self.arr.stream
        if env.unique_id is None:
            raise RuntimeError("the launcher gave this rank no unique id")
        self.comm = nc.Communicator.init(self.nranks, self.rank,
                                         nc.UniqueId.from_bytes(env.unique_id))
        self.corrupt = os.environ.get(CORRUPT_ENV) == "1" and self.rank == 0
        self.small = self.arr.alloc(64)

    # ------------------------------------------------------------ helpers

    def _allreduce_small(self, values: Any, dtype: int, op: Any) -> Any:
        data = np.ascontiguousarray(values)
        self.arr.write(self.small, 0, data)
        spec = (self.small[:data.nbytes], data.size, dtype)
        self.comm.allreduce(spec, spec, op, stream=self.stream)
        return self.arr.read(self.small, 0, data.nbytes).view(data.dtype)

    def barrier(self) -> None:
        spec = (self.small[:1], 1, self.nc.UINT8)
        self.comm.allreduce(spec, spec, self.nc.MAX, stream=self.stream)
        self.arr.sync()

    def gather_strings(self, text: str) -> list[str]:
        raw = text.encode()[:255].ljust(256, b"\0")
        send = self.arr.alloc(256)
        recv = self.arr.alloc(256 * self.nranks)
        self.arr.write(send, 0, np.frombuffer(raw, np.uint8))
        self.comm.allgather((send, 256, self.nc.UINT8), (recv, 256 * self.nranks, self.nc.UINT8),
                            stream=self.stream)
        data = self.arr.read(recv, 0, 256 * self.nranks).tobytes()
        return [data[i * 256:(i + 1) * 256].rstrip(b"\0").decode(errors="replace")
                for i in range(self.nranks)]

    def device_lines(self) -> list[str]:
        dev, bus, name = self.arr.describe(self.local_rank)
        line = (f"#  Rank {self.rank:2d} Group  0 Pid {os.getpid():6d} on "
                f"{socket.gethostname():>10s} device {dev:2d} [{bus}] {name}")
        return self.gather_strings(line)

    # ------------------------------------------------------------- calls

    def make_call(self, coll: Collective, send: Any, recv: Any, op: Any, root: int, bias: Any,
                  pc: int) -> Callable[[], None]:
        c, s, n, r = self.comm, self.stream, self.nranks, self.rank
        name = coll.name
        method = method_name(coll, type(c))
        if method is not None:
            # the method's positional arguments, named as in src/collectives.def
            cnts, displs = [pc] * n, [j * pc for j in range(n)]
            values = {"sendbuf": send, "recvbuf": recv, "op": op, "root": root, "bias": bias,
                      "sendcounts": cnts, "sdispls": displs, "recvcounts": cnts, "rdispls": displs}
            fn = getattr(c, method)
            params = inspect.signature(fn).parameters.values()
            args = [values[p.name] for p in params
                    if p.kind is p.POSITIONAL_OR_KEYWORD and p.name != "stream"]
            return functools.partial(fn, *args, stream=s)
        if name == "sendrecv":
            nc = self.nc

            def sendrecv() -> None:
                nc.group_start()
                try:
                    c.send(send, (r + 1) % n, stream=s)
                    c.recv(recv, (r - 1) % n, stream=s)
                finally:
                    nc.group_end()
            return sendrecv
        raise ValueError(name)

    def op_object(self, op: str | None, dtype: int) -> Any:
        nc = self.nc
        if op is None:
            return nc.SUM
        if op == "mulsum":
            return self.comm.create_pre_mul_sum(MULSUM_SCALAR, nc.NcclDataType(dtype))
        return {"sum": nc.SUM, "prod": nc.PROD, "max": nc.MAX, "min": nc.MIN,
                "avg": nc.AVG}[op]

    # ----------------------------------------------------------- measure

    def layout(self, coll: Collective, inplace: bool, sc: int, rc: int, pc: int,
               esz: int) -> tuple[Any, int, Any, int, int]:
        """(send raw, send offset, recv raw, recv offset, end of the written region)."""
        if not inplace:
            return self.sendraw, 0, self.recvraw, 0, rc * esz
        extent = max(sc, rc) * esz
        if coll.split == "gather":
            return self.recvraw, self.rank * pc * esz, self.recvraw, 0, extent
        if coll.split == "scatter":
            return self.recvraw, 0, self.recvraw, self.rank * pc * esz, extent
        return self.recvraw, 0, self.recvraw, 0, extent

    def time_call(self, call: Callable[[], None]) -> float:
        ns = self.ns
        self.barrier()
        t0 = time.perf_counter()
        for _ in range(ns.iters):
            if ns.agg_iters > 1:
                self.nc.group_start()
                try:
                    for _ in range(ns.agg_iters):
                        call()
                finally:
                    self.nc.group_end()
            else:
                call()
        self.arr.sync()
        return float((time.perf_counter() - t0) * 1e6 / max(ns.iters * ns.agg_iters, 1))

    def check(self, coll: Collective, dtype: int, op: str | None, root: int, sc: int, rc: int,
              pc: int, inplace: bool, call: Callable[[], None]) -> tuple[int, int]:
        """Run once on known data; (wrong elements, changed guard bytes) on this rank."""
        esz = ITEMSIZE[dtype]
        npdt = _np_dtype(dtype)
        n = self.nranks
        sraw, soff, rraw, roff, end = self.layout(coll, inplace, sc, rc, pc, esz)

        def values(r: int, a: int, b: int) -> Any:
            return pattern(r, b - a, op, n, start=a).astype(npdt).astype(np.float64)

        def bias(a: int, b: int) -> Any:
            return pattern(0, b - a, "sum", n, salt=1, start=a).astype(npdt)

        with_bias = coll.name == "allreduce_with_bias"
        blk = CHECK_BLOCK
        for a in range(0, end, blk * esz):
            self.arr.fill(rraw, a, min(end - a, blk * esz), JUNK_BYTE)
        self.arr.fill(rraw, end, GUARD, GUARD_BYTE)
        for a in range(0, sc, blk):
            self.arr.write(sraw, soff + a * esz, values(self.rank, a, min(sc, a + blk)).astype(npdt))
        if with_bias:
            for a in range(0, rc, blk):
                self.arr.write(self.biasraw, a * esz, bias(a, min(rc, a + blk)))
        call()
        self.arr.sync()
        guard = self.arr.read(rraw, end, GUARD)
        oob = int(np.count_nonzero(guard != GUARD_BYTE))
        wrong = 0
        for lo in range(0, rc, blk):
            hi = min(rc, lo + blk)
            exp = expected_range(coll, self.rank, n, root, op, pc, values, lo, hi)
            if exp is None:
                break
            if with_bias:
                exp = exp + bias(lo, hi).astype(np.float64)
            got = self.arr.read(rraw, roff + lo * esz, (hi - lo) * esz)
            if self.corrupt and hi == rc:
                got[-1] ^= 0xFF  # the last block's: every block is compared
            wrong += self._wrong(got.view(npdt), exp, dtype, op)
        return wrong, oob

    def _wrong(self, g: Any, exp: Any, dtype: int, op: str | None) -> int:
        """How many of the received elements ``g`` differ from the float64
        values ``exp`` (beyond the type's tolerance, for floating reductions)."""
        npdt = g.dtype
        e = exp.astype(npdt)
        if op is None:
            ui = np.dtype(f"u{npdt.itemsize}")
            bad = g.view(ui) != e.view(ui)
        elif npdt.kind == "f" or dtype >= 9:
            gf, ef = g.astype(np.float64), e.astype(np.float64)
            tol = tolerance(dtype, op, self.nranks)
            with np.errstate(invalid="ignore"):
                bad = ~(np.abs(gf - ef) <= tol * np.maximum(1.0, np.abs(ef)))
        elif op == "avg":
            bad = np.abs(g.astype(np.float64) - exp) >= 1.0
        else:
            bad = g.astype(np.int64) != e.astype(np.int64)
        return int(np.count_nonzero(bad))

    def measure(self, coll: Collective, size: int, dtype: int, op: str | None, opobj: Any,
                root: int) -> tuple[report.Row, int]:
        ns, n = self.ns, self.nranks
        esz = ITEMSIZE[dtype]
        sc, rc, pc = counts(coll, size, dtype, n)
        times: list[float] = []
        wrong = [0, 0]
        oob = 0
        for k, inplace in enumerate((False, True)):
            sraw, soff, rraw, roff, _ = self.layout(coll, inplace, sc, rc, pc, esz)
            send = (sraw[soff:soff + sc * esz], sc, dtype)
            recv = (rraw[roff:roff + rc * esz], rc, dtype)
            bias = (self.biasraw[:rc * esz], rc, dtype)
            call = self.make_call(coll, send, recv, opobj, max(root, 0), bias, pc)
            times.append(self.time_call(call))
            for _ in range(ns.check):
                w, o = self.check(coll, dtype, op, max(root, 0), sc, rc, pc, inplace, call)
                wrong[k] = max(wrong[k], w)
                oob += o
        avg_op = {0: self.nc.SUM, 1: self.nc.SUM, 2: self.nc.MIN, 3: self.nc.MAX}[ns.average]
        tv = np.array(times, dtype=np.float64)
        if ns.average == 0:
            tv = tv if self.rank == 0 else np.zeros_like(tv)
        tv = self._allreduce_small(tv, self.nc.FLOAT64, avg_op)
        if ns.average == 1:
            tv = tv / n
        counts_all = self._allreduce_small(np.array([*wrong, oob], np.int64), self.nc.INT64,
                                           self.nc.SUM)
        nbytes = algbw_bytes(coll, pc, dtype, n)
        factor = busbw_factor(coll, n)
        halves = []
        for k in range(2):
            sec = float(tv[k]) / 1e6
            algbw = nbytes / 1e9 / sec if sec > 0 else 0.0
            halves.append(report.Half(float(tv[k]), algbw, algbw * factor,
                                      int(counts_all[k]) if ns.check else None))
        row = report.Row(coll.name, max(sc, rc) * esz, pc, TYPES[dtype],
                         op if op is not None else "none", root, halves[0], halves[1])
        return row, int(counts_all[2])

    # --------------------------------------------------------------- run

    def run(self, names: list[str], sizes: list[int], type_names: list[str],
            op_names: list[str], roots: list[int],
            step: str) -> tuple[list[report.Row], list[report.Summary]]:
        ns = self.ns
        types, skipped = _types_available(type_names)
        if skipped:
            self.emit(f"# skipping {', '.join(skipped)}: NumPy needs ml_dtypes for these types")
        devices = self.device_lines()
        all_rows: list[report.Row] = []
        summaries: list[report.Summary] = []
        min_bw_text = os.environ.get("NCCL_TESTS_MIN_BW")
        min_bw = float(min_bw_text) if min_bw_text else None
        maxbytes = max(sizes) if sizes else 0
        self.sendraw = self.arr.alloc(maxbytes + GUARD)
        self.recvraw = self.arr.alloc(maxbytes + GUARD)
        for name in names:
            coll = COLLECTIVES[name]
            if coll.rccl_symbol and coll.rccl_symbol in self.missing:
                self.emit(f"# {name}: not available in this library ({coll.rccl_symbol} is an "
                          f"RCCL extension); skipped")
                continue
            self.biasraw = self.arr.alloc(maxbytes + GUARD) if coll.rccl_symbol and \
                coll.reduces else self.small
            for line in report.preamble_lines(
                    version=_version(), library_code=self.library_code, abi=self.abi,
                    binary=coll.binary, nranks=self.nranks, min_bytes=ns.minbytes,
                    max_bytes=ns.maxbytes, step=step, warmup=ns.warmup_iters, iters=ns.iters,
                    agg=ns.agg_iters, check=ns.check, devices=devices):
                self.emit(line)
            for line in report.header_lines():
                self.emit(line)
            rows: list[report.Row] = []
            oob = 0
            for dtype in types:
                for op in (op_names if coll.reduces else [None]):
                    opobj = self.op_object(op, dtype)
                    for root in (roots if coll.rooted else [-1]):
                        self.warmup(coll, maxbytes, dtype, opobj, root)
                        for size in sizes:
                            if coll.split != "none" and size and \
                                    counts(coll, size, dtype, self.nranks)[2] == 0:
                                continue  # under one element per rank: nothing to call
                            row, o = self.measure(coll, size, dtype, op, opobj, root)
                            oob += o
                            rows.append(row)
                            self.emit(report.format_row(row))
                    if op == "mulsum":
                        opobj.close()
            summary = report.Summary.of(coll.binary, rows, oob, min_bw)
            for line in report.footer_lines(coll.binary, oob, summary.avg_busbw,
                                            checked=ns.check > 0):
                self.emit(line)
            all_rows += rows
            summaries.append(summary)
            if summary.below_min_bw:
                self.emit(f"# {coll.binary}: average bus bandwidth {summary.avg_busbw:g} is "
                          f"below NCCL_TESTS_MIN_BW={min_bw_text}")
        return all_rows, summaries

    def warmup(self, coll: Collective, maxbytes: int, dtype: int, opobj: Any, root: int) -> None:
        esz = ITEMSIZE[dtype]
        sc, rc, pc = counts(coll, maxbytes, dtype, self.nranks)
        call = self.make_call(coll, (self.sendraw[:sc * esz], sc, dtype),
                              (self.recvraw[:rc * esz], rc, dtype), opobj, max(root, 0),
                              (self.biasraw[:rc * esz], rc, dtype), pc)
        for _ in range(self.ns.warmup_iters):
            call()
        self.arr.sync()

    def close(self) -> None:
        self.comm.destroy()


def _version() -> str:
    from nccl._version import __version__

    return str(__version__)


def run(ns: argparse.Namespace, names: list[str], sizes: list[int], type_names: list[str],
        op_names: list[str], root_arg: str, step: str, plot_here: bool) -> int:
    """Run the benchmark as one rank; returns this rank's exit status."""
    out: list[str] = []

    def emit(line: str) -> None:
        out.append(line)

    bench = Bench(ns, emit)
    lead = bench.rank == 0

    def emit_live(line: str) -> None:
        if lead:
            print(line, flush=True)

    bench.emit = emit_live
    if root_arg == "all":
        roots = list(range(bench.nranks))
    else:
        roots = [int(root_arg)]
        if not 0 <= roots[0] < bench.nranks:
            emit_live(f"# invalid root {roots[0]} for {bench.nranks} ranks")
            bench.close()
            return 2
    started = time.time()
    try:
        rows, summaries = bench.run(names, sizes, type_names, op_names, roots, step)
    except BaseException:
        bench.comm.abort()
        raise
    bench.close()
    elapsed = time.time() - started
    if summaries:
        for line in report.summary_lines(summaries, elapsed):
            emit_live(line)
    failed = any(s.failed for s in summaries)
    if lead and ns.output_file:
        doc = {
            "nccl4py_bench": _version(),
            "command_line": ns.command_line or " ".join(["python -m nccl.bench", *sys.argv[1:]]),
            "hostname": socket.gethostname(),
            "timestamp": datetime.datetime.fromtimestamp(started, datetime.timezone.utc)
            .isoformat(timespec="seconds"),
            "elapsed_s": round(elapsed, 3),
            "units": report.UNITS,
            "library": {"path": bench.lib_path, "family": bench.family,
                        "version_code": bench.library_code},
            "array": bench.arr.name,
            "nranks": bench.nranks,
            "iters": ns.iters, "warmup_iters": ns.warmup_iters, "agg_iters": ns.agg_iters,
            "check": ns.check,
            "summary": {s.binary[:-len("_perf")]: s.record() for s in summaries},
            "results": [report.row_record(r) for r in rows],
            "wrong_or_out_of_bounds": sum((s.nwrong or 0) + s.out_of_bounds
                                          for s in summaries),
            "failed": failed,
        }
        with open(ns.output_file, "w") as f:
            json.dump(doc, f, indent=1)
        if plot_here and ns.plot:
            from .plot import plot_file

            plot_file(ns.output_file, ns.plot, sys.stderr)
    if not rows and lead:
        print("# no test was run", file=sys.stderr)
    return 1 if failed else 0
