"""The Pythons nccl4py claims: the test extra fits the interpreter (no mypy on
a free-threaded one) and the typing tests say why they skip."""
from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import sysconfig

import pytest

from conftest import ROOT, clean_env

FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


def test_test_extra_has_mypy_only_where_it_installs():
    # the installed copy's metadata (not an egg-info a build left in the tree)
    site = list({sysconfig.get_paths()[k] for k in ("purelib", "platlib")})
    dist = next(iter(importlib.metadata.distributions(name="nccl4py", path=site)), None)
    if dist is None:
        pytest.skip("nccl4py is not installed (pip install -e .)")
    requires = dist.requires or []
    test = {re.split(r"[ ;<>=!\[]", r, 1)[0].lower() for r in requires
            if re.search(r"""extra\s*==\s*["']test["']""", r)}
    assert {"pytest", "hypothesis", "ml_dtypes"} <= test, requires
    assert ("mypy" in test) == (not FREE_THREADED), requires


def test_typing_tests_say_why_they_skip(tmp_path):
    """Without mypy (as on a free-threaded interpreter) tests/test_typing.py
    is skipped with a reason that says where mypy is missing and why."""
    (tmp_path / "mypy").mkdir()
    (tmp_path / "mypy" / "__init__.py").write_text(
        "raise ModuleNotFoundError('hidden by the test', name='mypy')\n")
    env = clean_env(PYTHONPATH=str(tmp_path))
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                        "-p", "no:xdist", "tests/test_typing.py"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 5, p.stdout + p.stderr  # 5: every test skipped
    assert "1 skipped" in p.stdout and "not installed" in p.stdout, p.stdout
    assert "free-threaded" in p.stdout, p.stdout
