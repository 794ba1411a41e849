"""CI hooks for the sanitizer build and the static analysers.

- tools/sanitize.sh builds an ASan+UBSan copy of the package in a temporary
  directory and runs a representative subset of the suite under it (marshal,
  bad input, buffer and stream resolution, nccl.core calls, host collectives
  and nccl.core on 2 ranks, faults), then the host backend's C test with
  LeakSanitizer; there must be no sanitizer report.
- tools/lint.sh runs cppcheck and clang-tidy (skipped when they are not
  installed: apt-get install -y cppcheck clang-tidy).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, cc, clean_env

SUBSET = [
    "tests/test_marshal.py", "tests/test_bad_input.py", "tests/test_buffer_resolution.py",
    "tests/test_stream_resolution.py", "tests/test_core_calls.py", "tests/test_faults.py",
    *(f"tests/test_host_collectives.py::{name}[2ranks]" for name in (
        "test_allreduce_every_dtype_and_op", "test_reduce_and_reduce_scatter",
        "test_data_movement", "test_groups_p2p_split_shrink_premulsum_rccl")),
    *(f"tests/test_core_multirank.py::{name}[2ranks]" for name in (
        "test_reductions_every_dtype_and_op", "test_p2p_and_groups", "test_lifecycle",
        "test_specs", "test_errors", "test_torch")),
]


def _sanitizer_runtime() -> bool:
    try:
        out = subprocess.run([cc(), "-print-file-name=libasan.so"], capture_output=True,
                             text=True, timeout=30).stdout.strip()
    except (RuntimeError, OSError):
        return False
    return os.path.isabs(out) and os.path.exists(out)


@pytest.mark.heavy("ASan+UBSan build of the package and a subset of the suite under it")
@pytest.mark.skipif(not _sanitizer_runtime(), reason="no ASan runtime for the C compiler")
@pytest.mark.skipif(shutil.which("make") is None, reason="make is needed for the host C test")
def test_sanitizer_build_runs_clean():
    # the copy is built and tested with this interpreter (its Python version, its
    # setuptools), not whatever python3 comes first on PATH
    env = clean_env(LD_PRELOAD=None, ASAN_OPTIONS=None, UBSAN_OPTIONS=None, PYTHONPATH=None,
                    NCCL4PY_TEST_LIBRARY=None, PYTHON=sys.executable)
    p = subprocess.run([str(ROOT / "tools" / "sanitize.sh"), *SUBSET], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=600)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-6000:]
    assert "instrumented:" in out and "SANITIZE OK" in out, out[-3000:]
    assert "sanitizer reports: 0" in out, out[-3000:]
    assert "ERROR: AddressSanitizer" not in out and "runtime error:" not in out, out[-6000:]


@pytest.mark.heavy("cppcheck and clang-tidy over src/ and host/")
@pytest.mark.skipif(shutil.which("cppcheck") is None or shutil.which("clang-tidy") is None,
                    reason="cppcheck and clang-tidy are not installed "
                           "(apt-get install -y cppcheck clang-tidy)")
def test_lint_clean():
    p = subprocess.run([str(ROOT / "tools" / "lint.sh")], cwd=ROOT, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, (p.stdout + p.stderr)[-6000:]
    assert "LINT OK" in p.stdout
