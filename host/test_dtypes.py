#!/usr/bin/env python3
"""Check the host backend's 16- and 8-bit float arithmetic against ml_dtypes.

    python3 host/test_dtypes.py [path/to/libnccl4py_host.so]

Two ranks in one process (ncclCommInitAll) all-reduce every pair of fp8
codes, and every fp16 / bfloat16 code against random partners, with sum,
prod, max, min and avg; the results must equal what NumPy + ml_dtypes give
when the float32 result is cast back (round to nearest even).  NaN results
are compared by NaN-ness only.  Needs numpy and ml_dtypes.
"""
import ctypes
import os
import sys

import ml_dtypes
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "build", "libnccl4py_host.so")

SUM, PROD, MAX, MIN, AVG = range(5)
TYPES = {  # nccl dtype code, numpy dtype, unsigned view
    "float16": (6, np.float16, np.uint16),
    "bfloat16": (9, ml_dtypes.bfloat16, np.uint16),
    "float8_e4m3fn": (10, ml_dtypes.float8_e4m3fn, np.uint8),
    "float8_e5m2": (11, ml_dtypes.float8_e5m2, np.uint8),
}


def main():
    lib = ctypes.CDLL(LIB)
    lib.ncclGetLastError.restype = ctypes.c_char_p
    lib.ncclGetLastError.argtypes = [ctypes.c_void_p]
    lib.ncclAllReduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                  ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                                  ctypes.c_void_p]
    lib.ncclCommDestroy.argtypes = [ctypes.c_void_p]
    comms = (ctypes.c_void_p * 2)()
    assert lib.ncclCommInitAll(comms, 2, None) == 0, lib.ncclGetLastError(None)
    rng = np.random.default_rng(1234)
    failures = 0

    def allreduce(a, b, dt, op):
        out = [np.empty_like(a), np.empty_like(b)]
        assert lib.ncclGroupStart() == 0
        for r, x in enumerate((a, b)):
            rc = lib.ncclAllReduce(x.ctypes.data, out[r].ctypes.data, x.size, dt, op,
                                   comms[r], None)
            assert rc == 0, lib.ncclGetLastError(None)
        assert lib.ncclGroupEnd() == 0, lib.ncclGetLastError(None)
        assert np.array_equal(out[0].view(np.uint8), out[1].view(np.uint8)), "ranks differ"
        return out[0]

    for name, (dt, npt, ut) in TYPES.items():
        bits = np.dtype(ut).itemsize * 8
        if bits == 8:
            codes = np.arange(256, dtype=ut)
            a = np.repeat(codes, 256).view(npt)
            b = np.tile(codes, 256).view(npt)
        else:
            a = np.arange(65536, dtype=ut).view(npt)
            b = rng.integers(0, 65536, 65536, dtype=ut).view(npt)
        fa, fb = a.astype(np.float32), b.astype(np.float32)
        with np.errstate(all="ignore"):
            refs = {
                SUM: fa + fb,
                PROD: fa * fb,
                MAX: np.maximum(fa, fb),
                MIN: np.minimum(fa, fb),
                AVG: (fa + fb) / np.float32(2),
            }
            for op, ref in refs.items():
                want = ref.astype(npt)
                got = allreduce(a, b, dt, op)
                wn = np.isnan(want.astype(np.float32))
                gn = np.isnan(got.astype(np.float32))
                bad = (wn != gn) | (~wn & (want.view(ut) != got.view(ut)))
                if bad.any():
                    i = int(np.flatnonzero(bad)[0])
                    print(f"FAIL {name} op={op}: {int(bad.sum())} mismatches, e.g. "
                          f"{a[i]!r} op {b[i]!r} -> {got[i]!r} want {want[i]!r}")
                    failures += 1
                else:
                    print(f"ok   {name:14s} op={op} ({a.size} pairs)")
    for c in comms:
        lib.ncclCommDestroy(c)
    print("FAILED" if failures else "OK")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
