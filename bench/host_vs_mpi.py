#!/usr/bin/env python3
"""The host backend against its peers on one machine: MPICH, Open MPI and gloo.

    python bench/host_vs_mpi.py [--ranks 2 4] [--sizes 8,64,...] [--peers mpich openmpi gloo]
                                [--rounds R] [--layout page|heap] [--no-install]
                                [--plot PNG] [--json FILE]

Runs allreduce, allgather, reduce_scatter, broadcast and alltoall on float32
NumPy arrays (torch tensors for gloo), for each rank count and size, through

- nccl4py's host backend (``nccl.core.Communicator``; ``python -m nccl.run``),
- MPICH and Open MPI through mpi4py (``Allreduce``, ``Allgather``,
  ``Reduce_scatter_block``, ``Bcast``, ``Alltoall``; each started with its own
  ``mpiexec``, from its own virtual environment under
  ``~/.cache/nccl4py-bench``, made with pip unless ``--no-install``),
- torch.distributed with the gloo backend, when torch is importable,

one after the other in one invocation, and prints per size the time of each
(median of 5 timed blocks after at least 8 untimed calls), our bus
bandwidth, the memcpy model's, and the ratios peer time / our time (above 1:
we are faster).  With ``--rounds R`` every implementation runs R times,
taking turns, and each row keeps its best time; the rows where a peer is
faster are listed at the end with the range of both implementations' times
over the rounds, the row's noise.

Sizes follow nccl-tests: allreduce and broadcast move ``size`` bytes; for
allgather it is the gathered (received) size, for reduce_scatter and alltoall
the size sent by each rank.  Broadcast is in place (MPI's ``Bcast`` is).

Where the arrays lie.  By default (``--layout page``) every rank of every
implementation puts each send and receive array at the start of a page, so
that all of them copy between the same addresses modulo 4 KiB.  With
``--layout heap`` each process takes what NumPy's allocator gives it, which
depends on the process's earlier allocations: the ranks of one launch of the
host backend then tend to get identical offsets, MPI's ranks different ones.
That matters because a copy whose destination lies a few bytes after its
source modulo 4 KiB runs several times slower on some CPUs, in the kernel's
process_vm_readv as in MPI's (the host backend avoids such reads, MPI does
not); the heap layout measures that lottery as much as the libraries.

The memcpy model: the bytes each rank copies in the host backend's algorithm
for a large message, ``W`` (a reduction of ``k`` inputs into one output counts
as ``(k+1)/2`` copies, its memory traffic against a copy's; a single-copy read
of a peer's buffer with process_vm_readv counts as one copy), over the memcpy
bandwidth of one stream when ``p = min(nranks, cpus)`` streams copy at once,
and ``nranks / p`` ranks share a CPU::

    allreduce       W = m * (2(n-1)/n + (n+1)/(2n))
                                          single copy:    read own share of n-1
                                                          peers, reduce it, read
                                                          n-1 shares of the result
                    W = m * ((n-1)/n + (n+1)/(2n) + 1)
                                          staged:         stage others' shares,
                                                          reduce own, copy out
    allgather       W = m                 single copy:    own to out, read n-1 blocks
                    W = m * (n+1)/n       staged:         stage own, own to out,
                                                          copy out the n-1 others
    reduce_scatter  W = m/n * ((n-1) + (n+1)/2)           stage n-1 pieces, reduce
    broadcast       W = m                                 non-roots read the root's
                                                          buffer (or copy it out of
                                                          the segment)
    alltoall        W = m                 single copy:    own piece, read n-1 pieces
                    W = m * (2n-1)/n      staged:         stage n-1 pieces, own piece,
                                                          copy out n-1 pieces
    time = W * (n / p) / bandwidth(p)

Which of the two a call takes follows NCCL4PY_HOST_SINGLE_COPY and its
automatic thresholds (host/cma.c; ``single_copy`` below repeats them).  Above
them, while every rank has a CPU, the all-reduce, all-gather and all-to-all
measure both paths and take the faster (host/tune.c); the model then counts
the path that copies less, the more demanding of the two.  A
process_vm_readv copy moves about 10 GB/s even within the cache, so the model
flatters the single-copy rows.  An all-gather or all-to-all in which a read
would land 1 to 63 bytes after its source modulo 4 KiB is staged instead, and
a broadcast's read at such a distance goes through a bounce buffer; the model
counts neither (they depend on where the arrays happen to lie), so it asks
more of such rows than the algorithm allows.

Both bandwidths (one stream alone, and p streams at once, 64 MiB copies with
NumPy) are measured in the same run, before and after the collectives; the
model uses the better of the two measurements.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OPS = ("allreduce", "allgather", "reduce_scatter", "broadcast", "alltoall")
# nccl.bench's names, for the busbw factors (nccl.bench.collectives).
NCCL_BENCH_NAME = {"allreduce": "all_reduce", "allgather": "all_gather",
                   "reduce_scatter": "reduce_scatter", "broadcast": "broadcast",
                   "alltoall": "alltoall"}
DEFAULT_SIZES = "8,64,512,4K,32K,256K,1M,4M,16M,64M"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "nccl4py-bench"
PEERS = ("mpich", "openmpi", "gloo")
LAYOUTS = ("page", "heap")
PAGE = 4096
LAUNCH_TIMEOUT = 1800


def parse_size(s: str) -> int:
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip()
    return int(s[:-1]) * mult[s[-1].upper()] if s[-1].upper() in mult else int(s)


def size_text(b: int) -> str:
    for unit, v in (("M", 1 << 20), ("K", 1 << 10)):
        if b >= v and b % v == 0:
            return f"{b // v}{unit}"
    return str(b)


# ------------------------------------------------------------------ rank side

REPEATS = 5
# Untimed calls of every size first, at least this many: one-time costs stay
# out of the timing (first touches of the arrays, MPI's set-up of a
# transfer, and the host backend's measurement of its two paths, host/tune.c,
# which takes the first ten calls of a size and then every 256th).
WARMUP = 12


def iterations(nbytes: int) -> int:
    return max(3, min(1000, (16 << 20) // max(nbytes, 1)))


def counts(op: str, nbytes: int, n: int) -> tuple[int, int]:
    """(send, receive) element counts of float32 for a test size (nccl-tests)."""
    c = max(1, nbytes // 4)
    if op == "allgather":
        per = max(1, c // n)
        return per, per * n
    if op in ("reduce_scatter", "alltoall"):
        per = max(1, c // n)
        return per * n, (per if op == "reduce_scatter" else per * n)
    return c, c


def placed(a, layout: str):
    """`a`, or with layout "page" a copy of it that starts at a page boundary."""
    import numpy as np

    if layout == "heap":
        return a
    raw = np.empty(a.nbytes + PAGE, np.uint8)
    at = -raw.ctypes.data % PAGE
    out = raw[at:at + a.nbytes].view(a.dtype)
    out[:] = a
    return out


def rank_main(impl: str, ops: list[str], sizes_: list[int], layout: str) -> None:
    import numpy as np

    if impl == "gloo":
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        dist.init_process_group("gloo")
        rank, n = dist.get_rank(), dist.get_world_size()
        arr = torch.from_numpy

        def make(a):
            return arr(a)

        barrier = dist.barrier
        calls = {
            "allreduce": lambda s, r: (r.copy_(s), dist.all_reduce(r)),
            "allgather": lambda s, r: dist.all_gather_into_tensor(r, s),
            "reduce_scatter": lambda s, r: dist.reduce_scatter_tensor(r, s),
            "broadcast": lambda s, r: dist.broadcast(r, 0),
            "alltoall": lambda s, r: dist.all_to_all_single(r, s),
        }
    elif impl == "mpi":
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
        rank, n = comm.Get_rank(), comm.Get_size()
        barrier = comm.Barrier

        def make(a):
            return a

        calls = {
            "allreduce": lambda s, r: comm.Allreduce(s, r, op=MPI.SUM),
            "allgather": lambda s, r: comm.Allgather(s, r),
            "reduce_scatter": lambda s, r: comm.Reduce_scatter_block(s, r, op=MPI.SUM),
            "broadcast": lambda s, r: comm.Bcast(r, root=0),
            "alltoall": lambda s, r: comm.Alltoall(s, r),
        }
    else:
        import nccl.core as nc
        import nccl.run

        env = nccl.run.environment()
        rank, n = env.rank, env.nranks
        comm = nc.Communicator.init(n, rank, nc.UniqueId.from_bytes(env.unique_id))
        one = np.zeros(1, np.float32)

        def barrier():
            comm.allreduce(one, one, nc.SUM)

        def make(a):
            return a

        calls = {
            "allreduce": lambda s, r: comm.allreduce(s, r, nc.SUM),
            "allgather": lambda s, r: comm.allgather(s, r),
            "reduce_scatter": lambda s, r: comm.reduce_scatter(s, r, nc.SUM),
            "broadcast": lambda s, r: comm.broadcast(r, r, 0),
            "alltoall": lambda s, r: comm.alltoall(s, r),
        }

    # warm up the processes (caches, CPU frequency, scheduler) before any timing
    w, w2 = make(np.zeros(2, np.float32)), make(np.zeros(2, np.float32))
    flag, total = make(np.zeros(1, np.float32)), make(np.zeros(1, np.float32))
    t_end = time.perf_counter() + 0.5
    while True:
        for _ in range(100):
            calls["allreduce"](w, w2)
        flag[0] = float(time.perf_counter() < t_end)
        calls["allreduce"](flag, total)  # every rank stops at the same iteration
        if total[0] < n:
            break
    results = []
    for op in ops:
        fn = calls[op]
        for nbytes in sizes_:
            ns, nr = counts(op, nbytes, n)
            if op == "alltoall":  # block d goes to rank d
                send_np = (rank * n + np.repeat(np.arange(n), ns // n) + 1).astype(np.float32)
            else:
                send_np = np.full(ns, rank + 1, np.float32)
            send_np = placed(send_np, layout)
            recv_np = placed(np.zeros(nr, np.float32), layout)
            if op == "broadcast":
                recv_np[:] = 7 if rank == 0 else 0
            send, recv = make(send_np), make(recv_np)
            iters = iterations(nbytes)
            for _ in range(max(WARMUP, iters // 10)):
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
            if op in ("allreduce", "reduce_scatter"):
                ok = bool(np.all(recv_np == n * (n + 1) / 2))
            elif op == "allgather":
                ok = bool(np.all(recv_np.reshape(n, -1) == np.arange(1, n + 1)[:, None]))
            elif op == "broadcast":
                ok = bool(np.all(recv_np == 7))
            else:
                want = np.repeat(np.arange(n) * n + rank + 1, nr // n)
                ok = bool(np.all(recv_np == want))
            results.append({"op": op, "size": nbytes, "bytes": 4 * (nr if op == "allgather" else ns),
                            "time": dt, "ok": ok})
    oks = make(np.array([float(all(r["ok"] for r in results))], np.float32))
    tot = make(np.zeros(1, np.float32))
    calls["allreduce"](oks, tot)
    if rank == 0:
        print("RESULT " + json.dumps({"impl": impl, "n": n, "all_ranks_ok": bool(tot[0] == n),
                                      "results": results}), flush=True)
    if impl == "gloo":
        dist.destroy_process_group()
    elif impl == "nccl":
        comm.destroy()


# -------------------------------------------------------- memcpy bandwidth

def _copy_worker(nbytes: int, reps: int, start, out) -> None:
    import numpy as np

    a = np.ones(nbytes // 4, np.float32)
    b = np.zeros_like(a)
    np.copyto(b, a)
    best = float("inf")
    for _ in range(3):
        start.wait()
        t0 = time.perf_counter()
        for _ in range(reps):
            np.copyto(b, a)
        best = min(best, (time.perf_counter() - t0) / reps)
    out.put(nbytes / best / 1e9)


def memcpy_bandwidth(streams: int, nbytes: int = 64 << 20, reps: int = 10) -> float:
    """GB/s of one stream while `streams` processes copy nbytes buffers at once
    (median over the streams of the best of 3 blocks)."""
    ctx = multiprocessing.get_context("fork")
    start, out = ctx.Barrier(streams), ctx.Queue()
    procs = [ctx.Process(target=_copy_worker, args=(nbytes, reps, start, out))
             for _ in range(streams)]
    for p in procs:
        p.start()
    got = sorted(out.get(timeout=600) for _ in procs)
    for p in procs:
        p.join()
    return got[len(got) // 2]


def single_copy(op: str, n: int, nbytes: int, cpus: int) -> bool:
    """Whether the host backend copies straight from the peers' buffers
    (host/cma.c's choice, for NCCL4PY_HOST_SINGLE_COPY unset or auto); where
    host/tune.c measures both paths, True: the model counts the one that
    copies less."""
    mode = os.environ.get("NCCL4PY_HOST_SINGLE_COPY", "").strip().lower() or "auto"
    block = nbytes if op in ("allreduce", "broadcast") else nbytes // n
    if mode == "0" or op not in ("allreduce", "allgather", "alltoall", "broadcast") \
            or block <= 4096:
        return False
    if mode == "1":
        return True
    crowded = n > cpus
    least = {"allreduce": (4 << 20) if crowded else 16 << 10,
             "allgather": (4 << 20) if crowded else 4097,
             "alltoall": (64 << 10) if crowded else 4097,
             "broadcast": (4 << 20) if crowded else 4097}[op]
    return block >= least


def model_work(op: str, n: int, nbytes: int, cpus: int) -> float:
    """Bytes each rank copies in the host backend's large-message algorithm."""
    m = float(nbytes)
    if single_copy(op, n, nbytes, cpus):
        # a broadcast's root writes 1/n of the message into every receiver,
        # which reads the rest
        return {"broadcast": m * (n - 1) / n,
                "allreduce": m * (2 * (n - 1) / n + (n + 1) / (2 * n))}.get(op, m)
    return {"allreduce": m * ((n - 1) / n + (n + 1) / (2 * n) + 1),
            "allgather": m * (n + 1) / n,
            "reduce_scatter": m / n * ((n - 1) + (n + 1) / 2),
            "broadcast": m,
            "alltoall": m * (2 * n - 1) / n}[op]


def model_time(op: str, n: int, nbytes: int, bw: dict[int, float], cpus: int) -> float:
    p = min(n, cpus)
    return model_work(op, n, nbytes, cpus) * (n / p) / (bw[p] * 1e9)


# ---------------------------------------------------------------- driver side

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse_result(stdout: str) -> dict | None:
    for line in stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return None


def run_launch(cmd: list[str], env: dict) -> dict:
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=LAUNCH_TIMEOUT)
    res = parse_result(p.stdout)
    if res is None or p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout[-3000:]}\n"
                           f"{p.stderr[-3000:]}")
    return res


