"""nccl.show_versions() / nccl.get_version() and the extended python -m nccl."""
from __future__ import annotations

import dataclasses
import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version

from conftest import REAL_NCCL, clean_env, run_python
from test_host_collectives import host_available


V = Version


def _info(lib_version="2.32.3", cuda=None, path="/x/libnccl.so.2"):
    from nccl._diagnostics import LibraryInfo, VersionInfo

    lib = LibraryInfo(V(lib_version), None if cuda is None else V(cuda),
                      None if path is None else Path(path))
    return VersionInfo(V("0.1.0"), V("2.30.4"), lib)


def test_library_info_form():
    from nccl._diagnostics import LibraryInfo, decode_version

    assert str(LibraryInfo(V("2.32.3"), V("13.4"), Path("/x/libnccl.so.2"))) == \
        "2.32.3+cuda13.4 @ /x/libnccl.so.2"
    assert str(LibraryInfo(V("2.30.4"), None, Path("/x/librccl.so"))) == "2.30.4 @ /x/librccl.so"
    assert str(LibraryInfo(V("2.30.4"), None, None)) == "2.30.4"
    info = LibraryInfo(V("2.30.4"), None, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.version = V("1")  # type: ignore[misc]
    assert decode_version(23004) == "2.30.4" and decode_version(2708) == "2.7.8"


def test_version_info_is_06s_dataclass():
    """nccl4py 0.6: VersionInfo(nccl4py, nccl_bindings, libnccl), nothing more."""
    v = _info()
    assert [f.name for f in dataclasses.fields(v)] == ["nccl4py", "nccl_bindings", "libnccl"]
    assert dataclasses.astuple(v) == (V("0.1.0"), V("2.30.4"),
                                      (V("2.32.3"), None, Path("/x/libnccl.so.2")))
    assert dataclasses.asdict(v)["libnccl"]["version"] == V("2.32.3")
    assert repr(v) == ("VersionInfo(nccl4py=<Version('0.1.0')>, nccl_bindings=<Version('2.30.4')>,"
                       " libnccl=LibraryInfo(version=<Version('2.32.3')>, cuda_variant=None,"
                       " path=PosixPath('/x/libnccl.so.2')))")
    assert v == _info() and hash(v) == hash(_info()) and v != _info("2.32.4")
    assert dataclasses.replace(v, libnccl=None).libnccl is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        v.libnccl = None  # type: ignore[misc]
    with pytest.raises(AttributeError):
        v.nccl_version = V("1")  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(v)) == v


def test_version_info_reads_as_03s_results():
    """The names code for nccl4py 0.2/0.3 reads, on the same object."""
    v = _info(cuda="13.4")
    # nccl.core.get_version() of 0.2/0.3: .nccl_version / .nccl4py_version
    assert v.nccl_version == V("2.32.3") and isinstance(v.nccl_version, Version)
    assert v.nccl4py_version is v.nccl4py
    assert not v.nccl_version < V("2.19.0")  # upstream's requires_nccl_version()
    assert v.nccl_version < V("2.33") and v.nccl_version.release[:2] == (2, 32)
    assert (v.nccl_version.major, v.nccl_version.minor, v.nccl_version.micro) == (2, 32, 3)
    assert f"found {v.nccl_version}" == "found 2.32.3"
    # nccl.get_version() of 0.3.1: .nccl (a LibraryInfo) and .nccl_ep
    assert v.nccl is v.libnccl and v.nccl_ep is None
    assert str(v.nccl) == "2.32.3+cuda13.4 @ /x/libnccl.so.2"
    assert v.nccl.version >= V("2.30") and v.nccl.cuda_variant.major == 13
    # printing it shows the versions
    assert "2.32.3" in str(v) and "0.1.0" in str(v)


def test_nccl_version_without_a_library_raises():
    v = _info()
    empty = dataclasses.replace(v, libnccl=None)
    assert empty.nccl is None and empty.nccl_ep is None
    with pytest.raises(RuntimeError, match="libnccl is None"):
        empty.nccl_version  # noqa: B018


def test_top_level_all_and_names():
    import nccl
    import nccl.core

    assert {"__version__", "LibraryInfo", "VersionInfo", "get_version", "show_versions"} <= \
        set(nccl.__all__)
    ns: dict = {}
    exec("from nccl import *", ns)
    assert ns["VersionInfo"] is nccl.core.VersionInfo is nccl.core.utils.VersionInfo
    assert ns["LibraryInfo"] is nccl.core.LibraryInfo
    assert {"__version__", "LibraryInfo", "VersionInfo", "get_version", "show_versions"} <= \
        set(nccl.core.__all__)
    assert nccl.core.__version__ == nccl.__version__ and isinstance(nccl.core.__version__, str)
    assert Version(nccl.core.__version__) == Version(nccl.__version__)
    # 0.2/0.3's class stays importable
    old = nccl.core.Version(23203)
    assert old.nccl_version == V("2.32.3") and old.nccl4py_version == V(nccl.__version__)
    assert "NCCL Library version: 2.32.3" in repr(old)


