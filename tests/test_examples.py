"""Every example runs to completion on the host backend (examples/mpi/ runs
under mpiexec in test_host_mpi.py)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import ROOT, clean_env, host_available

EXAMPLES = sorted(p for p in (ROOT / "examples").rglob("*.py")
                  if "mpi" not in p.relative_to(ROOT / "examples").parts[:-1]
                  and not p.name.startswith("_"))
BASIC = [p for p in EXAMPLES if p.parent.name == "01_basic"]


def run_example(path, nranks):
    return subprocess.run([sys.executable, "-m", "nccl.run", "-n", str(nranks), "--backend",
                           "host", "--timeout", "120", str(path)], env=clean_env(),
                          capture_output=True, text=True, timeout=180)


def test_examples_found():
    names = {p.name for p in BASIC}
    assert {"01_allreduce.py", "02_send_recv.py", "03_split.py", "04_pre_mul_sum.py",
            "05_group_ring.py", "06_from_env_torchrun.py", "07_rocm_extensions.py"} <= names


@pytest.mark.skipif(not host_available(), reason="host backend not built")
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT / "examples")))
@pytest.mark.parametrize("nranks", [1, 3])
def test_example_runs(path, nranks):
    p = run_example(path, nranks)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.strip().splitlines()
    assert len(lines) == nranks, p.stdout
    if path in BASIC:
        assert all(line.endswith("SUCCESS") for line in lines), p.stdout


@pytest.mark.skipif(not host_available(), reason="host backend not built")
def test_rocm_extensions_unavailable_is_success(tmp_path):
    """On a library without RCCL's extras the example says so and succeeds."""
    # The library stays the host backend; only the two methods are made to
    # fail the way a library without the symbols makes them fail.
    wrapper = tmp_path / "no_extensions.py"
    wrapper.write_text(
        "import runpy, sys\n"
        "from nccl import bindings\n"
        "import nccl.core as nc\n"
        "def missing(*a, **k):\n"
        "    raise bindings.FunctionNotFoundError('ncclAllReduceWithBias not found')\n"
        "nc.Communicator.allreduce_with_bias = missing\n"
        "nc.Communicator.alltoallv = missing\n"
        f"sys.path.insert(0, {str(ROOT / 'examples' / '01_basic')!r})\n"
        f"runpy.run_path({str(ROOT / 'examples' / '01_basic' / '07_rocm_extensions.py')!r},"
        " run_name='__main__')\n")
    p = run_example(wrapper, 2)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count("unavailable") == 2 and p.stdout.count("SUCCESS") == 2, p.stdout