def run_gloo(n: int, args: list[str], env: dict) -> dict:
    env = dict(env, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               WORLD_SIZE=str(n))
    procs = [subprocess.Popen([sys.executable, *args], env=dict(env, RANK=str(r)),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(n)]
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=LAUNCH_TIMEOUT))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    res = parse_result(outs[0][0])
    if res is None or any(p.returncode for p in procs):
        raise RuntimeError(f"gloo ranks failed: {[p.returncode for p in procs]}\n"
                           f"{outs[0][0][-2000:]}\n{outs[0][1][-3000:]}")
    return res


def mpi_env(peer: str, install: bool) -> tuple[Path, Path]:
    """(python, mpiexec) of a virtual environment with mpi4py and one MPI wheel."""
    venv = CACHE / f"{peer}-venv"
    py, mpiexec = venv / "bin" / "python", venv / "bin" / "mpiexec"
    if install and not (py.exists() and mpiexec.exists()):
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "mpi4py", peer, "numpy"],
                       check=True)
    if not (py.exists() and mpiexec.exists()):
        raise RuntimeError(f"{venv} has no mpi4py with {peer} (run without --no-install)")
    return py, mpiexec


def launch(impl: str, n: int, ops: list[str], sz: str, layout: str, env: dict,
           peers: dict) -> dict:
    me = str(Path(__file__).resolve())
    side = ["--rank-side", "gloo" if impl == "gloo" else "mpi" if impl in peers else "nccl",
            "--ops", ",".join(ops), "--sizes", sz, "--layout", layout]
    if impl == "ours":
        return run_launch([sys.executable, "-m", "nccl.run", "-n", str(n), "--backend", "host",
                           me, *side], env)
    if impl == "gloo":
        return run_gloo(n, [me, *side], env)
    py, mpiexec = peers[impl]
    extra = ["--oversubscribe"] if impl == "openmpi" and n > (os.cpu_count() or 1) else []
    return run_launch([str(mpiexec), *extra, "-n", str(n), str(py), me, *side], env)


