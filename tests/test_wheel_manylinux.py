"""The release wheel, where the manylinux images cannot run:
tools/build_manylinux_wheel.sh builds the wheel from the sdist against glibc
2.28's symbols (zig cc) and has `auditwheel repair --plat manylinux_2_28_*`
accept it; the repaired wheel is then installed in a fresh venv where no C
compiler can be found, and `python -m nccl` and README's main command (the
bench's all-reduce sweep on 4 ranks, every result checked) run from it."""
from __future__ import annotations

import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT, clean_env

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="manylinux wheels are Linux's")

COMPILERS = ("cc", "gcc", "clang", "c99", "x86_64-linux-gnu-gcc", "aarch64-linux-gnu-gcc")


def run(cmd, timeout, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    assert p.returncode == 0, f"{cmd}\n{p.stdout[-6000:]}\n{p.stderr[-4000:]}"
    return p


def readme_main_command() -> list[str]:
    """README's main command after its `pip install -e . &&` (the install is
    the wheel's here)."""
    lines = (ROOT / "README.md").read_text().splitlines()
    line = lines[lines.index("<!-- main-command -->") + 2]
    install, command = line.split(" && ", 1)
    assert install == "pip install -e .", line
    return shlex.split(command)


@pytest.fixture(scope="module")
def manylinux_wheel(tmp_path_factory):
    """(repaired wheel, the script's output, seconds it took)."""
    t = time.monotonic()
    out = tmp_path_factory.mktemp("manylinux")
    p = run(["bash", str(ROOT / "tools" / "build_manylinux_wheel.sh"), str(out)],
            timeout=1500, env=clean_env(PYTHON=sys.executable))
    (wheel,) = out.glob("*.whl")
    return wheel, p.stdout + p.stderr, time.monotonic() - t


HEAVY = pytest.mark.heavy("tools/build_manylinux_wheel.sh: a manylinux_2_28 wheel built with "
                          "zig cc and repaired by auditwheel")


@HEAVY
def test_manylinux_wheel_runs_without_a_compiler(manylinux_wheel, tmp_path):
    wheel, log, seconds = manylinux_wheel
    timings = {"build and repair": seconds}
    arch = platform.machine()
    assert f"manylinux_2_28_{arch}" in wheel.name, wheel.name
    assert "(compiler warnings above)" not in log, log[-6000:]
    # auditwheel show: the most compatible tag it finds is glibc 2.28 or older
    m = re.search(r'consistent with the\s+following platform tag:\s+"manylinux_2_(\d+)_', log)
    assert m is not None and int(m.group(1)) <= 28, log[-3000:]
    newest = re.search(r"newest glibc symbol version: (\d+)\.(\d+)", log)
    assert newest is not None and (int(newest.group(1)), int(newest.group(2))) <= (2, 28)
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    assert "nccl/_lib/libnccl4py_host.so" in names
    assert any(re.fullmatch(r"nccl/_nccl\..*\.so", n) for n in names), names
    assert not [n for n in names if ".libs/" in n]  # nothing grafted into it

    # A fresh venv whose PATH has its own bin/ only, and CC pointing nowhere.
    t = time.monotonic()
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)], timeout=300)
    py = str(venv / "bin" / "python")
    env = clean_env(PATH=str(venv / "bin"), CC="/bin/false", CXX="/bin/false", LDSHARED=None,
                    PYTHONPATH=None, PIP_DISABLE_PIP_VERSION_CHECK="1")
    assert [c for c in COMPILERS if shutil.which(c, path=env["PATH"])] == []
    run([py, "-m", "pip", "install", "-q", "--only-binary", ":all:", str(wheel)],
        timeout=600, env=env)
    timings["install"] = time.monotonic() - t
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    info = run([py, "-m", "nccl"], timeout=120, env=env, cwd=elsewhere).stdout
    assert re.search(rf"bundled host backend: present \({re.escape(str(venv))}/\S+"
                     r"/libnccl4py_host\.so\); chosen", info), info
    assert "loaded: host backend (nccl4py, host memory)" in info, info

    t = time.monotonic()
    cmd = readme_main_command()
    assert cmd[:3] == ["python", "-m", "nccl.bench"] and "--nranks" in cmd, cmd
    p = run([py, *cmd[1:]], timeout=900, env=env, cwd=elsewhere)
    timings["README's main command"] = time.monotonic() - t
    rows = [ln.split() for ln in p.stdout.splitlines()
            if ln.strip() and not ln.lstrip().startswith("#")]
    sizes = [int(r[0]) for r in rows]
    assert sizes == [8 * 8 ** k for k in range(8)], p.stdout  # 8 B .. 16 MiB, -f 8
    # #wrong, out of place and in place, of every row
    assert all(r[8] == "0" and r[12] == "0" for r in rows), p.stdout
    assert "# Out of bounds values : 0 OK" in p.stdout, p.stdout
    assert "# Result: OK: 0 wrong or out-of-bounds values" in p.stdout, p.stdout
    print("".join(ln + "\n" for ln in log.splitlines() if ln.startswith("== [")), end="")
    print("timings: " + ", ".join(f"{k} {v:.0f} s" for k, v in timings.items()))


@HEAVY
def test_release_test_command_on_the_wheel(manylinux_wheel, tmp_path):
    """What cibuildwheel does after each wheel, as [tool.cibuildwheel] says:
    a fresh venv with the wheel and test-requires, the test-sources copied
    to an empty directory, the test-command run there."""
    import tomllib  # 3.11: the heavy tier runs on it

    with open(ROOT / "pyproject.toml", "rb") as f:
        o = tomllib.load(f)["tool"]["cibuildwheel"]
    wheel, _, _ = manylinux_wheel
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)], timeout=300)
    env = clean_env(PATH=f"{venv / 'bin'}:{os.environ['PATH']}", PYTHONPATH=None,
                    VIRTUAL_ENV=str(venv), PIP_DISABLE_PIP_VERSION_CHECK="1")
    run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel),
         *o["test-requires"]], timeout=600, env=env)
    cwd = tmp_path / "test_cwd"
    cwd.mkdir()
    for src in o["test-sources"]:
        copy = shutil.copytree if (ROOT / src).is_dir() else shutil.copy2
        copy(ROOT / src, cwd / src, **({"ignore": shutil.ignore_patterns("__pycache__")}
                                       if (ROOT / src).is_dir() else {}))
    t = time.monotonic()
    p = run(["sh", "-c", o["test-command"]], timeout=1200, env=env, cwd=cwd)
    assert re.search(r"\b\d+ passed\b", p.stdout) and " failed" not in p.stdout, p.stdout[-3000:]
    # the tests ran on the installed wheel, not on a source tree
    where = run([str(venv / "bin" / "python"), "-c", "import nccl; print(nccl.__file__)"],
                timeout=120, env=env, cwd=cwd).stdout
    assert where.startswith(str(venv)), where
    print(f"timings: the release test command {time.monotonic() - t:.0f} s")