PROBE = r"""
import io, json, sys, warnings
warnings.simplefilter("error")
from pathlib import Path
from packaging.version import Version
import nccl, nccl.core
from nccl import _nccl, bindings
from nccl._diagnostics import decode_version
top, core = nccl.get_version(), nccl.core.get_version()
lib = core.libnccl
out = {"same": top == core,
       "types": [type(x).__name__ for x in (core.nccl4py, core.nccl_bindings, lib.version,
                                            lib.path)],
       "version": str(lib.version), "code": bindings.get_version(),
       "path": str(lib.path), "loaded_path": bindings.get_library_path(),
       "cuda_variant": None if lib.cuda_variant is None else str(lib.cuda_variant),
       "bindings": str(core.nccl_bindings), "abi": _nccl.ABI_VERSION,
       "nccl4py": str(core.nccl4py), "old": [str(core.nccl_version), str(core.nccl4py_version)],
       "top": [str(top.nccl.version), top.nccl_ep, str(top.nccl)]}
f = io.StringIO(); nccl.core.show_versions(f); out["show"] = f.getvalue()
print(json.dumps(out))
"""


def _probe(env):
    p = run_python(PROBE, env, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def _check_common(out):
    from nccl._diagnostics import decode_version
    from nccl._version import __version__

    assert out["same"]  # nccl.get_version() and nccl.core.get_version() agree
    assert out["types"] == ["Version", "Version", "Version", "PosixPath"]
    assert out["version"] == decode_version(out["code"])
    assert out["path"] == out["loaded_path"]
    assert out["bindings"] == decode_version(out["abi"])
    assert out["nccl4py"] == __version__
    assert out["old"] == [out["version"], __version__]
    assert out["top"][:2] == [out["version"], None]
    assert out["show"].splitlines() == [
        "", "NCCL4Py versions", "----------------", f"nccl4py  : {__version__}",
        f"bindings : {out['bindings']}", f"libnccl  : {out['top'][2]}"]


@pytest.mark.skipif(not host_available(), reason="host backend not built")
def test_get_version_on_host():
    out = _probe(clean_env(NCCL4PY_BACKEND="host"))
    _check_common(out)
    assert out["path"].endswith("libnccl4py_host.so") and out["cuda_variant"] is None
    assert out["top"][2] == f"{out['version']} @ {out['path']}"


@REAL_NCCL
def test_get_version_on_the_real_nccl():
    from nccl import _discovery

    wheels = _discovery._wheel_libraries()
    if not wheels:
        pytest.skip("no nvidia-nccl wheel installed (pip install nvidia-nccl-cu13)")
    out = _probe(clean_env(NCCL4PY_PLATFORM="cuda"))
    _check_common(out)
    assert Version(out["version"]) >= Version("2.19")
    assert Path(out["path"]).resolve() == Path(wheels[0]).resolve()
    # the CUDA major of the wheel (nvidia-nccl-cu13 -> 13) is the banner's
    dist = _wheel_dist(wheels[0])
    assert dist, wheels[0]
    assert Version(out["cuda_variant"]).major == int(dist.rsplit("cu", 1)[1])
    assert out["top"][2] == f"{out['version']}+cuda{out['cuda_variant']} @ {out['path']}"


def _wheel_dist(path: str) -> str:
    import importlib.metadata as md

    for name in ("nvidia-nccl-cu13", "nvidia-nccl-cu12"):
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        if any(Path(str(dist.locate_file(f))).resolve() == Path(path).resolve()
               for f in dist.files or []):
            return name
    return ""


def test_get_version_without_a_library():
    code = ("import io, nccl, nccl.core\n"
            "v = nccl.get_version(); print(v.libnccl, v.nccl, v.nccl_ep)\n"
            "f = io.StringIO(); nccl.core.show_versions(f); print(f.getvalue().splitlines()[-1])\n"
            "try:\n    nccl.core.get_version().nccl_version\n"
            "except nccl.bindings.NotSupportedError as e:\n    print('raised', str(e)[:40])\n")
    p = run_python(code, clean_env(NCCL_LIBRARY="/nonexistent/libnccl.so.2"))
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "None None None"
    assert lines[1] == "libnccl  : not available"
    assert lines[2].startswith("raised Could not load")


UPSTREAM_031 = r"""
# how nccl4py 0.3.1's tests and users read the versions (unchanged)
from packaging.version import Version as _Version
import nccl
import nccl.core as nccl_core

NCCL_LIB_VERSION = nccl_core.get_version().nccl_version

def requires(min_version):
    return (NCCL_LIB_VERSION < _Version(min_version),
            f"Requires NCCL >= {min_version} (found {NCCL_LIB_VERSION})")

print(NCCL_LIB_VERSION)
print(requires("2.19.0"), requires("99.0"))
v = nccl.get_version()
print(v.nccl4py >= _Version("0.0.1"), v.nccl.version == NCCL_LIB_VERSION, v.nccl_ep)
print(nccl_core.get_version().nccl4py_version == _Version(nccl.__version__))
nccl.show_versions()
"""


@pytest.mark.skipif(not host_available(), reason="host backend not built")
def test_upstream_031_usage_runs_unchanged():
    p = run_python(UPSTREAM_031, clean_env(NCCL4PY_BACKEND="host"))
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    found = lines[0]
    assert Version(found) >= Version("2.19.0")
    assert lines[1] == (f"(False, 'Requires NCCL >= 2.19.0 (found {found})') "
                        f"(True, 'Requires NCCL >= 99.0 (found {found})')")
    assert lines[2:4] == ["True True None", "True"]
    assert "libnccl4py_host.so" in p.stdout  # nccl.show_versions(): the full report


def test_import_nccl_stays_lazy():
    p = run_python("import sys, nccl\n"
                   "print('numpy' in sys.modules, 'nccl._nccl' in sys.modules)", clean_env())
    assert p.stdout.split() == ["False", "False"], p.stdout + p.stderr


def test_json_names_library_and_interop():
    p = subprocess.run([sys.executable, "-m", "nccl", "--json"],
                       env=clean_env(NCCL4PY_BACKEND="host"), capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    j = json.loads(p.stdout)
    assert j["library"]["path"].endswith("libnccl4py_host.so")
    assert j["library"]["family"].startswith("host backend")
    assert j["interop"]["numpy"] and "torch" in j["interop"] and "hip-python" in j["interop"]
    assert set(j["gpu_runtime"]) >= {"runtime", "device_count"}
    assert j["python"] and j["platform"] and j["decision"]


def test_json_without_library():
    p = subprocess.run([sys.executable, "-m", "nccl", "--json"],
                       env=clean_env(NCCL_LIBRARY="/nonexistent/libnccl.so.2"),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    j = json.loads(p.stdout)
    assert j["library"] is None and "Could not load" in j["error"]
    assert j["candidates"][0]["path"] == "/nonexistent/libnccl.so.2"


def test_gpu_runtime_is_tolerant():
    from nccl._diagnostics import gpu_runtime

    class Fake:
        @staticmethod
        def gpu_runtime_device_count():
            return 3

    class Broken:
        @staticmethod
        def gpu_runtime_device_count():
            raise RuntimeError("no driver")

    assert gpu_runtime(object()) == {"runtime": "unknown", "device_count": None}
    assert gpu_runtime(Fake)["device_count"] == 3
    broken = gpu_runtime(Broken)
    assert broken["device_count"] is None and "no driver" in broken["device_count_error"]


def test_the_version_states_the_upstream_api_level():
    """<upstream>.<N>: sorts after upstream's own release of that API and
    before its next, so `nccl4py>=0.3` and `pip install -U` keep this package
    (tests/test_packaging.py asks pip itself)."""
    from packaging.specifiers import SpecifierSet

    from nccl import _version

    v, level = Version(_version.__version__), Version(_version.API_LEVEL)
    assert str(level) == "0.6.0"  # nccl4py 0.6.0's API (tests/test_core_0_6.py)
    assert v.release[:3] == level.release and len(v.release) == 4 and v.release[3] >= 1
    assert not v.is_prerelease and not v.is_postrelease and v.local is None  # PyPI-safe
    for upstream in ("0.2.0", "0.3.1", "0.5.0", "0.6.0", "0.6.0.post1"):
        assert v > Version(upstream)
    for later in ("0.6.1", "0.7.0"):
        assert v < Version(later)
    for requirement in (">=0.3", ">=0.6", "~=0.6.0", "==0.6.*", ">=0.2,<0.7"):
        assert v in SpecifierSet(requirement), requirement


def test_dir_lists_the_lazy_names():
    import nccl

    assert {"get_version", "show_versions", "VersionInfo", "LibraryInfo", "bindings",
            "__version__"} <= set(dir(nccl))
