"""The release recipe: [tool.cibuildwheel] in pyproject.toml and
.github/workflows/wheels.yml (docs/contributing.md, "Releasing").  What
cannot run here (the manylinux images, the public CI service, PyPI) is
checked for its content; cibuildwheel itself, where it can be installed,
says which wheels the options select."""
from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, clean_env

tomllib = pytest.importorskip("tomllib", reason="tomllib is Python 3.11's")

PYTHONS = ["cp310", "cp311", "cp312", "cp313", "cp314", "cp314t", "cp315", "cp315t"]
ARCHS = ["x86_64", "aarch64"]
WORKFLOW = ROOT / ".github" / "workflows" / "wheels.yml"


def options() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["tool"]["cibuildwheel"]


def test_wheels_for_every_python_on_manylinux_2_28():
    o = options()
    assert o["build"] == [f"{p}-*" for p in PYTHONS]
    assert o["skip"] == ["*-musllinux_*"]
    assert o["linux"]["archs"] == ARCHS
    for arch in ARCHS:
        assert o[f"manylinux-{arch}-image"] == "manylinux_2_28"
    # auditwheel refuses, instead of tagging higher, a wheel that needs more
    assert "--plat manylinux_2_28_$(uname -m)" in o["linux"]["repair-wheel-command"]


def test_each_wheel_runs_tests_that_exist():
    """The test command names files of the test sources, which are copied
    next to it (conftest.py takes tools/ and src/ from beside tests/)."""
    o = options()
    for src in o["test-sources"]:
        assert (ROOT / src).exists(), src
    assert {"tests", "tools", "src"} <= set(o["test-sources"])
    assert any(r.startswith("pytest") for r in o["test-requires"])
    cmd = shlex.split(o["test-command"])
    assert cmd[:3] == ["python", "-m", "pytest"], cmd
    files = [a for a in cmd if a.startswith("tests/")]
    assert files, cmd
    for f in files:
        assert (ROOT / f.split("::")[0]).is_file(), f
        assert Path(f).parts[0] in o["test-sources"]


def test_workflow_builds_from_the_sdist_and_publishes_by_trusted_publishing():
    text = WORKFLOW.read_text()
    assert re.search(r"uses: pypa/cibuildwheel@v\d+\.\d+\.\d+\n", text)
    assert "package-dir: ${{ steps.sdist.outputs.path }}" in text
    for arch, runner in (("x86_64", "ubuntu-24.04"), ("aarch64", "ubuntu-24.04-arm")):
        assert re.search(rf"- arch: {arch}\n +runner: {runner}(\s|$)", text), arch
    assert "CIBW_ARCHS_LINUX: ${{ matrix.arch }}" in text
    publish = text.split("\n  publish:\n", 1)[1]
    assert "needs: [sdist, wheels]" in publish
    assert "id-token: write" in publish and "pypa/gh-action-pypi-publish@" in publish
    assert "password" not in publish and "secrets." not in text  # no stored token
    # nothing but the publish job may ask for more than reading the repository
    assert text.count("id-token: write") == 1
    assert "\npermissions:\n  contents: read\n" in text


@pytest.mark.heavy("pip install cibuildwheel: the wheels the release options select")
def test_cibuildwheel_selects_these_wheels(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = str(venv / "bin" / "python")
    pip = subprocess.run([py, "-m", "pip", "install", "-q", "cibuildwheel>=4"],
                         capture_output=True, text=True, timeout=600,
                         env=clean_env(PIP_DISABLE_PIP_VERSION_CHECK="1"))
    if pip.returncode != 0:
        pytest.skip(f"cibuildwheel cannot be installed here: {pip.stderr.strip()[-300:]}")
    p = subprocess.run([py, "-m", "cibuildwheel", "--print-build-identifiers", "--platform",
                        "linux", str(ROOT)], capture_output=True, text=True, timeout=300,
                       cwd=tmp_path, env=clean_env())
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.split() == [f"{py_}-manylinux_{arch}" for arch in ARCHS for py_ in PYTHONS]
