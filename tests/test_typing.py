"""mypy: the whole package type-checks with the project's [tool.mypy] config;
the bench, the diagnostics, the C module's stubs and the basic examples are
clean under --strict."""
from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from conftest import ROOT

pytest.importorskip("mypy", reason="mypy is in the test extra")

STRICT = ["nccl/bench", "nccl/_diagnostics.py", "nccl/__main__.py", "nccl/_nccl.pyi"]
EXAMPLES = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples" / "01_basic").glob("*.py"))


_CACHE = tempfile.mkdtemp(prefix="nccl4py-mypy-")  # shared by this session's runs
atexit.register(shutil.rmtree, _CACHE, True)


def mypy(*args, **env):
    e = dict(os.environ, **env)
    e.pop("NCCL_LIBRARY", None)
    return subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary",
                           "--cache-dir", _CACHE, *args], cwd=ROOT, env=e,
                          capture_output=True, text=True, timeout=300)


def test_stub_covers_the_extension():
    import nccl._nccl as ext

    stub = (ROOT / "nccl" / "_nccl.pyi").read_text()
    public = [n for n in dir(ext) if not n.startswith("__")]
    missing = [n for n in public if f"def {n}(" not in stub and f"class {n}" not in stub
               and f"{n}:" not in stub]
    assert not missing, f"add to nccl/_nccl.pyi: {missing}"


def test_package():
    p = mypy()  # files and relaxations from [tool.mypy] in pyproject.toml
    assert p.returncode == 0, p.stdout + p.stderr


def test_strict_owned_modules():
    p = mypy("--strict", "--follow-imports=silent", *STRICT)
    assert p.returncode == 0, p.stdout + p.stderr


def test_strict_examples():
    p = mypy("--strict", "--follow-imports=silent", *EXAMPLES,
             MYPYPATH=str(ROOT / "examples" / "01_basic"))
    assert p.returncode == 0, p.stdout + p.stderr
