"""bench/lowp_kernels.c builds with the command its header gives and prints
its table: every op and source count, a positive float32 figure and a ratio
for each other type."""
from __future__ import annotations

import re
import shlex
import shutil
import subprocess

import pytest

from conftest import ROOT

SOURCE = ROOT / "bench" / "lowp_kernels.c"


@pytest.mark.heavy("compiles the host backend's sources into the kernel benchmark")
@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_the_kernel_benchmark_builds_as_documented_and_runs(tmp_path):
    header = SOURCE.read_text()
    m = re.search(r"\*   (gcc .*?\\)\n \*\s+(.*?)\n", header)
    assert m, "the build command is not in the header"
    cmd = (m.group(1)[:-1] + " " + m.group(2)).replace("/tmp/lowp_kernels",
                                                       shlex.quote(str(tmp_path / "k")))
    b = subprocess.run(["bash", "-c", cmd + " -Wall -Wextra -Werror"], cwd=ROOT,
                       capture_output=True, text=True)
    assert b.returncode == 0, b.stderr[-3000:]
    r = subprocess.run([str(tmp_path / "k"), "4096"], capture_output=True, text=True,
                       env={"NCCL4PY_HOST_KERNELS": "portable"}, timeout=300)
    assert r.returncode == 0, r.stderr
    rows = [ln.split() for ln in r.stdout.splitlines() if ln and not ln.startswith(("#", "op "))]
    assert [(row[0], row[1]) for row in rows] == [
        (op, n) for op in ("sum", "avg", "max", "mulsum") for n in ("2", "3", "4", "8")]
    for row in rows:
        assert float(row[2]) > 0 and all(x.endswith("x") and float(x[:-1]) > 0 for x in row[3:])
        assert len(row) == 7
    bad = subprocess.run([str(tmp_path / "k"), "1"], capture_output=True, text=True)
    assert bad.returncode == 2 and "usage" in bad.stderr
