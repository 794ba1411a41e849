"""The host backend's 16- and 8-bit floats on each set of kernels.

The backend reduces float16, bfloat16 and the two fp8 formats with AVX-512
kernels (F/BW/VL/DQ/VBMI, FP16, BF16), AVX2/F16C ones or portable ones, the best
the CPU has unless NCCL4PY_HOST_KERNELS names a lower one.  Every check here
runs on every set (a set the CPU lacks is skipped): the exhaustive
conversions and the reductions of tests/lowp_worker.py, the arithmetic of
host/test_dtypes.py; tests/lowp_sets_worker.py's results of every set are
compared bit for bit with the portable kernels'; the collective suites of
tests/host_worker.py run on the portable kernels.
"""
from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import HOST_WORKER, ROOT, clean_env, host_available

pytestmark = pytest.mark.skipif(not host_available(), reason="host backend not built")

WORKER = Path(__file__).resolve().parent / "lowp_worker.py"
SETS_WORKER = Path(__file__).resolve().parent / "lowp_sets_worker.py"
SETS = ["avx512", "avx2", "portable"]  # best first
KERNELS = ["auto", *SETS]
NEEDS = {  # /proc/cpuinfo flags
    "avx512": {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512vbmi", "avx512_fp16",
               "avx512_bf16", "avx2", "f16c"},
    "avx2": {"avx2", "f16c"},
    "portable": set(),
}


def cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    line = next((l for l in text.splitlines() if l.startswith("flags")), "")
    return set(line.split())


def cpu_has(kernel_set: str) -> bool:
    if kernel_set == "portable":
        return True
    machine = platform.machine()
    if kernel_set == "avx512" and machine not in ("x86_64", "AMD64"):
        return False
    if machine not in ("x86_64", "AMD64", "i686"):
        return False
    return NEEDS[kernel_set] <= cpu_flags()


def expected(kernels: str) -> str:
    """The kernels NCCL_DEBUG=INFO should name: the first set from the one
    asked for on (auto: from the best) that the CPU has."""
    k = kernels.strip().lower()
    start = SETS.index(k) if k in SETS else 0
    return next(s for s in SETS[start:] if cpu_has(s))


def skip_unless_cpu_has(kernels: str) -> None:
    if kernels in SETS and not cpu_has(kernels):
        pytest.skip(f"this CPU lacks the {kernels} kernels' instructions")


def library() -> str:
    from nccl import _discovery

    return _discovery.host_backend_path()


