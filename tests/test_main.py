"""``python -m nccl`` reports what it found, with and without a library."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import build_stub, clean_env


def run_main(env, *args):
    return subprocess.run([sys.executable, "-m", "nccl", *args], env=env, capture_output=True,
                          text=True, timeout=60)


def test_report_with_a_library(stub_dir):
    lib = build_stub("libnccl.so.2", omit=("ncclCommGrow",), outdir=stub_dir / "main")
    p = run_main(clean_env(NCCL_LIBRARY=str(lib)))
    assert p.returncode == 0, p.stderr
    assert "nccl4py " in p.stdout and "NCCL_LIBRARY is set" in p.stdout
    assert f"loaded: NCCL " in p.stdout and str(lib) in p.stdout
    assert "ncclCommGrow" in p.stdout.split("missing")[1]
    j = json.loads(run_main(clean_env(NCCL_LIBRARY=str(lib)), "--json").stdout)
    assert j["library"]["path"] == str(lib)
    assert j["missing"] == ["ncclCommGrow"]
    assert isinstance(j["library"]["version_code"], int)


def test_version_formatting():
    from nccl._diagnostics import decode_version

    assert decode_version(23004) == "2.30.4"
    assert decode_version(22809) == "2.28.9"
    assert decode_version(2708) == "2.7.8"


def test_report_without_a_library():
    env = clean_env(NCCL_LIBRARY="/nonexistent/libnccl.so.2")
    p = run_main(env)
    assert p.returncode == 0, p.stderr
    assert "no NCCL/RCCL library could be loaded" in p.stdout
    assert "/nonexistent/libnccl.so.2" in p.stdout and "No such file" in p.stdout
    j = json.loads(run_main(env, "--json").stdout)
    assert j["library"] is None and "Could not load" in j["error"]


@pytest.fixture(scope="module")
def stub_runtime(tmp_path_factory):
    import gpu_stub

    return gpu_stub.build_stub(tmp_path_factory.mktemp("gpu-stub"))


def test_no_driver_is_said_plainly(tmp_path, stub_runtime):
    """A GPU runtime installed on a machine without the driver (the runtime
    answers hipErrorInsufficientDriver / cudaErrorInsufficientDriver)."""
    nodev = tmp_path / "dev"
    nodev.mkdir()
    env = clean_env(NCCL4PY_GPU_RUNTIME=str(stub_runtime), GPU_STUB_COUNT_STATUS="35",
                    NCCL4PY_TEST_DEV_DIR=str(nodev))
    p = run_main(env)
    assert p.returncode == 0, p.stderr
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("GPU runtime:"))
    assert line.endswith("devices: 0"), line
    assert "  no AMD GPU driver on this machine (the runtime says: hipGetDeviceCount failed: " \
           "hipErrorInsufficientDriver (35)" in p.stdout
    assert "unknown" not in line
    j = json.loads(run_main(env, "--json").stdout)["gpu_runtime"]
    assert j["device_count"] == 0 and "device_count_error" not in j
    # with a GPU visible, the same status is a real problem: it stays an error
    (nodev / "nvidia0").touch()
    j = json.loads(run_main(env, "--json").stdout)["gpu_runtime"]
    assert j["device_count"] is None and "InsufficientDriver" in j["device_count_error"]
    assert "driver is missing or older" in j["note"]
