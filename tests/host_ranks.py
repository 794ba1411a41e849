"""Run a snippet of Python as N ranks on the host backend.

``run_ranks(tmp_path, code, nranks)`` writes ``code`` after a prelude into a
script, starts it with ``python -m nccl.run -n N --backend host`` and returns
the JSON objects the ranks printed with ``report(...)``, sorted by rank.  The
prelude defines ``np``, ``nc`` (nccl.core), ``comm`` (the rank's
Communicator), ``RANK``, ``N`` and ``report(**fields)``.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import clean_env, host_available

needs_host = pytest.mark.skipif(not host_available(), reason="host backend not built")

PRELUDE = '''\
import json, os, sys
import numpy as np
import nccl.core as nc

comm = nc.Communicator.from_env()
RANK, N = comm.rank, comm.nranks


def report(**fields):
    print(json.dumps({"rank": RANK, **fields}), flush=True)


'''


def run_ranks(tmp_path: Path, code: str, nranks: int = 2, timeout: float = 240,
              expect_rc: int = 0, prelude: str = PRELUDE, **env: str) -> list[dict]:
    """prelude="" runs `code` alone (it prints its own JSON lines with "rank")."""
    script = tmp_path / "rank_script.py"
    script.write_text(prelude + code)
    cmd = [sys.executable, "-m", "nccl.run", "-n", str(nranks), "--backend", "host",
           "--timeout", str(timeout), str(script)]
    p = subprocess.run(cmd, env=clean_env(**{"NCCL4PY_HOST_TIMEOUT": "60", **env}),
                       capture_output=True, text=True, timeout=timeout + 30)
    out = f"exit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    assert p.returncode == expect_rc, out
    reports = sorted((json.loads(line) for line in p.stdout.splitlines()
                      if line.startswith("{")), key=lambda r: r["rank"])
    if expect_rc == 0:
        assert [r["rank"] for r in reports] == list(range(nranks)), out
    return reports
