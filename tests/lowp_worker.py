"""The host backend's 16- and 8-bit floats, checked in one process: run by
tests/test_host_lowp.py once per set of kernels (NCCL4PY_HOST_KERNELS).

    python tests/lowp_worker.py LIBRARY convert
    python tests/lowp_worker.py LIBRARY reduce NRANKS

``convert``: every code of float16, bfloat16, float8_e4m3fn and float8_e5m2
widened to float32, and float32 values rounded back: every code's value, the
midpoints between neighbouring codes and the floats next to them, the
overflow boundaries, infinities, NaNs with several payloads, float32
subnormals and random bit patterns, with both signs, at several alignments,
through nccl4pyHostConvert (the conversions the reductions use).  NumPy and
ml_dtypes give the reference; NaNs follow the backend's documented rule
(decoding keeps sign and payload and sets the quiet bit, except bfloat16,
whose code is the high half of the float as it is; encoding keeps the sign,
the payload is the canonical quiet NaN).

``reduce``: NRANKS communicators of one process (ncclCommInitAll) run
all-reduce (in and out of place), reduce, reduce-scatter (in and out of
place) and all-reduce-with-bias, with every op including PreMulSum and
average, on random codes (NaN, infinities and subnormals among them) and on
random finite values, at unaligned addresses and several counts.  Each
result must be, bit for bit, the float32 reduction in rank order rounded
once (NaNs: any NaN with the canonical payload), and, wherever every float32
step of that reduction was exact, the float64 reduction rounded once; for two
ranks' sum, max and min that must hold for every element.

Prints one JSON line: {"cases": n, "failures": [...]}.
"""
from __future__ import annotations

import ctypes
import json
import sys

import ml_dtypes
import numpy as np

SUM, PROD, MAX, MIN, AVG = range(5)
OPS = {"sum": SUM, "prod": PROD, "max": MAX, "min": MIN, "avg": AVG, "premulsum": None}
SCALAR_HOST_IMMEDIATE = 1


class Fmt:
    def __init__(self, name, dt, nptype, E, M, fn, nan_code):
        self.name, self.dt, self.np, self.E, self.M, self.fn = name, dt, nptype, E, M, fn
        self.u = np.uint16 if np.dtype(nptype).itemsize == 2 else np.uint8
        self.bits = 8 * np.dtype(self.u).itemsize
        self.nan_code = nan_code  # canonical NaN, without the sign

    def codes(self) -> np.ndarray:
        return np.arange(1 << self.bits, dtype=np.uint32).astype(self.u)

    def is_nan_code(self, c: np.ndarray) -> np.ndarray:
        return np.isnan(c.view(self.np).astype(np.float32))

    def decode_rule(self, c: np.ndarray) -> np.ndarray:
        """float32 bits of codes c: ml_dtypes for numbers, the rule for NaNs."""
        c = c.astype(np.uint32)
        got = c.astype(self.u).view(self.np).astype(np.float32).view(np.uint32)
        sign = (c >> (self.E + self.M)) << 31
        if self.fn:
            nan = sign | 0x7FC00000
        elif self.E == 8:  # bfloat16: the high half of the float, as it is
            nan = c << 16
        else:
            man = c & ((1 << self.M) - 1)
            nan = sign | 0x7F800000 | (man << (23 - self.M)) | 0x00400000
        return np.where(self.is_nan_code(c.astype(self.u)), nan, got).astype(np.uint32)

    def encode_ref(self, f: np.ndarray) -> np.ndarray:
        """Codes of float32 (or float64) values f, rounded once; NaN: sign + canonical."""
        with np.errstate(all="ignore"):
            got = f.astype(self.np).view(self.u)
        sign = (np.signbit(f).astype(np.uint32) << (self.bits - 1)).astype(self.u)
        nan = sign | self.u(self.nan_code)
        return np.where(self.is_nan_code(got), nan, got).astype(self.u)


FMTS = [
    Fmt("float16", 6, np.float16, 5, 10, False, 0x7E00),
    Fmt("bfloat16", 9, ml_dtypes.bfloat16, 8, 7, False, 0x7FC0),
    Fmt("float8_e4m3fn", 10, ml_dtypes.float8_e4m3fn, 4, 3, True, 0x7F),
    Fmt("float8_e5m2", 11, ml_dtypes.float8_e5m2, 5, 2, False, 0x7E),
]


class Checks:
    def __init__(self):
        self.cases = 0
        self.failures: list[str] = []

    def equal(self, what: str, got: np.ndarray, want: np.ndarray, show=None) -> None:
        self.cases += 1
        bad = np.flatnonzero(got != want)
        if bad.size:
            i = int(bad[0])
            extra = f" ({show(i)})" if show else ""
            self.failures.append(f"{what}: {bad.size} of {got.size} differ, first at {i}: "
                                 f"got {int(got[i]):#x}, want {int(want[i]):#x}{extra}")


