"""Collectives on the host backend, through nccl.bindings, on 1-4 ranks.

Each test launches its ranks with ``python -m nccl.run --backend host``;
every rank checks its results against NumPy / ml_dtypes computations made
independently of the library (tests/host_worker.py).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, clean_env

HOST_LIB = ROOT / "nccl" / "_lib" / "libnccl4py_host.so"
WORKER = Path(__file__).resolve().parent / "host_worker.py"


def host_available() -> bool:
    from nccl import _discovery

    return os.path.exists(_discovery.host_backend_path())


pytestmark = pytest.mark.skipif(not host_available(), reason="host backend not built")


def launch(nranks: int, *suites: str, timeout: float = 300, extra_env=None):
    env = clean_env(NCCL4PY_HOST_TIMEOUT="60", **(extra_env or {}))
    cmd = [sys.executable, "-m", "nccl.run", "-n", str(nranks), "--backend", "host",
           "--timeout", str(timeout), str(WORKER), *suites]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout + 30)


def run_suites(nranks: int, *suites: str):
    p = launch(nranks, *suites)
    reports = []
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            reports.append(json.loads(line))
    assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    assert sorted(r["rank"] for r in reports) == list(range(nranks)), p.stdout + p.stderr
    failures = [f"rank {r['rank']}: {f}" for r in reports for f in r["failures"]]
    assert failures == [], "\n".join(failures)
    assert all(r["cases"] > 0 for r in reports)
    return reports


@pytest.mark.parametrize("nranks", [1, 2, 3, 4])
def test_allreduce_every_dtype_and_op(nranks):
    run_suites(nranks, "allreduce")


@pytest.mark.parametrize("nranks", [1, 2, 3, 4])
def test_reduce_and_reduce_scatter(nranks):
    run_suites(nranks, "reduce", "reduce_scatter")


@pytest.mark.parametrize("nranks", [1, 2, 3, 4])
def test_data_movement(nranks):
    run_suites(nranks, "movement")


@pytest.mark.parametrize("nranks", [2, 4])
def test_large_messages(nranks):
    run_suites(nranks, "big")


def test_half_and_8bit_floats_round_to_nearest_even():
    run_suites(2, "rounding")


@pytest.mark.parametrize("nranks", [1, 2, 3, 4])
def test_groups_p2p_split_shrink_premulsum_rccl(nranks):
    run_suites(nranks, "p2p", "comms", "premulsum_device", "rccl")
