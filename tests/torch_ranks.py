"""Jobs of torch ranks for the tests of nccl.torch (tests/test_torch_*.py).

``run_job(tmp_path, script, nranks, args, launcher)`` starts ``script`` on
``nranks`` processes on the host backend, either under torchrun
(``python -m torch.distributed.run``, env://) or as plain processes with
RANK / WORLD_SIZE set, with the results directory as the script's first
argument, and returns each rank's JSON result file (``rank<R>.json`` there)
by rank.  torch is imported only
by the ranks: importing it here would slow down every test run.
"""
from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import clean_env, host_available

HERE = Path(__file__).resolve().parent

TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not TORCH, reason="torch is not installed "
                                 "(pip install 'nccl4py[torch]'); the nccl.torch tests need it")
needs_host = pytest.mark.skipif(not host_available(), reason="host backend not built")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def job_env(**extra: str) -> dict:
    return clean_env(NCCL4PY_BACKEND="host", OMP_NUM_THREADS="1",
                     TORCH_DEVICE_BACKEND_AUTOLOAD="1", NCCL4PY_HOST_TIMEOUT=None, **extra)


def run_job(tmp_path: Path, script: str, nranks: int, args: list[str], launcher: str = "spawn",
            timeout: float = 400, expect_rc: int | None = 0, **extra: str):
    """(results by rank, combined output).  launcher: "torchrun" or "spawn"."""
    env = job_env(**extra)
    outdir = tmp_path / "results"
    outdir.mkdir(exist_ok=True)
    args = [str(outdir), *args]
    path = str(HERE / script)
    port = free_port()
    if launcher == "torchrun":
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nranks),
               "--master-addr", "127.0.0.1", "--master-port", str(port), path, *args]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        rcs, out = [p.returncode], p.stdout + p.stderr
    else:
        args = [a.replace("{port}", str(port)) for a in args]
        procs = [subprocess.Popen([sys.executable, path, *args],
                                  env={**env, "RANK": str(r), "WORLD_SIZE": str(nranks)},
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for r in range(nranks)]
        outs = []
        try:
            for pr in procs:
                outs.append(pr.communicate(timeout=timeout)[0])
        finally:
            for pr in procs:
                if pr.poll() is None:
                    pr.kill()
                    pr.wait()
        rcs, out = [pr.returncode for pr in procs], "\n".join(outs)
    if expect_rc is not None:
        assert all(rc == expect_rc for rc in rcs), f"exit {rcs}\n{out[-6000:]}"
    results = {}
    for f in sorted(outdir.glob("rank*.json")):
        data = json.loads(f.read_text())
        results[data["rank"]] = data
    return results, out