def load(path: str) -> ctypes.CDLL:
    lib = ctypes.CDLL(path)
    P, I, S = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
    lib.nccl4pyHostConvert.argtypes = [I, I, P, P, S]
    lib.ncclGetLastError.restype = ctypes.c_char_p
    lib.ncclGetLastError.argtypes = [P]
    lib.ncclAllReduce.argtypes = [P, P, S, I, I, P, P]
    lib.ncclReduce.argtypes = [P, P, S, I, I, I, P, P]
    lib.ncclReduceScatter.argtypes = [P, P, S, I, I, P, P]
    lib.ncclAllReduceWithBias.argtypes = [P, P, S, I, I, P, P, P]
    lib.ncclRedOpCreatePreMulSum.argtypes = [P, P, I, I, P]
    lib.ncclRedOpDestroy.argtypes = [I, P]
    lib.ncclCommDestroy.argtypes = [P]
    return lib


def at_offset(nbytes: int, offset: int) -> np.ndarray:
    """A uint8 array of nbytes whose data starts `offset` bytes past 64-byte alignment."""
    raw = np.zeros(nbytes + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset
    return raw[start:start + nbytes]


# ------------------------------------------------------------ conversions

def encode_inputs(f: Fmt, rng) -> np.ndarray:
    """float32 values around every rounding decision of format f."""
    vals = f.codes().view(f.np).astype(np.float64)
    mags = np.unique(np.abs(vals[np.isfinite(vals)]))
    mids = (mags[1:] + mags[:-1]) / 2  # ties (exact in float32)
    top = mags[-1]
    ulp_top = mags[-1] - mags[-2]
    edges = [top + ulp_top / 2, top + ulp_top, 2 * top, 1e30, 3.4e38, mags[1] / 2, mags[1] / 4]
    with np.errstate(over="ignore"):
        base = np.concatenate([mags, mids, edges]).astype(np.float32)
    near = np.concatenate([base, np.nextafter(base, np.float32(np.inf)),
                           np.nextafter(base, np.float32(0))])
    special = np.array([0x00000000, 0x00000001, 0x007FFFFF, 0x00800000, 0x00400000,
                        0x7F800000, 0x7F800001, 0x7FA00000, 0x7FBFFFFF, 0x7FC00000,
                        0x7FC00001, 0x7FFFFFFF, 0x7F7FFFFF, 0x3F800000], np.uint32).view(np.float32)
    subnormals = rng.integers(1, 1 << 23, 4096, dtype=np.uint32).view(np.float32)
    randoms = rng.integers(0, 1 << 32, 1 << 20, dtype=np.uint64).astype(np.uint32).view(np.float32)
    allv = np.concatenate([near, special, subnormals, randoms])
    return np.concatenate([allv, -allv]).astype(np.float32)


def check_conversions(lib, out: Checks) -> None:
    rng = np.random.default_rng(31)
    for f in FMTS:
        esz = np.dtype(f.u).itemsize
        codes = f.codes()
        want = f.decode_rule(codes)
        # ml_dtypes and the rule agree on which codes are NaN, and on numbers
        out.equal(f"{f.name} NaN codes", np.isnan(want.view(np.float32)).astype(np.uint8),
                  f.is_nan_code(codes).astype(np.uint8))
        for off in (0, 1, 3, 5 * esz, 13):
            src = at_offset(codes.nbytes, off)
            src[:] = codes.view(np.uint8)
            for skip in (0, 1, 7):  # the first element at every lane of a step
                n = codes.size - skip
                dst = np.zeros(n + 8, np.float32)
                rc = lib.nccl4pyHostConvert(f.dt, 1, src.ctypes.data + skip * esz,
                                            dst.ctypes.data, n)
                out.equal(f"{f.name} decode rc", np.array([rc]), np.array([0]))
                out.equal(f"{f.name} decode (byte offset {off}, from code {skip})",
                          dst[:n].view(np.uint32), want[skip:],
                          show=lambda i, s=skip: f"code {i + s:#x}")
                out.equal(f"{f.name} decode wrote past the end", dst[n:].view(np.uint32),
                          np.zeros(8, np.uint32))
        vals = encode_inputs(f, rng)
        want_e = f.encode_ref(vals)
        for off in (0, 1, 7):
            for skip in (0, 3):
                n = vals.size - skip
                dst = at_offset((n + 16) * esz, off)
                dst[:] = 0xA5
                rc = lib.nccl4pyHostConvert(f.dt, 0, vals[skip:].ctypes.data, dst.ctypes.data, n)
                out.equal(f"{f.name} encode rc", np.array([rc]), np.array([0]))
                got = dst[:n * esz].view(f.u)
                out.equal(f"{f.name} encode (byte offset {off}, from value {skip})", got,
                          want_e[skip:],
                          show=lambda i, s=skip: f"float bits {int(vals[i + s].view(np.uint32)):#010x}")
                out.equal(f"{f.name} encode wrote past the end", dst[n * esz:],
                          np.full(16 * esz, 0xA5, np.uint8))
    # only the four types convert; nothing else is touched
    scratch = np.full(4, 7, np.uint32)
    for dt in (0, 7, 8, 12, -1):
        rc = lib.nccl4pyHostConvert(dt, 1, scratch.ctypes.data, scratch.ctypes.data, 1)
        out.equal(f"type {dt} refused", np.array([rc, *scratch]), np.array([-1, 7, 7, 7, 7]))


# ------------------------------------------------------------- reductions

def reference(f: Fmt, ins: list[np.ndarray], op: str, scalar: np.ndarray, wide):
    """Rank-order reduction of the codes `ins` in `wide` (float32 or float64),
    rounded once; and whether every step was exact (float32 only)."""
    xs = [c.view(f.np).astype(wide) for c in ins]
    s = wide(scalar.view(f.np).astype(np.float64)[0])
    with np.errstate(all="ignore"):
        if op == "premulsum":
            xs = [s * x for x in xs]
        acc = xs[0].copy()
        exact = np.ones(acc.shape, bool)
        for x in xs[1:]:
            if op in ("sum", "avg", "premulsum"):
                acc, e = acc + x, acc.astype(np.float64) + x.astype(np.float64)
            elif op == "prod":
                acc, e = acc * x, acc.astype(np.float64) * x.astype(np.float64)
            elif op == "max":  # the later operand on ties; a NaN wins, the earlier first
                acc = np.where(np.isnan(acc), acc, np.where(np.isnan(x) | (x >= acc), x, acc))
                e = acc.astype(np.float64)
            else:
                acc = np.where(np.isnan(acc), acc, np.where(np.isnan(x) | (x <= acc), x, acc))
                e = acc.astype(np.float64)
            exact &= acc.astype(np.float64) == e
        if op == "avg":
            exact &= (acc / wide(len(ins))).astype(np.float64) == acc.astype(np.float64) / len(ins)
            acc = acc / wide(len(ins))
        if op == "premulsum":
            exact &= np.all([(s * c.view(f.np).astype(wide)).astype(np.float64)
                             == float(s) * c.view(f.np).astype(np.float64) for c in ins], axis=0)
    return f.encode_ref(acc), exact


def random_codes(f: Fmt, rng, n: int, finite: bool) -> np.ndarray:
    if not finite:
        return rng.integers(0, 1 << f.bits, n, dtype=np.uint32).astype(f.u)
    # finite values of moderate size (sums and products stay in range)
    v = rng.standard_normal(n) * 2.0 ** rng.integers(-6, 5, n)
    return v.astype(f.np).view(f.u)


def check_reductions(lib, nranks: int, out: Checks) -> None:
    comms = (ctypes.c_void_p * nranks)()
    rc = lib.ncclCommInitAll(comms, nranks, None)
    assert rc == 0, lib.ncclGetLastError(None)
    rng = np.random.default_rng(1000 + nranks)

    def group(call):
        """call(r) for every rank r, in one group (each communicator on its thread)"""
        assert lib.ncclGroupStart() == 0
        for r in range(nranks):
            rc = call(r)
            assert rc == 0, (rc, lib.ncclGetLastError(None))
        rc = lib.ncclGroupEnd()
        assert rc == 0, (rc, lib.ncclGetLastError(None))

    for f in FMTS:
        esz = np.dtype(f.u).itemsize
        scalar = np.array([0.75 if f.bits == 8 else -1.3], np.float32).astype(f.np).view(f.u)
        for opname, opv in OPS.items():
            ops = [opv] * nranks
            if opv is None:
                handles = []
                for r in range(nranks):
                    h = ctypes.c_int()
                    rc = lib.ncclRedOpCreatePreMulSum(ctypes.byref(h), scalar.ctypes.data, f.dt,
                                                      SCALAR_HOST_IMMEDIATE, comms[r])
                    assert rc == 0, lib.ncclGetLastError(None)
                    handles.append(h.value)
                ops = handles
            counts = [1, 7, 9, 1023, 4097]
            if opname in ("sum", "premulsum"):
                counts.append(300007)
            for count, finite in [(c, fin) for c in counts for fin in (False, True)]:
                kind = "finite" if finite else "any codes"
                tag = f"{f.name} {opname} n={nranks} count={count} {kind}"
                # all-reduce, reduce (root: the last rank), all-reduce with bias
                ins = [random_codes(f, rng, count, finite) for _ in range(nranks)]
                want, exact = reference(f, ins, opname, scalar, np.float32)
                want64, _ = reference(f, ins, opname, scalar, np.float64)
                bias = random_codes(f, rng, count, True)
                bufs = []
                for r in range(nranks):
                    s = at_offset(count * esz, r % 2)  # odd addresses for 16-bit types
                    s[:] = ins[r].view(np.uint8)
                    bufs.append((s, at_offset(count * esz, 1), s.copy()))

                def results(name, how):
                    for s, d, orig in bufs:
                        s[:] = orig
                        d[:] = 0
                    group(how)
                    return [(d if name != "in place" else s)[:count * esz].view(f.u)
                            for s, d, _ in bufs]

                def same(name, got, ref, exact_mask=None):
                    nan = f.is_nan_code(ref)
                    g = np.where(nan, got & ~f.u(1 << (f.bits - 1)), got)
                    r_ = np.where(nan, f.u(f.nan_code), ref)
                    if exact_mask is not None:
                        g, r_ = g[exact_mask], r_[exact_mask]
                    out.equal(name, g, r_, show=lambda i: f"inputs {[int(c[i]) for c in ins]}")

                for name, how, ranks in [
                    ("out of place", lambda r: lib.ncclAllReduce(
                        bufs[r][0].ctypes.data, bufs[r][1].ctypes.data, count, f.dt, ops[r],
                        comms[r], None), range(nranks)),
                    ("in place", lambda r: lib.ncclAllReduce(
                        bufs[r][0].ctypes.data, bufs[r][0].ctypes.data, count, f.dt, ops[r],
                        comms[r], None), range(nranks)),
                    ("reduce", lambda r: lib.ncclReduce(
                        bufs[r][0].ctypes.data, bufs[r][1].ctypes.data, count, f.dt, ops[r],
                        nranks - 1, comms[r], None), [nranks - 1]),
                ]:
                    got = results(name, how)
                    for r in ranks:
                        same(f"{tag} all-reduce {name} rank {r}" if name != "reduce"
                             else f"{tag} reduce root", got[r], want)
                    if name == "out of place":
                        fine = ~np.isnan(want.view(f.np).astype(np.float32))
                        if nranks == 2 and opname in ("sum", "max", "min"):
                            same(f"{tag} all-reduce = float64 rounded once", got[0], want64, fine)
                        same(f"{tag} all-reduce = float64 rounded once where float32 is exact",
                             got[0], want64, exact & fine)
                if opname == "sum":
                    bias_buf = at_offset(count * esz, 1)
                    bias_buf[:] = bias.view(np.uint8)
                    got = results("bias", lambda r: lib.ncclAllReduceWithBias(
                        bufs[r][0].ctypes.data, bufs[r][1].ctypes.data, count, f.dt, ops[r],
                        comms[r], None, bias_buf.ctypes.data))
                    want_b, _ = reference(f, [want, bias], "sum", scalar, np.float32)
                    for r in range(nranks):
                        same(f"{tag} all-reduce-with-bias rank {r}", got[r], want_b)
                # reduce-scatter: rank r gets block r of the reduction
                rins = [random_codes(f, rng, count * nranks, finite) for _ in range(nranks)]
                rwant, _ = reference(f, rins, opname, scalar, np.float32)
                for place in ("out of place", "in place"):
                    srcs = [at_offset(count * nranks * esz, 1) for _ in range(nranks)]
                    dsts = [at_offset(count * esz, 0) for _ in range(nranks)]
                    for r in range(nranks):
                        srcs[r][:] = rins[r].view(np.uint8)
                    if place == "in place":
                        dsts = [s[r * count * esz:(r + 1) * count * esz] for r, s in enumerate(srcs)]
                    group(lambda r: lib.ncclReduceScatter(
                        srcs[r].ctypes.data, dsts[r].ctypes.data, count, f.dt, ops[r], comms[r],
                        None))
                    for r in range(nranks):
                        same(f"{tag} reduce-scatter {place} rank {r}", dsts[r].view(f.u),
                             rwant[r * count:(r + 1) * count])
            if opv is None:
                for r in range(nranks):
                    assert lib.ncclRedOpDestroy(ops[r], comms[r]) == 0
    for r in range(nranks):
        lib.ncclCommDestroy(comms[r])


def main() -> int:
    lib = load(sys.argv[1])
    out = Checks()
    if sys.argv[2] == "convert":
        check_conversions(lib, out)
    else:
        check_reductions(lib, int(sys.argv[3]), out)
    print(json.dumps({"cases": out.cases, "failures": out.failures[:30],
                      "nfailures": len(out.failures)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
