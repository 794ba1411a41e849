#!/usr/bin/env python3
"""Host backend against MPI on one machine: allreduce and allgather busbw.

    python bench/host_vs_mpi.py [--ranks 2 4] [--max-bytes 64M] [--no-install]

Installs mpi4py and the MPICH wheel (pip) unless --no-install, then runs in
one invocation, for each rank count, the same operations on float32 NumPy
arrays through the nccl4py host backend (launched with python -m nccl.run)
and through mpi4py (launched with mpiexec), and prints per size the time (median of 5 timed blocks),
the bus bandwidth (nccl-tests' formula: allreduce 2(n-1)/n, allgather
(n-1)/n, on the total buffer size) and the ratio ours/MPI.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def parse_size(s: str) -> int:
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1].upper()] if s[-1].upper() in mult else int(s)


def sizes(max_bytes: int) -> list[int]:
    out, s = [], 8
    while s <= max_bytes:
        out.append(s)
        s *= 8
    if out[-1] != max_bytes:
        out.append(max_bytes)
    return out


# ------------------------------------------------------------------ rank side

REPEATS = 5


def iterations(nbytes: int) -> int:
    return max(3, min(1000, (16 << 20) // max(nbytes, 1)))


def rank_main(impl: str, sizes_: list[int]) -> None:
    import numpy as np

    if impl == "mpi":
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
        rank, n = comm.Get_rank(), comm.Get_size()
        barrier = comm.Barrier

        def allreduce(a, b_):
            comm.Allreduce(a, b_, op=MPI.SUM)

        def allgather(a, b_):
            comm.Allgather(a, b_)
    else:
        import nccl.bindings as b
        import nccl.run

        env = nccl.run.environment()
        rank, n = env.rank, env.nranks
        c = b.comm_init_rank(n, env.unique_id, rank)
        one = np.zeros(1, np.float32)

        def barrier():
            b.all_reduce(one.ctypes.data, one.ctypes.data, 1, 7, 0, c, 0)

        def allreduce(a, b_):
            b.all_reduce(a.ctypes.data, b_.ctypes.data, a.size, 7, 0, c, 0)

        def allgather(a, b_):
            b.all_gather(a.ctypes.data, b_.ctypes.data, a.size, 7, c, 0)

    results = []
    # warm up the processes (caches, CPU frequency, scheduler) before any timing
    w = np.zeros(2, np.float32)
    t_end = time.perf_counter() + 0.5
    while True:
        for _ in range(200):
            allreduce(w, w.copy())
        flag, total = np.array([time.perf_counter() < t_end], np.float32), np.zeros(1, np.float32)
        allreduce(flag, total)  # every rank stops at the same iteration
        if total[0] < n:
            break
    for op in ("allreduce", "allgather"):
        for nbytes in sizes_:
            count = max(1, nbytes // 4)
            if op == "allgather":
                count = max(1, count // n)  # nbytes is the total (received) size
            send = np.full(count, rank + 1, np.float32)
            recv = np.zeros(count * (n if op == "allgather" else 1), np.float32)
            fn = allreduce if op == "allreduce" else allgather
            iters = iterations(nbytes)
            for _ in range(max(2, iters // 10)):
                fn(send, recv)
            blocks = []
            for _ in range(REPEATS):  # median of several timed blocks: the machine is shared
                barrier()
                t0 = time.perf_counter()
                for _ in range(iters):
                    fn(send, recv)
                barrier()
                blocks.append((time.perf_counter() - t0) / iters)
            dt = sorted(blocks)[len(blocks) // 2]
            if op == "allreduce":
                ok = bool(np.all(recv == n * (n + 1) / 2))
            else:
                ok = bool(np.all(recv.reshape(n, count) == np.arange(1, n + 1)[:, None]))
            results.append({"op": op, "bytes": recv.nbytes, "time": dt, "ok": ok})
    if rank == 0:
        print("RESULT " + json.dumps({"impl": impl, "n": n, "results": results}), flush=True)


# ---------------------------------------------------------------- driver side

def run(cmd: list[str], env: dict) -> dict:
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")


def busbw(op: str, nbytes: int, t: float, n: int) -> float:
    factor = 2 * (n - 1) / n if op == "allreduce" else (n - 1) / n
    return nbytes / t * factor / 1e9


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--max-bytes", default="64M")
    ap.add_argument("--no-install", action="store_true")
    ap.add_argument("--rank-side", choices=["mpi", "nccl"], help=argparse.SUPPRESS)
    ap.add_argument("--sizes", help=argparse.SUPPRESS)
    ns = ap.parse_args()
    if ns.rank_side:
        rank_main(ns.rank_side, [int(s) for s in ns.sizes.split(",")])
        return 0
    if not ns.no_install:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "mpi4py", "mpich"], check=True)
    mpiexec = shutil.which("mpiexec") or str(Path(sys.executable).parent / "mpiexec")
    sz = ",".join(str(s) for s in sizes(parse_size(ns.max_bytes)))
    env = dict(os.environ)
    env.pop("NCCL_LIBRARY", None)
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    me = [str(Path(__file__).resolve())]
    print(f"# host backend vs MPI ({mpiexec}), float32, {os.cpu_count()} CPUs")
    print(f"{'op':<10}{'ranks':>6}{'bytes':>12}{'ours us':>11}{'mpi us':>11}"
          f"{'ours GB/s':>11}{'mpi GB/s':>10}{'busbw ours/mpi':>16}{'ok':>4}")
    for n in ns.ranks:
        ours = run([sys.executable, "-m", "nccl.run", "-n", str(n), "--backend", "host",
                    *me, "--rank-side", "nccl", "--sizes", sz], env)
        mpi = run([mpiexec, "-n", str(n), sys.executable, *me, "--rank-side", "mpi",
                   "--sizes", sz], env)
        for a, m in zip(ours["results"], mpi["results"]):
            bo, bm = busbw(a["op"], a["bytes"], a["time"], n), busbw(m["op"], m["bytes"], m["time"], n)
            print(f"{a['op']:<10}{n:>6}{a['bytes']:>12}{a['time'] * 1e6:>11.1f}"
                  f"{m['time'] * 1e6:>11.1f}{bo:>11.2f}{bm:>10.2f}{bo / bm:>15.2f}x"
                  f"{'' if a['ok'] and m['ok'] else ' NO':>4}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
