"""Every example runs to completion on the host backend."""
from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import ROOT, clean_env
from test_host_collectives import host_available

EXAMPLES = sorted((ROOT / "examples").glob("*.py"))


@pytest.mark.skipif(not host_available(), reason="host backend not built")
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
@pytest.mark.parametrize("nranks", [1, 3])
def test_example_runs(path, nranks):
    p = subprocess.run([sys.executable, "-m", "nccl.run", "-n", str(nranks), "--backend", "host",
                        "--timeout", "120", str(path)], env=clean_env(), capture_output=True,
                       text=True, timeout=180)
    assert p.returncode == 0, p.stdout + p.stderr
    assert len(p.stdout.strip().splitlines()) == nranks
