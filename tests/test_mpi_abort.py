"""Under mpiexec, a rank that fails before the unique id is broadcast ends
the whole job instead of leaving the other ranks waiting for it for ever.
The basic examples abort the job on an uncaught exception (their common
helper); the documented form for the mpi4py programs is
``mpiexec -n N python -m mpi4py prog.py``.

The examples run unchanged; one rank is made to fail by giving it a library
that does not exist (mpiexec's MPMD form sets NCCL_LIBRARY for that rank
only): rank 0 then fails making the unique id while rank 1 waits for it in
MPI_Bcast, or rank 1 fails creating the communicator that rank 0 waits in."""
from __future__ import annotations

import glob
import os
import subprocess
import sys
import time

import pytest

from conftest import ROOT, clean_env, host_available, mpiexec

pytestmark = [
    pytest.mark.skipif(not host_available(), reason="host backend not built"),
    pytest.mark.skipif(mpiexec() is None, reason="no mpiexec (pip install mpich mpi4py)"),
]

# Without the abort the survivor waits at least this long (the host
# backend's own timeout for a rank that never arrives), or for ever in MPI.
HOST_TIMEOUT = "900"
# Only guards against a hang: an aborted job ends within seconds.
BOUND = 150


SHM = "/dev/shm"
# What an aborted job leaves in /dev/shm: MPICH's shared memory, and the host
# backend's segment of a communicator whose ranks were killed before they
# all arrived.
ABORT_LEFTOVERS = ("mpich_shm_", "nccl4py-")


def _mapped() -> set[str]:
    """Every /dev/shm file some live process maps."""
    out = set()
    for maps in glob.glob("/proc/[0-9]*/maps"):
        try:
            with open(maps) as f:
                out.update(line.split()[-1].removesuffix(" (deleted)") for line in f
                           if f" {SHM}/" in line)
        except OSError:  # the process ended meanwhile
            continue
    return {os.path.basename(p) for p in out}


def _remove_leftovers(before: set[str]) -> None:
    """Remove what this job left in /dev/shm: entries that appeared during it
    and that no live process maps (every creator maps its segment at once,
    so an unmapped new entry is garbage, never another job's live segment)."""
    if not os.path.isdir(SHM):
        return
    new = {n for n in os.listdir(SHM) if n.startswith(ABORT_LEFTOVERS)} - before
    time.sleep(0.5)
    for name in new - _mapped():
        try:
            os.unlink(os.path.join(SHM, name))
        except FileNotFoundError:
            pass


def job(failing: int, *command: str) -> subprocess.CompletedProcess:
    """A 2-rank job running *command* where rank *failing* cannot load a library."""
    pytest.importorskip("mpi4py")
    cmd = [mpiexec()]
    for rank in range(2):
        if rank:
            cmd.append(":")
        cmd += ["-n", "1"]
        if rank == failing:
            cmd += ["-env", "NCCL_LIBRARY", "/nonexistent/libnccl.so.2"]
        cmd += [sys.executable, *command]
    env = clean_env(NCCL4PY_BACKEND="host", NCCL4PY_HOST_TIMEOUT=HOST_TIMEOUT)
    before = set(os.listdir(SHM)) if os.path.isdir(SHM) else set()
    try:
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=BOUND,
                              cwd=ROOT)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the job was still running after {BOUND} s:\n{e.stdout!r}\n{e.stderr!r}")
    finally:
        _remove_leftovers(before)


def check_aborted(p: subprocess.CompletedProcess) -> None:
    """The job failed, with the failing rank's error, long before the survivor's
    own timeout (MPICH's "application called MPI_Abort" line is not checked:
    mpiexec may end before it has forwarded it)."""
    assert p.returncode != 0, p.stdout + p.stderr
    assert "/nonexistent/libnccl.so.2" in p.stderr, p.stderr


@pytest.mark.parametrize("failing", [0, 1])
def test_basic_example_aborts_the_job(failing):
    p = job(failing, "examples/01_basic/01_allreduce.py")
    check_aborted(p)
    assert "SUCCESS" not in p.stdout


@pytest.mark.parametrize("failing", [0, 1])
def test_documented_mpi4py_form_aborts_the_job(failing):
    p = job(failing, "-m", "mpi4py", "examples/mpi/upstream_03_allreduce.py")
    check_aborted(p)
    assert " ok" not in p.stdout
