"""Test configuration.

The test process itself runs on the *recording stub* library (built here from
the API table; test infrastructure, never a real backend): NCCL_LIBRARY is
pointed at it before anything loads a library.  The ranks of
``@pytest.mark.nccl`` tests (the nccl.testing plugin) run on the backend the
plugin chose (the host backend).  Tests that need another
library (the real NCCL, loader-order stubs, the host backend) run it in a
subprocess.  Set NCCL4PY_TEST_LIBRARY to run the process on another library
instead (e.g. the host backend under mpirun).
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

# @pytest.mark.nccl tests need the plugin also where nccl4py is not installed
# (a source tree on PYTHONPATH, as tools/sanitize.sh runs it).
pytest_plugins = ["nccl.testing"]

# A suite started in the background (`cmd &` without job control) inherits
# SIGINT as ignored, and so would every rank it starts, so the tests that
# interrupt ranks or the launcher would see nothing happen.  Give the test
# process (and through exec, its children) the usual disposition back.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

_STUB_DIR = Path(tempfile.mkdtemp(prefix="nccl4py-test-stubs-"))


def cc() -> str:
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return name
    raise RuntimeError("no C compiler found; the tests build stub libraries with one")


def build_stub(name: str, *, noop: bool = False, omit: tuple[str, ...] = (),
               outdir: Path | None = None, extra_c: str = "", host_memory: bool = False) -> Path:
    """Compile the recording (or no-op) stub library as `name` and return its path."""
    from gen import api, stub

    outdir = outdir or _STUB_DIR
    outdir.mkdir(parents=True, exist_ok=True)
    src = outdir / (name.replace(".", "_") + ".c")
    text = stub.gen_stub_c(api.parse_table(), noop=noop) + extra_c
    src.write_text(text)
    out = outdir / name
    cmd = [cc(), "-std=c11", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
           f"-I{ROOT / 'src'}", "-o", str(out), str(src)]
    cmd += [f"-DSTUB_OMIT_{sym}" for sym in omit]
    if host_memory:
        cmd.append("-DSTUB_HOST_MEMORY")
    subprocess.run(cmd, check=True)
    return out


RECORDING_STUB = None
if os.environ.get("NCCL4PY_TESTING_RANK") is not None:
    pass  # a rank of a @pytest.mark.nccl test: the plugin chose the backend
elif not os.environ.get("NCCL4PY_TEST_LIBRARY"):
    RECORDING_STUB = build_stub("librecording_stub.so", host_memory=True)
    os.environ["NCCL_LIBRARY"] = str(RECORDING_STUB)
else:
    lib = os.environ["NCCL4PY_TEST_LIBRARY"]
    if lib == "host":
        os.environ.pop("NCCL_LIBRARY", None)
        os.environ["NCCL4PY_BACKEND"] = "host"
    else:
        os.environ["NCCL_LIBRARY"] = lib


def nccl_include_dir() -> Path | None:
    """The include/ folder of an installed nvidia-nccl wheel (nccl.h), if any."""
    import importlib.util

    spec = importlib.util.find_spec("nvidia")
    for base in list(spec.submodule_search_locations) if spec else []:
        inc = Path(base) / "nccl" / "include"
        if (inc / "nccl.h").exists():
            return inc
    return None


def nccl_header_text() -> str:
    """The installed nvidia-nccl wheel's headers, concatenated, comments
    removed; the test is skipped where none is installed."""
    inc = nccl_include_dir()
    if inc is None:
        pytest.skip("no nccl.h installed (nvidia-nccl wheel)")
    text = "\n".join(p.read_text(errors="replace") for p in inc.rglob("*.h"))
    return re.sub(r"/\*.*?\*/|//[^\n]*", "", text, flags=re.S)


def swallowing(fn, exc):
    """A callable that runs fn and ignores the exception type exc."""
    def call():
        try:
            fn()
        except exc:
            pass
    return call


def memory_growth(fn, n: int = 20000, warmup: int = 2000) -> int:
    """Bytes still allocated (tracemalloc) after n calls of fn, past a warm-up."""
    import gc
    import tracemalloc

    for _ in range(warmup):
        fn()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(n):
            fn()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def clean_env(**overrides: str | None) -> dict[str, str]:
    """The environment for a subprocess, without the test process's library choice."""
    env = dict(os.environ)
    for var in ("NCCL_LIBRARY", "NCCL4PY_BACKEND", "NCCL4PY_PLATFORM", "ROCM_PATH", "HIP_PATH",
                "CUDA_HOME", "CUDA_PATH"):
        env.pop(var, None)
    for k, v in overrides.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def alive(pid: int) -> bool:
    """Whether process *pid* exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still answers kill(0); treat it as gone.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def run_python(code: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=timeout)


def help_option(short: str, long: str, metavar: str) -> str:
    """How argparse's --help lists an option with both spellings: the metavar
    after each (``-b SIZE, --minbytes SIZE``), or since Python 3.13 once, at
    the end (``-b, --minbytes SIZE``)."""
    if sys.version_info >= (3, 13):
        return f"{short}, {long} {metavar}"
    return f"{short} {metavar}, {long} {metavar}"


@pytest.fixture
def check():
    """A refdata.Checker: collects every mismatch; end the test with check.assert_ok()."""
    from refdata import Checker

    return Checker()


@pytest.fixture(scope="session")
def stub_dir() -> Path:
    return _STUB_DIR


@pytest.fixture(scope="session")
def recording_stub():
    if RECORDING_STUB is None:
        pytest.skip("the test process runs on NCCL4PY_TEST_LIBRARY, not the recording stub")
    import ctypes

    lib = ctypes.CDLL(str(RECORDING_STUB))
    lib.nccl4pyStubLastCall.restype = ctypes.c_char_p
    lib.nccl4pyStubCallCount.restype = ctypes.c_long
    return lib


@pytest.fixture
def stub(recording_stub):
    """The recording stub, reset before and after the test."""
    recording_stub.nccl4pyStubReset()
    yield recording_stub
    recording_stub.nccl4pyStubReset()


# ------------------------------------------------------ shared test helpers

def host_available() -> bool:
    """Whether the bundled host backend is built."""
    from nccl import _discovery

    return os.path.exists(_discovery.host_backend_path())


HOST_WORKER = Path(__file__).resolve().parent / "host_worker.py"


def new_ids(n: int) -> list[str]:
    """n host-backend unique ids, as hex, made by another process."""
    p = run_python("import nccl.bindings as b\n"
                   f"for _ in range({n}): print(bytes(b.get_unique_id()).hex())",
                   clean_env(NCCL4PY_BACKEND="host"))
    assert p.returncode == 0, p.stderr
    return p.stdout.split()


def shm_path(hexid: str) -> str:
    """The segment a host-backend unique id names: /dev/shm/nccl4py-<bytes 8..24 hex>."""
    return "/dev/shm/nccl4py-" + hexid[16:48]


def mpiexec() -> str | None:
    """The mpiexec of this environment (the mpich wheel's), or None."""
    found = shutil.which("mpiexec") or str(Path(sys.executable).parent / "mpiexec")
    return found if os.path.exists(found) else None


@pytest.fixture(scope="session")
def lib(tmp_path_factory):
    """tests/producers.c compiled: hand-written DLPack producers (see dlpack_producers)."""
    from dlpack_producers import build

    return build(tmp_path_factory.mktemp("producers"))


# ------------------------------------------------------------ heavy checks

def pytest_addoption(parser):
    parser.addoption("--heavy", action="store_true", default=False,
                     help="also run the tests marked heavy (sanitizer build, packaging, "
                          "the real NCCL wheel, long fuzzing); with -m heavy, only those")


# The CPU-side checks against the real libnccl and its headers need the
# nvidia-nccl-cu13 wheel, a 305 MB download that the fast run does without.
REAL_NCCL = pytest.mark.heavy("the real NCCL: pip install nvidia-nccl-cu13, a 305 MB download")


def pytest_collection_modifyitems(config, items):
    """Tests marked ``@pytest.mark.heavy("what")`` are skipped unless --heavy
    is given; the skip reason says what the test is and how to run it."""
    if config.getoption("--heavy") or os.environ.get("NCCL4PY_TESTING_RANK") is not None:
        return
    for item in items:
        marker = item.get_closest_marker("heavy")
        if marker is not None:
            what = marker.args[0] if marker.args else "a long check"
            item.add_marker(pytest.mark.skip(reason=f"heavy check ({what}); run it with --heavy"))


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(_STUB_DIR, ignore_errors=True)