def merge_best(into: dict, impl: str, got: dict) -> None:
    """Keep, per (op, size), the fastest of the runs of one implementation
    and every run's time ("rounds"); a wrong result in any run stays
    visible."""
    if impl not in into:
        into[impl] = {**got, "results": [{**r, "rounds": [r["time"]]} for r in got["results"]]}
        return
    have = into[impl]
    best = {(r["op"], r["size"]): r for r in have["results"]}
    for r in got["results"]:
        old = best.get((r["op"], r["size"]))
        rounds = (old["rounds"] if old else []) + [r["time"]]
        if old is None or (r["time"] < old["time"] and old["ok"]):
            best[(r["op"], r["size"])] = {**r, "ok": r["ok"] and (old is None or old["ok"]),
                                          "rounds": rounds}
        else:
            old["rounds"] = rounds
            old["ok"] = old["ok"] and r["ok"]
    have["results"] = list(best.values())
    have["all_ranks_ok"] = have.get("all_ranks_ok", True) and got.get("all_ranks_ok", True)


def fmt_us(t: float | None) -> str:
    return "-" if t is None else f"{t * 1e6:.1f}" if t < 1 else f"{t * 1e6:.0f}"


def spread(times: list[float]) -> str:
    """The fastest and slowest of the rounds' times, in microseconds."""
    lo, hi = fmt_us(min(times)), fmt_us(max(times))
    return f"{lo} us" if lo == hi else f"{lo}-{hi} us"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--sizes", default=DEFAULT_SIZES,
                    help=f"comma-separated sizes in bytes, K/M suffixes (default {DEFAULT_SIZES})")
    ap.add_argument("--ops", default=",".join(OPS), help="comma-separated subset of " + ",".join(OPS))
    ap.add_argument("--peers", nargs="*", default=list(PEERS), choices=PEERS)
    ap.add_argument("--no-install", action="store_true", help="use the MPI environments as they are")
    ap.add_argument("--rounds", type=int, default=1,
                    help="run every implementation this many times, taking turns, and keep each "
                         "row's best time (drift in the machine's load then hits all alike)")
    ap.add_argument("--layout", choices=LAYOUTS, default="page",
                    help="page: every array starts at a page boundary, in every implementation "
                         "alike (default); heap: wherever NumPy's allocator puts it")
    ap.add_argument("--plot", metavar="PNG", help="draw time and ratio against size (matplotlib)")
    ap.add_argument("--json", metavar="FILE", help="write every measurement as JSON")
    ap.add_argument("--memcpy-bytes", default="64M", help=argparse.SUPPRESS)
    ap.add_argument("--rank-side", choices=["mpi", "nccl", "gloo"], help=argparse.SUPPRESS)
    ns = ap.parse_args()
    ops = [o for o in ns.ops.split(",") if o]
    if ns.rank_side:
        rank_main(ns.rank_side, ops, [int(s) for s in ns.sizes.split(",")], ns.layout)
        return 0
    bad = [o for o in ops if o not in OPS]
    if bad:
        ap.error(f"unknown operation(s) {bad}; choose from {OPS}")
    from nccl.bench.collectives import COLLECTIVES

    sizes = [parse_size(s) for s in ns.sizes.split(",")]
    sz = ",".join(str(s) for s in sizes)
    cpus = os.cpu_count() or 1
    env = dict(os.environ)
    for k in ("NCCL_LIBRARY", "NCCL4PY_BACKEND"):
        env.pop(k, None)
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    env.setdefault("OMP_NUM_THREADS", "1")
    peers: dict[str, tuple[Path, Path]] = {}
    impls, skipped = ["ours"], {}
    for peer in ns.peers:
        try:
            if peer == "gloo":
                import torch.distributed as dist

                if not dist.is_gloo_available():
                    raise RuntimeError("torch has no gloo backend")
            else:
                peers[peer] = mpi_env(peer, not ns.no_install)
            impls.append(peer)
        except (ImportError, RuntimeError, subprocess.CalledProcessError) as e:
            skipped[peer] = str(e).splitlines()[0]
    for peer, why in skipped.items():
        print(f"# {peer}: not run: {why}")

    streams = sorted({min(n, cpus) for n in ns.ranks} | {1})
    mb = parse_size(ns.memcpy_bytes)
    bw_before = {p: memcpy_bandwidth(p, mb) for p in streams}
    data: dict[int, dict[str, dict]] = {}
    for n in ns.ranks:
        data[n] = {}
        for rnd in range(max(1, ns.rounds)):
            turn = impls[rnd % len(impls):] + impls[:rnd % len(impls)]
            for impl in turn:
                try:
                    merge_best(data[n], impl, launch(impl, n, ops, sz, ns.layout, env, peers))
                except (RuntimeError, subprocess.TimeoutExpired) as e:
                    print(f"# {impl} with {n} ranks failed: {str(e)[:2000]}")
    bw_after = {p: memcpy_bandwidth(p, mb) for p in streams}
    bw = {p: max(bw_before[p], bw_after[p]) for p in streams}

    load = os.getloadavg()
    print(f"# host backend vs {', '.join(i for i in impls if i != 'ours') or 'nothing'}; float32; "
          f"{cpus} CPUs; {ns.layout} layout; "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end")
    for p in streams:
        print(f"# memcpy {size_text(mb)}B, {p} stream{'s' if p > 1 else ''} at once: "
              f"{bw_before[p]:.2f} GB/s per stream before, {bw_after[p]:.2f} after")
    peer_cols = [i for i in impls if i != "ours"]
    head = (f"{'op':<15}{'n':>2}{'bytes':>10}{'ours us':>10}"
            + "".join(f"{p + ' us':>12}" for p in peer_cols)
            + f"{'busbw':>8}{'model':>8}{'/model':>8}"
            + "".join(f"{p + '/ours':>14}" for p in peer_cols) + f"{'ok':>4}")
    print(head)
    rows = []
    for n in ns.ranks:
        res = {impl: {(r["op"], r["size"]): r for r in d["results"]}
               for impl, d in data[n].items()}
        all_ok = {impl: d.get("all_ranks_ok", True) for impl, d in data[n].items()}
        for op in ops:
            factor = COLLECTIVES[NCCL_BENCH_NAME[op]].factor(n)
            for size in sizes:
                ours = res.get("ours", {}).get((op, size))
                if ours is None:
                    continue
                t, nbytes = ours["time"], ours["bytes"]
                row = {"op": op, "n": n, "size": size, "bytes": nbytes, "time": {"ours": t},
                       "rounds": {"ours": ours["rounds"]}}
                tm = model_time(op, n, nbytes, bw, cpus)
                busbw = nbytes / t * factor / 1e9
                mbusbw = nbytes / tm * factor / 1e9
                row.update(busbw=busbw, model_busbw=mbusbw, model_time=tm)
                ok = ours["ok"] and all_ok.get("ours", True)
                cells = []
                for p in peer_cols:
                    r = res.get(p, {}).get((op, size))
                    row["time"][p] = r["time"] if r else None
                    row["rounds"][p] = r["rounds"] if r else []
                    if r:
                        ok = ok and r["ok"] and all_ok.get(p, True)
                    cells.append(f"{r['time'] / t:>13.2f}x" if r else f"{'-':>14}")
                row["ok"] = ok
                rows.append(row)
                show_model = nbytes >= (1 << 20)
                print(f"{op:<15}{n:>2}{nbytes:>10}{fmt_us(t):>10}"
                      + "".join(f"{fmt_us(row['time'][p]):>12}" for p in peer_cols)
                      + f"{busbw:>8.2f}"
                      + (f"{mbusbw:>8.2f}{tm / t * 100:>7.0f}%" if show_model else f"{'':>16}")
                      + "".join(cells) + f"{'' if ok else 'NO':>4}")
    for p in peer_cols:
        below = [r for r in rows if r["time"].get(p) and r["time"][p] < r["time"]["ours"]]
        print(f"# rows where {p} is faster: {len(below)} of "
              f"{sum(1 for r in rows if r['time'].get(p))}"
              + "".join(f"\n#   {r['op']} n={r['n']} {r['bytes']} B: "
                        f"{r['time'][p] / r['time']['ours']:.2f}x (rounds: ours "
                        f"{spread(r['rounds']['ours'])}, {p} {spread(r['rounds'][p])})"
                        for r in below))
    doc = {"cpus": cpus, "layout": ns.layout, "load": load,
           "memcpy_before": bw_before, "memcpy_after": bw_after,
           "skipped": skipped, "rows": rows, "raw": {n: data[n] for n in data}}
    if ns.json:
        Path(ns.json).write_text(json.dumps(doc, indent=1))
    if ns.plot:
        plot(doc, ops, peer_cols, ns.plot)
        print(f"# plot written to {ns.plot}")
    return 0 if all(r["ok"] for r in rows) else 1


def plot(doc: dict, ops: list[str], peers: list[str], png: str) -> None:
    from nccl.bench.plot import MissingMatplotlib

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MissingMatplotlib("--plot needs matplotlib: pip install matplotlib") from None
    ranks = sorted({r["n"] for r in doc["rows"]})
    fig, axes = plt.subplots(2 * len(ranks), len(ops), figsize=(4 * len(ops), 6 * len(ranks)),
                             squeeze=False)
    for i, n in enumerate(ranks):
        for j, op in enumerate(ops):
            rows = sorted((r for r in doc["rows"] if r["n"] == n and r["op"] == op),
                          key=lambda r: r["bytes"])
            if not rows:
                continue
            xs = [r["bytes"] for r in rows]
            ta, ra = axes[2 * i][j], axes[2 * i + 1][j]
            for impl in ["ours", *peers]:
                pts = [(x, r["time"].get(impl)) for x, r in zip(xs, rows) if r["time"].get(impl)]
                if pts:
                    ta.plot(*zip(*[(x, t * 1e6) for x, t in pts]), marker="o", markersize=3,
                            label=impl)
                if impl != "ours" and pts:
                    ra.plot(*zip(*[(x, t / r["time"]["ours"]) for (x, t), r in
                                   zip(pts, [r for r in rows if r["time"].get(impl)])]),
                            marker="o", markersize=3, label=f"{impl} / ours")
            ta.plot(xs, [r["model_time"] * 1e6 for r in rows], "k:", label="memcpy model")
            ra.axhline(1.0, color="k", linewidth=0.8)
            for ax in (ta, ra):
                ax.set_xscale("log", base=2)
                ax.set_yscale("log")
                ax.grid(True, which="both", alpha=0.3)
                ax.set_xlabel("bytes")
            ta.set_title(f"{op}, {n} ranks: time")
            ta.set_ylabel("us")
            ra.set_title(f"{op}, {n} ranks: peer time / ours")
            ra.set_ylabel("ratio (>1: ours faster)")
            ta.legend(fontsize=7)
            ra.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=80)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
