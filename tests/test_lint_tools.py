"""tools/lint.sh on a machine without its tools says which are missing
(running them is tests/test_sanitizers.py's)."""
from __future__ import annotations

import shutil
import subprocess
import sys

from conftest import ROOT, clean_env


def test_lint_names_the_missing_tools(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("dirname", "ls", "grep", "cat"):  # what the script needs besides the linters
        found = shutil.which(tool)
        if found:
            (bindir / tool).symlink_to(found)
    env = clean_env(PATH=str(bindir), PYTHON=sys.executable, LINT_TOOLS=None)
    p = subprocess.run(["/bin/bash", str(ROOT / "tools" / "lint.sh")], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "tools/lint.sh: not installed: cppcheck clang-tidy" in p.stderr, p.stderr
    assert "LINT FAILED" not in p.stdout
    p = subprocess.run(["/bin/bash", str(ROOT / "tools" / "lint.sh")], cwd=ROOT,
                       env=dict(env, LINT_TOOLS="cpplint"), capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 2 and "unknown tool 'cpplint'" in p.stderr
