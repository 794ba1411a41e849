"""nccl.show_versions() / nccl.get_version() and the extended python -m nccl."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from conftest import clean_env, host_available, run_python


def test_library_info_form():
    from nccl._diagnostics import LibraryInfo, VersionInfo, decode_version

    info = LibraryInfo("2.30.4", None, "/x/libnccl.so.2")
    assert str(info) == "2.30.4 @ /x/libnccl.so.2"
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.version = "1"  # type: ignore[misc]
    v = VersionInfo("0.1.0", info, None)
    assert v.nccl is info and v.nccl_ep is None
    assert decode_version(23004) == "2.30.4" and decode_version(2708) == "2.7.8"


@pytest.mark.skipif(not host_available(), reason="host backend not built")
def test_get_version_and_show_versions_on_host():
    code = ("import nccl._diagnostics as s, io\n"
            "v = s.get_version(); print(v.nccl4py, v.nccl.version, v.nccl.path, v.nccl_ep)\n"
            "f = io.StringIO(); s.show_versions(f); print(f.getvalue())\n")
    p = run_python(code, clean_env(NCCL4PY_BACKEND="host"))
    assert p.returncode == 0, p.stderr
    first = p.stdout.splitlines()[0].split()
    assert first[1] == "2.30.4" and first[2].endswith("libnccl4py_host.so") and first[3] == "None"
    assert "interop packages:" in p.stdout and "GPU runtime:" in p.stdout


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
