"""The host backend's own C test program and its exhaustive 8/16-bit float
check, run from pytest so that CI runs them."""
from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, clean_env
from test_host_collectives import host_available


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_c_test_program(tmp_path):
    build = tmp_path / "build"
    p = subprocess.run(["make", "-s", "-C", str(ROOT / "host"), f"BUILD={build}", "test"],
                       env=clean_env(), capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
    assert "OK (0 failures)" in p.stdout


@pytest.mark.skipif(not host_available(), reason="host backend not built")
def test_half_and_8bit_float_arithmetic_matches_ml_dtypes():
    from nccl import _discovery

    p = subprocess.run([sys.executable, str(ROOT / "host" / "test_dtypes.py"),
                        _discovery.host_backend_path()], env=clean_env(), capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
    assert p.stdout.strip().endswith("OK")
