"""The same rank programs under mpiexec: nccl.run.environment() reads MPI's
rank variables and broadcasts the unique id with mpi4py."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import HOST_WORKER as WORKER, clean_env, host_available, mpiexec



pytestmark = [
    pytest.mark.skipif(not host_available(), reason="host backend not built"),
    pytest.mark.skipif(mpiexec() is None, reason="no mpiexec (pip install mpich mpi4py)"),
]


@pytest.mark.parametrize("nranks", [2, 3])
def test_worker_under_mpiexec(nranks):
    pytest.importorskip("mpi4py")
    env = clean_env(NCCL4PY_BACKEND="host", NCCL4PY_HOST_TIMEOUT="60",
                    OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    p = subprocess.run([mpiexec(), "-n", str(nranks), sys.executable, str(WORKER), "p2p",
                        "comms", "rccl"], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    reports = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    assert sorted(r["rank"] for r in reports) == list(range(nranks))
    assert [f for r in reports for f in r["failures"]] == []


MPI_EXAMPLES = sorted((WORKER.parent.parent / "examples" / "mpi").glob("*.py"))


@pytest.mark.parametrize("path", MPI_EXAMPLES, ids=lambda p: p.name)
def test_upstream_style_programs_under_mpiexec(path):
    """Programs written only against nccl4py 0.3 names, or 0.2 conventions,
    run unchanged (the unique id travels by mpi4py's pickling bcast)."""
    pytest.importorskip("mpi4py")
    env = clean_env(NCCL4PY_BACKEND="host", NCCL4PY_HOST_TIMEOUT="60",
                    OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    p = subprocess.run([mpiexec(), "-n", "3", sys.executable, "-m", "mpi4py", str(path)],
                       env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert p.stdout.count("ok") == 3, p.stdout
