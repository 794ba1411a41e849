"""The host backend's own C test program (tests/test_host.c, built by
host/Makefile), run from pytest so that CI runs it (its exhaustive 8/16-bit
float check, host/test_dtypes.py, runs in test_host_lowp.py, on each set of
kernels)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT, clean_env, host_available, new_ids, shm_path
from hostproc import Rank, host_env, wait_for


@pytest.mark.heavy("make -C host test: the host backend's C test program")
@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_c_test_program(tmp_path):
    build = tmp_path / "build"
    p = subprocess.run(["make", "-s", "-C", str(ROOT / "host"), f"BUILD={build}", "test"],
                       env=clean_env(), capture_output=True, text=True, timeout=1200)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
    assert "OK (0 failures)" in p.stdout


WAITING_RANK = r"""
import sys, nccl.core as nc
nc.Communicator.init(2, 0, nc.UniqueId.from_bytes(bytes.fromhex(sys.argv[1])))
"""


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.skipif(not host_available(), reason="host backend not built")
def test_c_test_ignores_segments_of_other_jobs(tmp_path):
    """Another job's segments in /dev/shm (a live one, and a stray file with
    the same kind of name) are not the C test's leftovers."""
    build = tmp_path / "build"
    p = subprocess.run(["make", "-s", "-C", str(ROOT / "host"), f"BUILD={build}",
                        f"{build}/test_host"], env=clean_env(), capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr[-4000:]
    stray = Path("/dev/shm") / ("nccl4py-" + os.urandom(16).hex())
    stray.write_bytes(b"\0" * 8192)
    (uid,) = new_ids(1)
    other = Rank(WAITING_RANK, uid, env=host_env(NCCL4PY_HOST_TIMEOUT="300"))
    try:
        wait_for(lambda: os.path.exists(shm_path(uid)), 60, "the other job's segment")
        p = subprocess.run([str(build / "test_host"), "args", "missing_rank"], env=clean_env(),
                           capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
        assert "OK (0 failures)" in p.stdout
    finally:
        other.kill()
        stray.unlink()
        if os.path.exists(shm_path(uid)):
            os.unlink(shm_path(uid))
