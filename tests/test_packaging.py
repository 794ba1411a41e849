"""The new user's path: sdist -> wheel built from that sdist -> a fresh
virtual environment with only that wheel (and NumPy) -> an example run from
a directory outside any source tree.  Also: the sdist holds every file of
the repository, the wheel holds both compiled libraries and the licence, the
metadata is complete, and a tree without the host backend's sources does
not build."""
from __future__ import annotations

import email
import importlib.util
import json
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT, clean_env

# A build/ folder in the working directory would pass for the package `build`
# (as a namespace package), so look for the real one.
_spec = importlib.util.find_spec("build")
if _spec is None or _spec.origin is None:
    pytest.skip("the packaging tests need `build` (in the test extra)", allow_module_level=True)

# Files of the repository that do not belong in the sdist.
NOT_SHIPPED = {".gitignore"}


def run(cmd, timeout=900, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    assert p.returncode == 0, f"{cmd}\n{p.stdout[-4000:]}\n{p.stderr[-4000:]}"
    return p


# Build outputs and local state that a fresh checkout does not have (an old
# *.egg-info/SOURCES.txt would add files to the sdist that MANIFEST.in misses).
LOCAL_STATE = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "*.so", "*.o",
                                     "__pycache__", ".pytest_cache", ".hypothesis", ".mypy_cache")


@pytest.fixture(scope="module")
def dists(tmp_path_factory):
    """(sdist, wheel): `python -m build` makes the sdist from a copy of the tree
    as a fresh checkout has it, then the wheel from that sdist."""
    tree = tmp_path_factory.mktemp("checkout") / "nccl4py"
    shutil.copytree(ROOT, tree, ignore=LOCAL_STATE)
    out = tmp_path_factory.mktemp("dist")
    # The running environment provides the build requirements (setuptools>=77).
    run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(tree)],
        env=clean_env(), cwd=out)
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    return sdist, wheel


def sdist_names(sdist: Path) -> set[str]:
    with tarfile.open(sdist) as t:
        return {m.name.split("/", 1)[1] for m in t.getmembers() if "/" in m.name and m.isfile()}


@pytest.mark.heavy("python -m build: an sdist and a wheel, installed in a fresh venv")
def test_sdist_is_complete(dists):
    sdist, _ = dists
    names = sdist_names(sdist)
    for required in ("LICENSE", "README.md", "setup.py", "pyproject.toml", "MANIFEST.in",
                     "src/nccl_api.def", "src/nccl_api.h", "src/gen/api_table.h",
                     "src/gen/wrappers.c", "host/comm_init.c", "host/internal.h",
                     "host/Makefile", "tools/gen/__main__.py", "tests/conftest.py",
                     "tests/producers.c", "examples/01_basic/_common.py", "docs/api.md",
                     "docs/environment.md", "CHANGELOG.md"):
        assert required in names, required
    for optional in ("SECURITY.md",):
        if (ROOT / optional).exists():
            assert optional in names, optional
    assert not [n for n in names if n.endswith((".so", ".o", ".pyc"))]
    if shutil.which("git") and (ROOT / ".git").exists():
        tracked = set(run(["git", "ls-files"], cwd=ROOT).stdout.split())
        tracked = {t for t in tracked if (ROOT / t).exists()}  # deleted, not yet committed
        assert sorted(tracked - names - NOT_SHIPPED) == []


@pytest.mark.heavy("python -m build: an sdist and a wheel, installed in a fresh venv")
def test_wheel_contents_and_metadata(dists):
    _, wheel = dists
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        meta_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
        meta = email.message_from_bytes(z.read(meta_name))
    assert "nccl/_lib/libnccl4py_host.so" in names
    assert any(n.startswith("nccl/_nccl.") and n.endswith(".so") for n in names)
    assert {"nccl/py.typed", "nccl/_nccl.pyi", "nccl/run.py", "nccl/bench/cli.py"} <= names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert not [n for n in names if n.startswith(("tests/", "host/", "src/"))]
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta["Requires-Python"] == ">=3.10"
    classifiers = meta.get_all("Classifier")
    for minor in (10, 11, 12, 13, 14, 15):
        assert f"Programming Language :: Python :: 3.{minor}" in classifiers
    assert not [c for c in classifiers if c.startswith("License ::")]  # SPDX replaces them
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
    assert urls and all(u.startswith("https://") for u in urls.values()), urls
    assert urls["Upstream nccl4py"] == "https://pypi.org/project/nccl4py/"
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    with zipfile.ZipFile(wheel) as z:
        scripts = z.read(entry_points).decode()
    for script in ("nccl4py-run = nccl.run:main", "nccl4py-bench = nccl.bench:main",
                   "nccl4py-trace = nccl.trace:main"):
        assert script in scripts, scripts


def _upstream_wheel(where: Path, version: str) -> Path:
    """A stand-in for NVIDIA's nccl4py wheel of *version* (metadata and one marker file)."""
    name = f"nccl4py-{version}"
    path = where / f"{name}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("nccl/upstream_marker.py", "")
        z.writestr(f"{name}.dist-info/METADATA",
                   f"Metadata-Version: 2.1\nName: nccl4py\nVersion: {version}\n")
        z.writestr(f"{name}.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: test\n"
                   "Root-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{name}.dist-info/RECORD", "")
    return path


