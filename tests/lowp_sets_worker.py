"""The results of one set of the host backend's 16- and 8-bit float kernels,
for tests/test_host_lowp.py to compare, bit for bit, with every other set:

    python tests/lowp_sets_worker.py LIBRARY OUT.npz

run with NCCL4PY_HOST_KERNELS naming the set.  It saves (one array each):

- every code of the four types widened to float32, and the codes of float32
  values around every rounding decision of each type (lowp_worker's), of
  random bit patterns and of every float32 with a half's or a bfloat16's
  high bits (each with its 16 low bits random);
- the all-reduce of two ranks of every pair of fp8 codes, and of every half
  and bfloat16 code against several partners (special codes, neighbours
  and random codes), with sum, prod, max, min, avg and PreMulSum (several
  scalars), and an all-reduce-with-bias of the same pairs;
- all-reduces of 3, 4 and 8 ranks of random codes, every op;
- every count 0..130 of every op at 2, 3 and 4 ranks (two steps of the
  widest loop, 64 codes, and more), at byte offsets 0, 1 and 3, out of
  place and in place (so that every partial step of every loop runs, with
  the elements around the result checked untouched).

Prints the number of arrays.
"""
from __future__ import annotations

import ctypes
import sys

import numpy as np

import lowp_worker as lw

OPNUM = {"sum": lw.SUM, "prod": lw.PROD, "max": lw.MAX, "min": lw.MIN, "avg": lw.AVG}


class Comms:
    def __init__(self, lib, n):
        self.lib, self.n = lib, n
        self.c = (ctypes.c_void_p * n)()
        assert lib.ncclCommInitAll(self.c, n, None) == 0, lib.ncclGetLastError(None)
        self.premul = {}

    def op(self, f, opname, scalar_code):
        if opname != "premulsum":
            return [OPNUM[opname]] * self.n
        key = (f.dt, int(scalar_code))
        if key not in self.premul:
            sc = np.array([scalar_code], f.u)
            hs = []
            for r in range(self.n):
                h = ctypes.c_int()
                rc = self.lib.ncclRedOpCreatePreMulSum(ctypes.byref(h), sc.ctypes.data, f.dt,
                                                       lw.SCALAR_HOST_IMMEDIATE, self.c[r])
                assert rc == 0, self.lib.ncclGetLastError(None)
                hs.append(h.value)
            self.premul[key] = hs
        return self.premul[key]

    def group(self, call):
        lib = self.lib
        assert lib.ncclGroupStart() == 0
        for r in range(self.n):
            rc = call(r)
            assert rc == 0, (rc, lib.ncclGetLastError(None))
        assert lib.ncclGroupEnd() == 0, lib.ncclGetLastError(None)

    def allreduce(self, f, ins, opname, scalar_code=0, offset=0, in_place=False, bias=None):
        """Rank 0's result (every rank's must be the same), and what lies
        around it (16 bytes either side)."""
        esz = np.dtype(f.u).itemsize
        count = ins[0].size
        ops = self.op(f, opname, scalar_code)
        srcs, dsts = [], []
        for r in range(self.n):
            s = lw.at_offset(count * esz + 32, offset)
            s[:] = 0x5A
            s[16:16 + count * esz] = ins[r].view(np.uint8)
            srcs.append(s)
            d = s if in_place else lw.at_offset(count * esz + 32, (offset + 1) % 4)
            if not in_place:
                d[:] = 0xA5
            dsts.append(d)
        lib = self.lib
        if bias is not None:
            b = lw.at_offset(count * esz, 3)
            b[:] = bias.view(np.uint8)
            self.group(lambda r: lib.ncclAllReduceWithBias(
                srcs[r].ctypes.data + 16, dsts[r].ctypes.data + 16, count, f.dt, ops[r],
                self.c[r], None, b.ctypes.data))
        else:
            self.group(lambda r: lib.ncclAllReduce(
                srcs[r].ctypes.data + 16, dsts[r].ctypes.data + 16, count, f.dt, ops[r],
                self.c[r], None))
        for d in dsts[1:]:
            assert np.array_equal(d, dsts[0]), "ranks differ"
        return dsts[0].copy()

    def close(self):
        for hs in self.premul.values():
            for r, h in enumerate(hs):
                assert self.lib.ncclRedOpDestroy(h, self.c[r]) == 0
        for r in range(self.n):
            self.lib.ncclCommDestroy(self.c[r])


def scalars(f: lw.Fmt) -> list[int]:
    vals = [0.75, -1.5, 3.0, 0.0] if f.bits == 8 else [-1.3, 0.1, 1000.0]
    codes = [int(np.array([v], np.float32).astype(f.np).view(f.u)[0]) for v in vals]
    return codes + [1]  # the smallest subnormal


