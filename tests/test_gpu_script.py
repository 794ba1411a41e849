"""The GPU check script's CPU-side dry run (the GPU run itself needs a GPU)."""
from __future__ import annotations

import subprocess

from conftest import ROOT, clean_env


def test_dry_run_checks_the_environment_and_prints_the_plan():
    p = subprocess.run(["bash", str(ROOT / "tests" / "gpu" / "run_checks.sh"), "--dry-run"],
                       env=clean_env(), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "environment:" in out and "plan:" in out and "dry run:" in out
    for module in ("torch", "cupy", "cuda.core", "mpi4py", "nvidia.nccl"):
        assert module in out
    assert "pytest -m gpu tests/gpu" in out and "gpu_call_overhead.py" in out


def test_bad_option_is_a_usage_error():
    p = subprocess.run(["bash", str(ROOT / "tests" / "gpu" / "run_checks.sh"), "--bogus"],
                       env=clean_env(), capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "usage" in p.stderr
