"""The Pythons nccl4py claims: on a free-threaded one importing nccl keeps the
GIL off, the test extra fits the interpreter (no mypy on a free-threaded one),
the typing tests say why they skip, the claims of
README, pyproject.toml and docs/contributing.md agree, and the script that
builds the free-threaded interpreter for .ci/run finds a built one."""
from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from conftest import ROOT, clean_env

FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
BUILD = ROOT / "tools" / "build_freethreaded_python.sh"


@pytest.mark.skipif(not FREE_THREADED, reason="needs a free-threaded Python (3.13t)")
def test_importing_nccl_keeps_the_gil_off():
    """The C core declares that it runs without the GIL (Py_mod_gil): importing
    it leaves the GIL off and prints nothing (no RuntimeWarning)."""
    code = ("import sys, nccl, nccl.core, nccl._nccl, nccl.testing, nccl.run\n"
            "print(sys._is_gil_enabled())")
    p = subprocess.run([sys.executable, "-c", code], env=clean_env(PYTHON_GIL=None),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert (p.stdout, p.stderr) == ("False\n", ""), (p.stdout, p.stderr)


def test_test_extra_has_mypy_only_where_it_installs():
    # the installed copy's metadata (not an egg-info a build left in the tree)
    site = list({sysconfig.get_paths()[k] for k in ("purelib", "platlib")})
    dist = next(iter(importlib.metadata.distributions(name="nccl4py", path=site)), None)
    if dist is None:
        pytest.skip("nccl4py is not installed (pip install -e .)")
    requires = dist.requires or []
    test = {re.split(r"[ ;<>=!\[]", r, maxsplit=1)[0].lower() for r in requires
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


def _classifier_minors() -> list[int]:
    text = (ROOT / "pyproject.toml").read_text()
    return sorted(int(m) for m in re.findall(r'"Programming Language :: Python :: 3\.(\d+)"', text))


def test_claims_agree():
    minors = _classifier_minors()
    assert minors == list(range(minors[0], minors[-1] + 1)), minors
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert f'requires-python = ">=3.{minors[0]}"' in pyproject
    assert '"Programming Language :: Python :: Free Threading :: 3 - Stable"' in pyproject
    readme = (ROOT / "README.md").read_text()
    assert f"Python 3.{minors[0]}-3.{minors[-1]}" in readme
    # every claimed Python has a line in the contributing guide saying what was
    # checked on it
    guide = (ROOT / "docs" / "contributing.md").read_text()
    section = guide.split("## Python versions", 1)[1].split("\n## ", 1)[0]
    for minor in minors:
        assert re.search(rf"^\| 3\.{minor} ", section, re.M), f"3.{minor} not in the table"
    assert re.search(r"^\| 3\.13t ", section, re.M)
    # .ci/run checks every claimed Python that can be had here
    ci = (ROOT / ".ci" / "run").read_text()
    listed = re.search(r"for minor in ([\d. ]+); do", ci).group(1).split()
    assert listed == [f"3.{m}" for m in minors], listed


def _bash(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(BUILD), *args], capture_output=True, text=True,
                          timeout=120, env=clean_env())


def test_build_script_refuses_an_interpreter_of_another_kind(tmp_path):
    """--check: a GIL build (this interpreter, when it is one) is not a
    free-threaded one; nothing is built."""
    if FREE_THREADED:
        pytest.skip("needs a GIL-enabled interpreter to offer")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python3.13t").symlink_to(sys.executable)
    p = _bash("--check", "--prefix", str(tmp_path))
    assert p.returncode == 1, p.stdout + p.stderr
    assert "no working plain free-threaded 3.13" in p.stdout
    assert sorted(x.name for x in tmp_path.iterdir()) == ["bin"]
    p = _bash("--bogus")
    assert p.returncode == 2 and "unknown argument: --bogus" in p.stderr


@pytest.mark.parametrize("variant", ["plain", "tsan"])
def test_build_script_keeps_a_built_interpreter(variant):
    prefix = "/opt/python3.13t" + ("-tsan" if variant == "tsan" else "")
    if not Path(prefix, "bin", "python3.13t").exists():
        pytest.skip(f"no {prefix} (bash tools/build_freethreaded_python.sh"
                    f"{' --tsan' if variant == 'tsan' else ''} builds it)")
    flag = ["--tsan"] if variant == "tsan" else []
    p = _bash(*flag)  # builds nothing: it is there
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.strip() == f"build_freethreaded_python.sh: {prefix}/bin/python3.13t works; " \
                               "nothing to do"
    other = ["--tsan"] if variant == "plain" else []
    p = _bash("--check", "--prefix", prefix, *other)  # the other kind is not accepted
    assert p.returncode == 1, p.stdout + p.stderr


@pytest.mark.heavy("the C sources against Debian sid's Python 3.14 and 3.15 headers (a download)")
def test_sources_compile_against_newer_pythons(tmp_path):
    """tools/check_python_headers.sh: the extension's sources compile without a
    diagnostic against 3.14's and 3.15's headers, and a use of an API that 3.15
    removed is caught."""
    p = subprocess.run(["bash", str(ROOT / "tools" / "check_python_headers.sh")],
                       capture_output=True, text=True, timeout=900, env=clean_env())
    if p.returncode != 0 and "Failed to fetch" in p.stderr:
        pytest.skip(f"Debian sid's packages cannot be fetched here: {p.stderr[-300:]}")
    assert p.returncode == 0, p.stdout + p.stderr
    for line in ("Python 3.14.", "Python 3.15."):
        assert line in p.stdout, p.stdout
    assert p.stdout.count("0 with a diagnostic") == 4, p.stdout
    # a copy of the sources with a call 3.15 removed
    for d in ("src", "tools"):
        shutil.copytree(ROOT / d, tmp_path / d)
    (tmp_path / "src" / "zz_removed.c").write_text(
        "#include <Python.h>\nPyObject *f(PyObject *r) { return PyWeakref_GetObject(r); }\n")
    p = subprocess.run(["bash", str(tmp_path / "tools" / "check_python_headers.sh"), "3.15"],
                       capture_output=True, text=True, timeout=900, env=clean_env())
    assert p.returncode == 1, p.stdout + p.stderr
    assert "src/zz_removed.c (Python 3.15" in p.stderr and "PyWeakref_GetObject" in p.stderr