def partners(f: lw.Fmt, rng) -> np.ndarray:
    """Codes each 16-bit code meets: zeros, ones, the extremes, subnormals,
    infinities and NaNs where the type has them, and random codes."""
    vals = np.array([0.0, -0.0, 1.0, -1.0, 0.5, 3.0, 65504.0, -65504.0, np.inf, -np.inf,
                     np.nan, 1e-7, -3e-8, 2.0 ** -24, 1e30, -1e-30], np.float32)
    with np.errstate(all="ignore"):
        fixed = vals.astype(f.np).view(f.u)
    return np.concatenate([fixed, rng.integers(0, 1 << f.bits, 16, dtype=np.uint32).astype(f.u)])


def main() -> int:
    lib = lw.load(sys.argv[1])
    out: dict[str, np.ndarray] = {}
    rng = np.random.default_rng(2031)
    # conversions
    for f in lw.FMTS:
        codes = f.codes()
        dst = np.zeros(codes.size, np.float32)
        assert lib.nccl4pyHostConvert(f.dt, 1, codes.ctypes.data, dst.ctypes.data, codes.size) == 0
        out[f"{f.name} decode"] = dst.view(np.uint32)
        hi = np.arange(1 << 16, dtype=np.uint32) << 16
        vals = np.concatenate([lw.encode_inputs(f, rng).view(np.uint32),
                               hi | rng.integers(0, 1 << 16, hi.size, dtype=np.uint32),
                               hi, hi | 0x8000, hi | 0x7FFF, hi | 0x8001]).view(np.float32)
        if f.bits == 16 and f.E == 5:  # the half's own grid, 13 low bits
            h = codes.view(np.float16).astype(np.float32).view(np.uint32)
            vals = np.concatenate([vals.view(np.uint32), h | 0x1000, h | 0x0FFF, h | 0x1001,
                                   h ^ 0x1000]).view(np.float32)
        esz = np.dtype(f.u).itemsize
        enc = np.zeros(vals.size * esz, np.uint8)
        assert lib.nccl4pyHostConvert(f.dt, 0, vals.ctypes.data, enc.ctypes.data, vals.size) == 0
        out[f"{f.name} encode"] = enc
    # two ranks: every fp8 pair, every 16-bit code against partners
    c2 = Comms(lib, 2)
    for f in lw.FMTS:
        codes = f.codes()
        if f.bits == 8:
            a, b = np.repeat(codes, 256), np.tile(codes, 256)
        else:
            p = partners(f, rng)
            a = np.tile(codes, p.size)
            b = np.repeat(p, codes.size)
            a, b = np.concatenate([a, b]), np.concatenate([b, a])  # both orders
        out[f"{f.name} pairs inputs"] = np.stack([a, b])
        for opname in ("sum", "prod", "max", "min", "avg"):
            out[f"{f.name} pairs {opname}"] = c2.allreduce(f, [a, b], opname)
        for sc in scalars(f):
            out[f"{f.name} pairs premulsum {sc:#x}"] = c2.allreduce(f, [a, b], "premulsum", sc)
        out[f"{f.name} pairs bias"] = c2.allreduce(f, [a, b], "sum", bias=b)
    # three, four and eight ranks: random codes
    comms = {2: c2, 3: Comms(lib, 3), 4: Comms(lib, 4)}
    c8 = Comms(lib, 8)
    for n, cm in ((3, comms[3]), (4, comms[4]), (8, c8)):
        size = 1 << 16 if n < 8 else 1 << 13
        for f in lw.FMTS:
            ins = [rng.integers(0, 1 << f.bits, size, dtype=np.uint32).astype(f.u)
                   for _ in range(n)]
            fin = [lw.random_codes(f, rng, size, True) for _ in range(n)]
            for opname in ("sum", "prod", "max", "min", "avg", "premulsum"):
                sc = scalars(f)[0]
                out[f"{f.name} n={n} {opname}"] = cm.allreduce(f, ins, opname, sc)
                out[f"{f.name} n={n} {opname} finite"] = cm.allreduce(f, fin, opname, sc)
    c8.close()
    # every short count, offsets, in place
    for n, cm in comms.items():
        for f in lw.FMTS:
            for count in range(0, 131):
                ins = [rng.integers(0, 1 << f.bits, count, dtype=np.uint32).astype(f.u)
                       for _ in range(n)]
                for opname in ("sum", "prod", "max", "min", "avg", "premulsum"):
                    for off, inplace in ((0, False), (1, True), (3, False)):
                        key = f"{f.name} n={n} count={count} {opname} off={off} {inplace}"
                        out[key] = cm.allreduce(f, ins, opname, scalars(f)[1], off, inplace)
    for cm in comms.values():
        cm.close()
    np.savez(sys.argv[2], **out)
    print(len(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
