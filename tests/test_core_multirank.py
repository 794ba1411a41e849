"""nccl.core on the host backend with 2 and 4 ranks (tests/core_worker.py)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import clean_env
from test_host_collectives import host_available

pytestmark = pytest.mark.skipif(not host_available(), reason="host backend not built")
HERE = Path(__file__).resolve().parent


def run_worker(script: str, nranks: int, *suites: str, timeout: float = 300):
    cmd = [sys.executable, "-m", "nccl.run", "-n", str(nranks), "--backend", "host", "--timeout",
           str(timeout), str(HERE / script), *suites]
    p = subprocess.run(cmd, env=clean_env(NCCL4PY_HOST_TIMEOUT="60"), capture_output=True,
                       text=True, timeout=timeout + 30)
    reports = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    assert sorted(r["rank"] for r in reports) == list(range(nranks)), p.stdout + p.stderr
    failures = [f"rank {r['rank']}: {f}" for r in reports for f in r["failures"]]
    assert failures == [], "\n".join(failures)
    assert all(r["cases"] > 0 for r in reports)


@pytest.mark.parametrize("nranks", [2, 4])
def test_reductions_every_dtype_and_op(nranks):
    run_worker("core_worker.py", nranks, "reductions")


@pytest.mark.parametrize("nranks", [2, 4])
def test_data_movement_every_dtype(nranks):
    run_worker("core_worker.py", nranks, "movement")


@pytest.mark.parametrize("nranks", [2, 4])
def test_groups_lifecycle_specs_errors(nranks):
    run_worker("core_worker.py", nranks, "p2p_and_groups", "lifecycle", "specs", "errors", "torch")
