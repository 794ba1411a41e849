"""The host backend's 16- and 8-bit floats on each set of kernels.

The backend reduces float16, bfloat16 and the two fp8 formats with AVX2/F16C
kernels where the CPU has them and portable ones elsewhere;
NCCL4PY_HOST_KERNELS=portable forces the portable ones.  Every check here
runs on both sets (on a CPU without AVX2 both are the portable one): the
exhaustive conversions and the reductions of tests/lowp_worker.py, the
arithmetic of host/test_dtypes.py, and the collective suites of
tests/host_worker.py.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import HOST_WORKER, ROOT, clean_env, host_available

pytestmark = pytest.mark.skipif(not host_available(), reason="host backend not built")

WORKER = Path(__file__).resolve().parent / "lowp_worker.py"
KERNELS = ["auto", "portable"]


def cpu_has_avx2_f16c() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    line = next((l for l in flags.splitlines() if l.startswith("flags")), "")
    return {"avx2", "f16c"} <= set(line.split())


def expected(kernels: str) -> str:
    """The kernels NCCL_DEBUG=INFO should name."""
    if kernels.lower() == "portable" or not cpu_has_avx2_f16c():
        return "portable"
    import platform

    return "avx2" if platform.machine() in ("x86_64", "AMD64", "i686") else "portable"


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
    report, err = run_worker(kernels, "convert")
    assert_kernels(err, kernels)
    assert report["cases"] > 200
    assert report["failures"] == [], report


@pytest.mark.parametrize("nranks", [2, 3, 4])
@pytest.mark.parametrize("kernels", KERNELS)
def test_reductions_are_float32_in_rank_order_rounded_once(kernels, nranks):
    report, err = run_worker(kernels, "reduce", str(nranks))
    assert_kernels(err, kernels)
    assert report["cases"] > 2000
    assert report["failures"] == [], report


@pytest.mark.parametrize("kernels", KERNELS)
def test_every_pair_of_fp8_codes_and_every_16_bit_code(kernels):
    """host/test_dtypes.py: all-reduce of every fp8 pair and of every fp16 /
    bfloat16 code against random partners, every op, against ml_dtypes."""
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
                                           ("", "auto"), ("avx9", None), ("portable2", None)])
def test_the_kernels_variable_is_checked_where_it_is_read(value, kernels):
    """auto or portable in any case, spaces around allowed; empty is auto;
    anything else is reported once on stderr and read as auto (the results
    are the same)."""
    p = subprocess.run([sys.executable, "-c", PROBE, library()],
                       env=clean_env(NCCL4PY_HOST_KERNELS=value, NCCL_DEBUG="INFO"),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == str([1.0, 65504.0, 2.0 ** -24])
    warnings = [l for l in p.stderr.splitlines() if "is not auto or portable" in l]
    if kernels is None:
        assert warnings == [f"nccl4py host: NCCL4PY_HOST_KERNELS={value} is not auto or "
                            "portable; using auto"], p.stderr
        kind = "auto" if expected("auto") == "avx2" else "portable"
        assert f"kernels: {expected(kind)} (NCCL4PY_HOST_KERNELS={value})" in p.stderr
    else:
        assert warnings == []
        assert f"kernels: {expected(kernels)} (NCCL4PY_HOST_KERNELS={value or 'auto'})" \
            in p.stderr, p.stderr
