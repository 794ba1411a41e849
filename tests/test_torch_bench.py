"""bench/torch_vs_gloo.py runs, and checks every row on both backends (no
timing is asserted: speed goals live in the benchmark)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import ROOT
from torch_ranks import job_env, needs_host, needs_torch

pytestmark = [needs_torch, needs_host]


@pytest.mark.heavy("bench/torch_vs_gloo.py --quick: every row on 2 ranks, with gloo")
def test_quick_run_checks_every_row(tmp_path):
    out = tmp_path / "r.json"
    cmd = [sys.executable, str(ROOT / "bench" / "torch_vs_gloo.py"), "--quick", "--rounds", "1",
           "--sizes", "4K,64K", "--ddp-width", "32", "--json", str(out)]
    p = subprocess.run(cmd, env=job_env(), capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    data = json.loads(out.read_text())
    assert data["all_ok"], data
    rows = {(r["row"], r["dtype"], r["bytes"]) for r in data["rows"]}
    for size in (4096, 65536):
        for row in (("all_reduce", "float32"), ("all_reduce", "bfloat16"),
                    ("all_gather_into_tensor", "float32"), ("reduce_scatter_tensor", "float32")):
            assert (*row, size) in rows, (row, size)
    assert ("ddp_step", "float32", 0) in rows and ("per_call", "float32", 4) in rows
    assert "rows where gloo is faster:" in p.stdout and "torch and nccl4py_host add" in p.stdout and "one rank alone" in p.stdout
