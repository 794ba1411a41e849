"""Reference data and results for the multi-rank tests, computed with NumPy
and ml_dtypes independently of the library under test."""
from __future__ import annotations

import ml_dtypes
import numpy as np

import nccl.bindings as b

D = b.DataType
NP = {
    D.Int8: np.int8, D.Uint8: np.uint8, D.Int32: np.int32, D.Uint32: np.uint32,
    D.Int64: np.int64, D.Uint64: np.uint64, D.Float16: np.float16, D.Float32: np.float32,
    D.Float64: np.float64, D.Bfloat16: ml_dtypes.bfloat16, D.Float8e4m3: ml_dtypes.float8_e4m3fn,
    D.Float8e5m2: ml_dtypes.float8_e5m2,
}
# the floating types, and those narrower than float32 (by the array types above)
FLOATS = {dt for dt, t in NP.items() if np.dtype(t).kind not in "iu"}
SMALL_FLOATS = {dt for dt in FLOATS if np.dtype(NP[dt]).itemsize < 4}
OPS = ["sum", "prod", "max", "min", "avg", "premulsum"]
COUNTS = [1, 7, 1023]
BIG = 2**20 + 3

def inputs(r: int, dt, count: int, salt: int = 0) -> np.ndarray:
    """Rank r's input: small values, exact in every type, products stay in range."""
    rng = np.random.default_rng(1000 * r + 7 * int(dt) + count + salt)
    if dt in (D.Uint8, D.Uint32, D.Uint64):
        v = rng.integers(0, 4, count)
    elif dt in FLOATS:
        v = rng.integers(-6, 7, count) / 2.0  # halves: exact down to fp8
    else:
        v = rng.integers(-3, 4, count)
    return v.astype(NP[dt])


def reduce_ref(arrs: list[np.ndarray], dt, op: str, scalar: float = 2.0) -> np.ndarray:
    """Rank-order reduction; floats in float (float64 for fp64) rounded once."""
    if dt in FLOATS:
        work = np.float64 if dt == D.Float64 else np.float32
        xs = [a.astype(work) for a in arrs]
    else:
        work = np.int64 if dt != D.Uint64 else np.uint64
        xs = [a.astype(work) for a in arrs]
    if op == "premulsum":
        xs = [x * work(scalar) for x in xs]
    acc = xs[0].copy()
    for x in xs[1:]:
        if op in ("sum", "avg", "premulsum"):
            acc = acc + x
        elif op == "prod":
            acc = acc * x
        elif op == "max":
            acc = np.maximum(acc, x)
        elif op == "min":
            acc = np.minimum(acc, x)
    if op == "avg":
        if dt in FLOATS:
            acc = acc / work(len(arrs))
        else:  # C integer division truncates toward zero
            s = acc.astype(np.int64)
            acc = np.sign(s) * (np.abs(s) // len(arrs))
    return acc.astype(NP[dt])


class Checker:
    """Counts cases and collects failures (reported by the worker as JSON)."""

    def __init__(self):
        self.cases = 0
        self.failures: list[str] = []

    def check(self, name: str, got: np.ndarray, exp: np.ndarray, dt) -> None:
        self.cases += 1
        if got.shape != exp.shape:
            self.failures.append(f"{name}: shape {got.shape} != {exp.shape}")
            return
        if dt in FLOATS:
            g, e = got.astype(np.float64), exp.astype(np.float64)
            # one ulp of the type at the value's magnitude (rank-order accumulation
            # in float may round differently from a pairwise order only there)
            finfo = ml_dtypes.finfo if dt in SMALL_FLOATS else np.finfo
            eps = float(finfo(NP[dt]).eps)
            ok = np.isclose(g, e, rtol=2 * eps, atol=0) | (g == e)
        else:
            ok = got == exp
        if not np.all(ok):
            i = int(np.argmin(ok))
            self.failures.append(f"{name}: first mismatch at {i}: got {got[i]!r}, expected "
                                 f"{exp[i]!r} ({int((~ok).sum())} of {ok.size} differ)")

    def received(self, name: str, dt, shape, exp: np.ndarray, call) -> None:
        """Check what ``call(recv)`` leaves in a zeroed receive buffer of ``shape``
        (flattened)."""
        recv = np.zeros(shape, NP[dt])
        call(recv)
        self.check(name, recv.reshape(-1), exp, dt)

    def assert_ok(self) -> None:
        """Fail with every mismatch found (at most 20 shown), or if nothing was checked."""
        assert self.cases > 0, "no check ran"
        assert not self.failures, (f"{len(self.failures)} of {self.cases} checks failed:\n"
                                   + "\n".join(self.failures[:20]))

    def expect_invalid(self, name: str, fn, fragment: str) -> None:
        """fn() must raise NcclInvalid whose message contains fragment."""
        from nccl._errors import NcclInvalid

        self.cases += 1
        try:
            fn()
        except NcclInvalid as e:
            if fragment not in str(e):
                self.failures.append(f"{name}: message {str(e)!r} lacks {fragment!r}")
            return
        except Exception as e:  # noqa: BLE001 - reported as a failure
            self.failures.append(f"{name}: raised {type(e).__name__}: {e}")
            return
        self.failures.append(f"{name}: no NcclInvalid")
