#!/usr/bin/env python3
"""Per-call host overhead of the low-level binding, against a no-op library.

    python bench/call_overhead.py [--calls N] [--repeats R]

Builds the no-op library from the API table (every function returns
ncclSuccess at once; a benchmark tool, never a backend), then measures in
one process, side by side:

  * ``nccl.bindings.all_reduce(ints)``          - this binding
  * the same C function through ``ctypes``      - the usual pure-Python route
  * an empty Python function with 7 arguments   - the interpreter's floor

and prints the median ns/call of R repeats of N calls, and the ratios.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def build_noop(outdir: Path) -> Path:
    sys.path.insert(0, str(ROOT / "tools"))
    from gen import api as gen_api
    from gen import stub

    src = outdir / "noop.c"
    src.write_text(stub.gen_stub_c(gen_api.parse_table(), noop=True))
    lib = outdir / "libnccl_noop.so"
    subprocess.run([os.environ.get("CC", "cc"), "-O2", "-shared", "-fPIC", f"-I{ROOT / 'src'}",
                    "-o", str(lib), str(src)], check=True)
    return lib


def per_call_ns(fn, calls: int, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        fn(calls)
        samples.append((time.perf_counter_ns() - t0) / calls)
    return statistics.median(samples)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=7)
    ns = ap.parse_args()
    if "NCCL4PY_BENCH_CHILD" not in os.environ:
        with tempfile.TemporaryDirectory() as d:
            lib = build_noop(Path(d))
            env = dict(os.environ, NCCL_LIBRARY=str(lib), NCCL4PY_BENCH_CHILD=str(lib))
            return subprocess.run([sys.executable, __file__, *sys.argv[1:]], env=env).returncode

    import nccl.bindings as b

    lib = ctypes.CDLL(os.environ["NCCL4PY_BENCH_CHILD"])
    c_allreduce = lib.ncclAllReduce
    c_allreduce.restype = ctypes.c_int
    c_allreduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                            ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    assert b.get_library_path() == os.environ["NCCL4PY_BENCH_CHILD"]
    args = (0x7F00_0000_1000, 0x7F00_0000_2000, 1 << 20, 7, 0, 0x5500_0000, 0)

    def ours(n, f=b.all_reduce, a=args):
        for _ in range(n):
            f(*a)

    def via_ctypes(n, f=c_allreduce, a=args):
        for _ in range(n):
            if f(*a) != 0:
                raise RuntimeError

    def empty(n, a=args):
        def f(s, r, c, d, o, cm, st):
            return None
        for _ in range(n):
            f(*a)

    for fn in (ours, via_ctypes, empty):  # warm-up
        fn(10_000)
    rows = [("nccl.bindings.all_reduce", per_call_ns(ours, ns.calls, ns.repeats)),
            ("ctypes ncclAllReduce", per_call_ns(via_ctypes, ns.calls, ns.repeats)),
            ("empty Python function", per_call_ns(empty, ns.calls, ns.repeats))]
    print(f"# all_reduce per-call overhead against a no-op library "
          f"(median of {ns.repeats} x {ns.calls} calls, Python {sys.version.split()[0]})")
    print(f"{'call':<28}{'ns/call':>10}{'vs ours':>10}")
    for name, v in rows:
        print(f"{name:<28}{v:>10.1f}{v / rows[0][1]:>9.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