@pytest.mark.heavy("python -m build: an sdist and a wheel, installed in a fresh venv")
def test_wheel_from_sdist_runs_an_example_in_a_fresh_venv(dists, tmp_path):
    sdist, wheel = dists
    src = tmp_path / "unpacked"
    safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
    with tarfile.open(sdist) as t:
        t.extractall(src, **safe)
    (example,) = src.glob("*/examples/01_basic/01_allreduce.py")
    (checkout,) = [d for d in src.iterdir() if d.is_dir()]  # as a fresh checkout has it
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    py = str(venv / "bin" / "python")
    env = clean_env(PYTHONPATH=None, PIP_DISABLE_PIP_VERSION_CHECK="1")
    # before installing: from the checkout, one line says what to do
    p = subprocess.run([py, "-m", "nccl"], cwd=checkout, env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 1 and p.stdout == "", p.stdout
    assert p.stderr.count("\n") == 1 and "its C extension is not built" in p.stderr, p.stderr
    assert "pip install -e ." in p.stderr
    run([py, "-m", "pip", "install", "-q", str(wheel)], env=env)
    # `pip install .` then README's commands from the checkout's root: the
    # checkout's nccl/ (no build) takes its submodules from the installed copy
    p = run([py, "-m", "nccl.run", "-n", "2", "--timeout", "120", "examples/core_allreduce.py"],
            cwd=checkout, env=env, timeout=180)
    assert len(p.stdout.strip().splitlines()) == 2 and "sum 3, max 2" in p.stdout, p.stdout
    assert p.stderr == "", p.stderr
    p = run([py, "-m", "nccl"], cwd=checkout, env=env)
    assert "bundled host backend: present" in p.stdout and str(venv) in p.stdout
    # the version keeps its place: upstream's 0.6.0 does not replace it
    index = tmp_path / "index"
    index.mkdir()
    _upstream_wheel(index, "0.6.0")
    _upstream_wheel(index, "0.5.0")
    installed = run([py, "-c", "import nccl; print(nccl.__version__)"], cwd=tmp_path,
                    env=env).stdout.strip()
    for args in (["nccl4py>=0.3"], ["-U", "nccl4py"], ["nccl4py~=0.6.0"]):
        run([py, "-m", "pip", "install", "-q", "--no-index", "--find-links", str(index), *args],
            env=env)
        now = run([py, "-c", "import nccl, os; print(nccl.__version__, "
                   "os.path.exists(os.path.join(nccl.__path__[0], 'upstream_marker.py')))"],
                  cwd=tmp_path, env=env).stdout.split()
        assert now == [installed, "False"], (args, now)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = run([py, "-c", "import nccl; print(nccl.__file__)"], cwd=elsewhere, env=env)
    assert where.stdout.strip().startswith(str(venv)), where.stdout
    p = run([py, "-m", "nccl.run", "-n", "2", "--backend", "host", "--timeout", "120",
             str(example)], cwd=elsewhere, env=env, timeout=180)
    lines = p.stdout.strip().splitlines()
    assert len(lines) == 2 and all(ln.endswith("SUCCESS") for ln in lines), p.stdout
    # the CPU default: no --backend, no variable
    info = run([py, "-m", "nccl", "--json"], cwd=elsewhere, env=env)
    j = json.loads(info.stdout)
    assert j["host_backend"]["present"] and j["host_backend"]["path"].startswith(str(venv))


def test_missing_host_sources_is_a_build_error(tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(ROOT, tree, ignore=lambda d, names: LOCAL_STATE(d, names) | (
        {"host"} if Path(d) == ROOT else set()))
    p = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=tree,
                       capture_output=True, text=True, timeout=300, env=clean_env())
    assert p.returncode != 0
    assert "the host backend's sources are missing" in p.stderr + p.stdout, p.stderr[-3000:]
    assert not list(tree.rglob("*.so"))  # it failed before compiling anything


def test_bad_sanitize_value_is_a_build_error():
    p = subprocess.run([sys.executable, "setup.py", "--version"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120, env=clean_env(NCCL4PY_SANITIZE="yes"))
    assert p.returncode != 0 and "NCCL4PY_SANITIZE='yes'" in p.stderr, p.stderr[-2000:]


def test_missing_compiler_is_one_line(tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(ROOT, tree, ignore=LOCAL_STATE)
    p = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=tree,
                       capture_output=True, text=True, timeout=300,
                       env=clean_env(CC="/nonexistent/cc"))
    assert p.returncode != 0
    lines = [ln for ln in (p.stdout + p.stderr).splitlines() if "no C compiler was found" in ln]
    assert len(lines) == 1 and "'/nonexistent/cc'" in lines[0], p.stderr[-2000:]
    assert "apt-get install gcc" in lines[0]
    assert not list(tree.rglob("*.so"))
