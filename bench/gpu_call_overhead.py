#!/usr/bin/env python3
"""Host-side time per call of a small allreduce on one GPU, side by side.

    python bench/gpu_call_overhead.py [--calls 10000] [--out DIR] [--upstream DIR]

Measures, in one run on one GPU with the real NCCL, an 8-element float32
allreduce issued repeatedly (median ns/call over repeated blocks, after a
warm-up; the GPU queue is drained between blocks):

  * nccl4py high-level  ``comm.allreduce(x, y, SUM, stream=s)`` with torch tensors
  * nccl4py low-level   ``nccl.bindings.all_reduce(ints)``
  * upstream nccl4py 0.3.1 and 0.6.0 high- and low-level (each installed in an --upstream DIR;
    measured in a subprocess, since it is also the ``nccl`` package)
  * ``torch.distributed.all_reduce`` on a one-rank NCCL process group
  * CuPy's ``cupy.cuda.nccl`` (NcclCommunicator.allReduce)

and writes results.json and report.md into --out (default $OUT or ./gpu-report).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def timed(fn, calls: int, blocks: int = 7) -> float:
    import torch

    for _ in range(min(calls, 1000)):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(blocks):
        t0 = time.perf_counter_ns()
        for _ in range(calls // blocks):
            fn()
        samples.append((time.perf_counter_ns() - t0) / (calls // blocks))
        torch.cuda.synchronize()
    return statistics.median(samples)


def measure_ours(calls: int) -> dict:
    import torch

    import nccl.bindings as b
    import nccl.core as nc

    torch.cuda.set_device(0)
    comm = nc.Communicator.init(1, 0, nc.get_unique_id())
    x = torch.ones(8, device="cuda")
    y = torch.empty_like(x)
    s = torch.cuda.current_stream()
    sp = s.cuda_stream
    out = {
        "nccl4py high-level (torch)": timed(lambda: comm.allreduce(x, y, nc.SUM, stream=s), calls),
        "nccl4py low-level": timed(lambda: b.all_reduce(x.data_ptr(), y.data_ptr(), 8, 7, 0,
                                                         comm.ptr, sp), calls),
    }
    comm.destroy()
    return out


def measure_torch_distributed(calls: int) -> dict:
    import torch
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("nccl", rank=0, world_size=1)
    x = torch.ones(8, device="cuda")
    try:
        return {"torch.distributed.all_reduce": timed(lambda: dist.all_reduce(x), calls)}
    finally:
        dist.destroy_process_group()


def measure_cupy(calls: int) -> dict:
    import cupy
    from cupy.cuda import nccl as cnccl

    uid = cnccl.get_unique_id()
    comm = cnccl.NcclCommunicator(1, uid, 0)
    x = cupy.ones(8, dtype=cupy.float32)
    y = cupy.empty_like(x)
    st = cupy.cuda.get_current_stream().ptr
    return {"cupy.cuda.nccl allReduce": timed(
        lambda: comm.allReduce(x.data.ptr, y.data.ptr, 8, cnccl.NCCL_FLOAT32, cnccl.NCCL_SUM, st),
        calls)}


UPSTREAM = r"""
import json, sys, time, statistics
import importlib.metadata
import torch
from nccl.bindings import nccl as lb
import nccl.core as nc
calls = int(sys.argv[1])
tag = "upstream " + importlib.metadata.version("nccl4py")
def timed(fn, blocks=7):
    for _ in range(min(calls, 1000)): fn()
    torch.cuda.synchronize()
    s = []
    for _ in range(blocks):
        t0 = time.perf_counter_ns()
        for _ in range(calls // blocks): fn()
        s.append((time.perf_counter_ns() - t0) / (calls // blocks))
        torch.cuda.synchronize()
    return statistics.median(s)
torch.cuda.set_device(0)
comm = nc.Communicator.init(1, 0, nc.get_unique_id())
x = torch.ones(8, device="cuda"); y = torch.empty_like(x); s = torch.cuda.current_stream()
# 0.5+ takes a Comm object (Communicator._comm); 0.3 takes the int handle.
low = comm._comm if hasattr(lb, "Comm") else comm.ptr
out = {tag + " high-level (torch)": timed(lambda: comm.allreduce(x, y, nc.SUM, stream=s.cuda_stream)),
       tag + " low-level": timed(lambda: lb.all_reduce(x.data_ptr(), y.data_ptr(), 8, 7, 0, low, s.cuda_stream))}
print("RESULT " + json.dumps(out))
"""


def measure_upstream(calls: int, target: str) -> dict:
    env = dict(os.environ, PYTHONPATH=target)
    env.pop("NCCL_LIBRARY", None)
    p = subprocess.run([sys.executable, "-c", UPSTREAM, str(calls)], env=env, capture_output=True,
                       text=True, timeout=300, cwd="/")
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {f"upstream in {target} (failed)": f"{p.returncode}: {p.stderr.strip()[-400:]}"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=10_000)
    ap.add_argument("--out", default=os.environ.get("OUT") or "gpu-report")
    ap.add_argument("--upstream", action="append", default=[],
                    help="folder where an upstream nccl4py (0.3, 0.5, 0.6) is installed; repeatable")
    ns = ap.parse_args()
    os.makedirs(ns.out, exist_ok=True)
    results: dict = {}
    for name, fn in (("ours", lambda: measure_ours(ns.calls)),
                     ("torch.distributed", lambda: measure_torch_distributed(ns.calls)),
                     ("cupy", lambda: measure_cupy(ns.calls))):
        try:
            results.update(fn())
        except Exception as e:  # noqa: BLE001 - each peer is reported, not fatal
            results[f"{name} (failed)"] = f"{type(e).__name__}: {e}"
    for folder in ns.upstream:
        results.update(measure_upstream(ns.calls, folder))
    base = results.get("nccl4py high-level (torch)")
    lines = ["# Host time per call, 8-element float32 allreduce, one GPU", "",
             f"median over {ns.calls} calls after warm-up", "",
             "| call | ns/call | ratio to nccl4py high-level |", "|---|---:|---:|"]
    for k, v in results.items():
        if isinstance(v, (int, float)):
            lines.append(f"| {k} | {v:.0f} | {v / base:.2f}x |" if base else f"| {k} | {v:.0f} | |")
        else:
            lines.append(f"| {k} | {v} | |")
    report = "\n".join(lines) + "\n"
    with open(os.path.join(ns.out, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
    with open(os.path.join(ns.out, "overhead.md"), "w") as f:
        f.write(report)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
