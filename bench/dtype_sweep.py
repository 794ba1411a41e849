#!/usr/bin/env python3
"""Every data type's bus bandwidth against float32's: python -m nccl.bench -d all.

    python bench/dtype_sweep.py [--nranks 2 4] [--collectives all_reduce,reduce_scatter,reduce]
                                [-b 8] [-e 64M] [-f 2] [-o sum] [-d all] [--rounds 1] [--show SIZES]
                                [--json FILE]

For each rank count, runs ``python -m nccl.bench COLLECTIVES --backend host
-d TYPES -b B -e E -f F -o OPS -J ...`` (nccl.bench checks every result, as
nccl-tests does) --rounds times and keeps, per collective, op, size and type,
the best out-of-place bus bandwidth over the rounds.  Prints, per rank count,
collective and op, float32's bus bandwidth (GB/s) and every other type's as a
multiple of it, at the sizes of --show (default: every size run), and the
count of wrong results (which must be 0).  nccl.bench runs the types one
after the other, so a ratio compares runs seconds apart: on a busy machine
take several rounds.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile

TYPES = ["float", "double", "half", "bfloat16", "f8e4m3", "f8e5m2", "int8", "uint8", "int32",
         "uint32", "int64", "uint64"]
LOWP = ["half", "bfloat16", "f8e4m3", "f8e5m2"]


def parse_size(s: str) -> int:
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip().upper()
    return int(s[:-1]) * mult[s[-1]] if s and s[-1] in mult else int(s)


def fmt_size(b: int) -> str:
    for unit, m in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= m and b % m == 0:
            return f"{b // m}{unit}"
    return str(b)


def run(nranks: int, args) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "sweep.json")
        cmd = [sys.executable, "-m", "nccl.bench", *args.collectives, "--nranks", str(nranks),
               "--backend", "host", "-d", args.d, "-b", args.b, "-e", args.e, "-f", args.f,
               "-o", args.o, "--progress-every", "0", "-J", out, *args.extra]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if not os.path.exists(out):
            raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout[-3000:]}\n"
                             f"{p.stderr[-3000:]}")
        with open(out) as f:
            return json.load(f)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nranks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--collectives", default="all_reduce,reduce_scatter,reduce")
    ap.add_argument("-b", default="8")
    ap.add_argument("-e", default="64M")
    ap.add_argument("-f", default="2")
    ap.add_argument("-o", default="sum", help="ops, comma-separated (each has its own table)")
    ap.add_argument("-d", default="all", help="types (float is always one of them)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--show", help="sizes to print, comma-separated (default: all)")
    ap.add_argument("--json", help="write every round's nccl.bench rows to this file")
    ap.add_argument("extra", nargs="*", help="more nccl.bench arguments (after --)")
    args = ap.parse_args()
    args.collectives = [c for c in args.collectives.split(",") if c]
    if args.d != "all" and "float" not in args.d.split(","):
        args.d = "float," + args.d
    show = {parse_size(s) for s in args.show.split(",")} if args.show else None
    print(f"# {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
          f"python -m nccl.bench {' '.join(args.collectives)} --backend host -d {args.d} -b {args.b} "
          f"-e {args.e} -f {args.f} -o {args.o} {' '.join(args.extra)}".rstrip()
          + f"; best of {args.rounds} round(s)")
    everything = []
    status = 0
    for n in args.nranks:
        best: dict = {}
        wrong = 0
        checked = True
        for _ in range(args.rounds):
            res = run(n, args)
            everything.append(res)
            for r in res["results"]:
                key = (r["collective"], r.get("redop", "-"), r["size"], r["type"])
                bw = r["out_of_place"]["bus_bw"]
                best[key] = max(best.get(key, 0.0), bw)
                for place in ("out_of_place", "in_place"):
                    if r[place]["nwrong"] is None:
                        checked = False
                    wrong += r[place]["nwrong"] or 0
            wrong += res.get("wrong_or_out_of_bounds", 0) or 0
        status |= bool(wrong)
        for coll, op in sorted({(c, o) for (c, o, _, _) in best},
                               key=lambda co: (args.collectives.index(co[0]), co[1])):
            sizes = sorted({s for (c, o, s, _) in best if (c, o) == (coll, op)})
            types = [t for t in TYPES if (coll, op, sizes[-1], t) in best]
            print(f"\n## {coll}, op {op}, {n} ranks: float busbw (GB/s), the others as a "
                  f"multiple of it (out of place); wrong results: "
                  f"{wrong if checked else 'not checked (-c 0)'}")
            print(f"{'size':>6} {'float':>7} " + " ".join(f"{t:>8}" for t in types if t != "float"))
            for s in sizes:
                if show and s not in show:
                    continue
                f = best.get((coll, op, s, "float"), 0.0)
                cells = []
                for t in types:
                    if t == "float":
                        continue
                    v = best.get((coll, op, s, t))
                    cells.append(f"{v / f:7.2f}x" if v is not None and f > 0 else f"{'-':>8}")
                print(f"{fmt_size(s):>6} {f:7.3f} " + " ".join(cells))
            big = [s for s in sizes if s >= (1 << 20)]
            if big:
                worst = {t: min(best[(coll, op, s, t)] / best[(coll, op, s, "float")] for s in big
                                if best.get((coll, op, s, "float"), 0) > 0)
                         for t in LOWP if (coll, op, big[0], t) in best}
                print("# from 1M up, the lowest ratio: "
                      + ", ".join(f"{t} {v:.2f}x" for t, v in worst.items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(everything, f, indent=1)
    return status


if __name__ == "__main__":
    sys.exit(main())
