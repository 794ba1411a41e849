"""docs/torch.md's program, as written, under torchrun on 2 ranks."""
from __future__ import annotations

import re
import subprocess
import sys

from conftest import ROOT
from test_docs import blocks
from torch_ranks import free_port, job_env, needs_host, needs_torch

pytestmark = [needs_torch, needs_host]


def test_train_py_runs_under_torchrun(tmp_path):
    doc = ROOT / "docs" / "torch.md"
    programs = [lines for lang, _, lines, _ in blocks(doc)
                if lang == "python" and lines and lines[0] == "# train.py"]
    assert len(programs) == 1
    (tmp_path / "train.py").write_text("\n".join(programs[0]) + "\n")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
           "--master-addr", "127.0.0.1", "--master-port", str(free_port()), "train.py"]
    p = subprocess.run(cmd, cwd=tmp_path, env=job_env(), capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    # the ranks share torchrun's stdout: their lines may run together
    assert sorted(re.findall(r"rank (\d+): ok", p.stdout)) == ["0", "1"], p.stdout