def run_worker(kernels: str, *args: str, timeout: float = 900) -> tuple[dict, str]:
    env = clean_env(NCCL4PY_HOST_KERNELS=kernels, NCCL_DEBUG="INFO")
    p = subprocess.run([sys.executable, str(WORKER), library(), *args], env=env,
                       capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    report = json.loads(p.stdout.strip().splitlines()[-1])
    return report, p.stderr


def assert_kernels(stderr: str, kernels: str) -> None:
    lines = [l for l in stderr.splitlines() if "16- and 8-bit float kernels" in l]
    assert len(lines) == 1, stderr[-3000:]
    assert f"kernels: {expected(kernels)} (NCCL4PY_HOST_KERNELS={kernels})" in lines[0], lines


@pytest.mark.parametrize("kernels", KERNELS)
def test_every_code_decodes_and_every_boundary_rounds_as_ml_dtypes(kernels):
    skip_unless_cpu_has(kernels)
    report, err = run_worker(kernels, "convert")
    assert_kernels(err, kernels)
    assert report["cases"] > 200
    assert report["failures"] == [], report


@pytest.mark.parametrize("nranks", [2, 3, 4])
@pytest.mark.parametrize("kernels", KERNELS)
def test_reductions_are_float32_in_rank_order_rounded_once(kernels, nranks):
    skip_unless_cpu_has(kernels)
    report, err = run_worker(kernels, "reduce", str(nranks))
    assert_kernels(err, kernels)
    assert report["cases"] > 2000
    assert report["failures"] == [], report


@pytest.mark.parametrize("kernels", KERNELS)
def test_every_pair_of_fp8_codes_and_every_16_bit_code(kernels):
    """host/test_dtypes.py: all-reduce of every fp8 pair and of every fp16 /
    bfloat16 code against random partners, every op, against ml_dtypes."""
    skip_unless_cpu_has(kernels)
    p = subprocess.run([sys.executable, str(ROOT / "host" / "test_dtypes.py"), library()],
                       env=clean_env(NCCL4PY_HOST_KERNELS=kernels, NCCL_DEBUG="INFO"),
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
    assert p.stdout.strip().endswith("OK")
    assert_kernels(p.stderr, kernels)


def test_collective_suites_on_the_portable_kernels():
    """The suites the default kernels run in test_host_collectives.py, on 3
    ranks of separate processes, with the portable kernels."""
    env = clean_env(NCCL4PY_BACKEND="host", NCCL4PY_HOST_KERNELS="portable",
                    NCCL4PY_HOST_TIMEOUT="120", NCCL_DEBUG="INFO")
    p = subprocess.run([sys.executable, "-m", "nccl.run", "-n", "3", str(HOST_WORKER),
                        "allreduce", "reduce", "reduce_scatter", "big", "premulsum_device",
                        "rccl"], env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    reports = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    assert sorted(r["rank"] for r in reports) == [0, 1, 2]
    assert all(r["cases"] > 100 for r in reports), reports
    assert [f for r in reports for f in r["failures"]] == []
    infos = [l for l in p.stderr.splitlines() if "16- and 8-bit float kernels" in l]
    assert len(infos) == 3 and all("kernels: portable" in l for l in infos), p.stderr[-3000:]


PROBE = r"""
import ctypes, sys
import numpy as np
lib = ctypes.CDLL(sys.argv[1])
lib.nccl4pyHostConvert.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                                   ctypes.c_void_p, ctypes.c_size_t]
codes = np.array([0x3c00, 0x7bff, 0x0001], np.uint16)
out = np.zeros(3, np.float32)
assert lib.nccl4pyHostConvert(6, 1, codes.ctypes.data, out.ctypes.data, 3) == 0
print(out.tolist())
"""


@pytest.mark.parametrize("value,kernels", [("PORTABLE", "portable"), (" Auto ", "auto"),
                                           ("", "auto"), ("AVX2 ", "avx2"), ("avx512", "avx512"),
                                           ("avx9", None), ("portable2", None), ("avx", None)])
def test_the_kernels_variable_is_checked_where_it_is_read(value, kernels):
    """auto, avx512, avx2 or portable in any case, spaces around allowed;
    empty is auto; a set names the best that may be taken; anything else
    is reported once on stderr and read as auto (the results are the
    same)."""
    p = subprocess.run([sys.executable, "-c", PROBE, library()],
                       env=clean_env(NCCL4PY_HOST_KERNELS=value, NCCL_DEBUG="INFO"),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == str([1.0, 65504.0, 2.0 ** -24])
    warnings = [l for l in p.stderr.splitlines() if "is not auto" in l]
    if kernels is None:
        assert warnings == [f"nccl4py host: NCCL4PY_HOST_KERNELS={value} is not auto, avx512, "
                            "avx2 or portable; using auto"], p.stderr
        assert f"kernels: {expected('auto')} (NCCL4PY_HOST_KERNELS={value})" in p.stderr
    else:
        assert warnings == []
        assert f"kernels: {expected(kernels)} (NCCL4PY_HOST_KERNELS={value or 'auto'})" \
            in p.stderr, p.stderr


def dump(kernels: str, out: Path) -> dict:
    p = subprocess.run([sys.executable, str(SETS_WORKER), library(), str(out)],
                       env=clean_env(NCCL4PY_HOST_KERNELS=kernels, NCCL_DEBUG="INFO"),
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert_kernels(p.stderr, kernels)
    with np.load(out) as z:
        return {k: z[k] for k in z.files}


@pytest.mark.parametrize("kernels", [s for s in SETS if s != "portable"])
def test_every_set_gives_the_portable_kernels_bits(kernels, tmp_path):
    skip_unless_cpu_has(kernels)
    if str(WORKER.parent) not in sys.path:
        sys.path.insert(0, str(WORKER.parent))
    import lowp_worker as lw

    want = dump("portable", tmp_path / "portable.npz")
    got = dump(kernels, tmp_path / f"{kernels}.npz")
    assert sorted(got) == sorted(want) and len(want) > 10000
    fmts = {f.name: f for f in lw.FMTS}
    bad = []
    for key, w in want.items():
        g = got[key]
        f = fmts[key.split(" ")[0]]
        if g.shape != w.shape:
            bad.append(f"{key}: shape {g.shape} != {w.shape}")
            continue
        if np.array_equal(g, w):
            continue
        if " decode" in key or " encode" in key or "inputs" in key:
            bad.append(f"{key}: {np.count_nonzero(g != w)} elements differ")
            continue
        # results: codes between 16 bytes of guard either side, the guards exact
        if not (np.array_equal(g[:16], w[:16]) and np.array_equal(g[-16:], w[-16:])):
            bad.append(f"{key}: wrote outside the result")
            continue
        gc, wc = g[16:-16].view(f.u), w[16:-16].view(f.u)
        differ = gc != wc
        nan_only = differ & f.is_nan_code(gc) & f.is_nan_code(wc) & \
            ((gc ^ wc) == f.u(1 << (f.bits - 1)))
        if " pairs " in key:  # a sign may differ only where both inputs are NaN
            a, b = want[f"{f.name} pairs inputs"]
            nan_only &= f.is_nan_code(a) & f.is_nan_code(b)
        if np.any(differ & ~nan_only):
            i = int(np.flatnonzero(differ & ~nan_only)[0])
            bad.append(f"{key}: {np.count_nonzero(differ & ~nan_only)} codes differ, first at {i}:"
                       f" got {int(gc[i]):#x}, want {int(wc[i]):#x}")
    assert bad == [], bad[:30]
