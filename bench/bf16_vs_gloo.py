#!/usr/bin/env python3
"""bfloat16 all-reduce: the host backend against torch.distributed's gloo, in one job.

    python bench/bf16_vs_gloo.py [--nranks 2] [--sizes 4K,16K,...,64M] [--dtypes bfloat16,float32]
                                 [--rounds 5] [--json FILE]

Starts --nranks ranks with ``python -m nccl.run`` (host backend).  Every rank
joins both a gloo process group (``torch.distributed.init_process_group``)
and a ``nccl.core.Communicator``, and all-reduces the same CPU tensors with
each: ``dist.all_reduce(t)`` and ``comm.allreduce(t, t, SUM)``, both in
place, as torch code calls them.  For each dtype and size the two take
turns, --rounds times, each a timed block of calls between barriers; a row
keeps each one's best block, so both saw the same machine.  Rows: time per
call, bus bandwidth (nccl-tests' all-reduce factor 2(n-1)/n), and gloo's time
over ours (above 1: we are faster).

The timed tensors hold zeros, so that repeated in-place sums stay finite:
neither library's speed depends on the values.  Before the timing, one
all-reduce of random values per dtype and size checks both results against
the float32 sum in rank order rounded once: ours must be equal bit for bit;
gloo's largest difference (in units of the last place) is reported.

Our side uses nccl.core directly (not a torch.distributed backend).
torch is required (a CPU build is enough).
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time

SIZES = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]


def parse_size(s: str) -> int:
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip().upper()
    return int(s[:-1]) * mult[s[-1]] if s and s[-1] in mult else int(s)


def iterations(nbytes: int) -> int:
    return max(3, min(200, (32 << 20) // max(nbytes, 1)))


def rank_main(args) -> None:
    import numpy as np
    import torch
    import torch.distributed as dist

    import nccl.core as nc
    import nccl.run

    torch.set_num_threads(1)
    env = nccl.run.environment()
    rank, n = env.rank, env.nranks
    dist.init_process_group("gloo", rank=rank, world_size=n)
    comm = nc.Communicator.init(n, rank, nc.UniqueId.from_bytes(env.unique_id))
    dtypes = {"bfloat16": torch.bfloat16, "float32": torch.float32, "float16": torch.float16}
    rows = []
    for name in args.dtypes:
        dt = dtypes[name]
        esz = torch.empty(0, dtype=dt).element_size()
        for nbytes in args.sizes:
            count = max(1, nbytes // esz)
            # correctness, once: every rank builds every rank's input
            ins = [torch.from_numpy(np.random.default_rng(1000 * r + count).standard_normal(count)
                                    .astype(np.float32)).to(dt) for r in range(n)]
            acc = ins[0].float()
            for x in ins[1:]:
                acc = acc + x.float()
            want = acc.to(dt)
            mine = ins[rank].clone()
            comm.allreduce(mine, mine, nc.SUM)
            theirs = ins[rank].clone()
            dist.all_reduce(theirs)
            ours_exact = bool(torch.equal(mine.view(torch.int16 if esz == 2 else torch.int32),
                                          want.view(torch.int16 if esz == 2 else torch.int32)))
            ulp = (want.float().abs() * torch.finfo(dt).eps).clamp_min(torch.finfo(dt).tiny)
            gloo_ulps = float(((theirs.float() - want.float()).abs() / ulp).max())
            # timing, in place, on zeros
            t_ours = torch.zeros(count, dtype=dt)
            t_gloo = torch.zeros(count, dtype=dt)
            iters = iterations(nbytes)
            best = {"ours": float("inf"), "gloo": float("inf")}
            calls = {"ours": lambda: comm.allreduce(t_ours, t_ours, nc.SUM),
                     "gloo": lambda: dist.all_reduce(t_gloo)}
            for impl in ("ours", "gloo"):  # warm-up
                for _ in range(max(2, iters // 10)):
                    calls[impl]()
            for _ in range(args.rounds):
                for impl in ("gloo", "ours"):
                    fn = calls[impl]
                    dist.barrier()
                    t0 = time.perf_counter()
                    for _ in range(iters):
                        fn()
                    dist.barrier()
                    best[impl] = min(best[impl], (time.perf_counter() - t0) / iters)
            rows.append({"dtype": name, "bytes": count * esz, "ours_s": best["ours"],
                         "gloo_s": best["gloo"], "ours_exact": ours_exact,
                         "gloo_max_ulps": gloo_ulps})
    oks = torch.tensor([float(all(r["ours_exact"] for r in rows))])
    dist.all_reduce(oks)
    if rank == 0:
        print("RESULT " + json.dumps({"nranks": n, "all_ranks_exact": bool(oks.item() == n),
                                      "rows": rows}), flush=True)
    comm.destroy()
    dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fmt_size(b: int) -> str:
    for unit, m in (("M", 1 << 20), ("K", 1 << 10)):
        if b >= m and b % m == 0:
            return f"{b // m}{unit}"
    return str(b)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nranks", type=int, default=2)
    ap.add_argument("--sizes", default=",".join(fmt_size(s) for s in SIZES),
                    help="bytes per rank, with K/M/G (default: 4K to 64M, factor 4)")
    ap.add_argument("--dtypes", default="bfloat16,float32")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", help="write the rows to this file")
    ap.add_argument("--rank-side", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.sizes = [parse_size(s) for s in args.sizes.split(",") if s]
    args.dtypes = [d for d in args.dtypes.split(",") if d]
    bad = [d for d in args.dtypes if d not in ("bfloat16", "float32", "float16")]
    if bad or args.nranks < 1 or args.rounds < 1 or not args.sizes or min(args.sizes) < 1:
        ap.error(f"bad arguments: dtypes {bad}, nranks {args.nranks}, rounds {args.rounds}, "
                 f"sizes {args.sizes}")
    if args.rank_side:
        rank_main(args)
        return 0
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        print("torch is not installed (pip install torch, a CPU build is enough)", file=sys.stderr)
        return 2
    if not dist.is_gloo_available():
        print("this torch has no gloo backend", file=sys.stderr)
        return 2
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    cmd = [sys.executable, "-m", "nccl.run", "-n", str(args.nranks), "--backend", "host",
           os.path.abspath(__file__), "--rank-side", "--sizes",
           ",".join(str(s) for s in args.sizes), "--dtypes", ",".join(args.dtypes),
           "--rounds", str(args.rounds)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    line = next((l for l in p.stdout.splitlines() if l.startswith("RESULT ")), None)
    if p.returncode != 0 or line is None:
        print(f"the ranks failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}",
              file=sys.stderr)
        return 1
    res = json.loads(line[len("RESULT "):])
    fac = 2 * (res["nranks"] - 1) / res["nranks"] if res["nranks"] > 1 else 1.0
    print(f"# all-reduce in place, {res['nranks']} ranks, best of {args.rounds} rounds; "
          f"torch {torch.__version__} gloo against nccl4py host backend; "
          f"{os.cpu_count()} CPUs")
    print(f"{'dtype':>9} {'size':>6} {'gloo us':>10} {'ours us':>10} {'gloo GB/s':>10} "
          f"{'ours GB/s':>10} {'gloo/ours':>10} {'ours exact':>11} {'gloo ulps':>10}")
    for r in res["rows"]:
        gb = r["bytes"] * fac / 1e9
        print(f"{r['dtype']:>9} {fmt_size(r['bytes']):>6} {r['gloo_s'] * 1e6:10.1f} "
              f"{r['ours_s'] * 1e6:10.1f} {gb / r['gloo_s']:10.2f} {gb / r['ours_s']:10.2f} "
              f"{r['gloo_s'] / r['ours_s']:9.2f}x {str(r['ours_exact']):>11} "
              f"{r['gloo_max_ulps']:10.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0 if res["all_ranks_exact"] else 1


if __name__ == "__main__":
    sys.exit(main())
