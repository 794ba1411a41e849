"""The C GPU runtime layer (src/gpu_runtime.c, table src/gpu_runtime.h).

In this process it runs on the recording HIP stub (tests/gpu_runtime_stub.c,
2 fake devices, host memory); against the real CUDA runtime it runs in a
subprocess (no driver here: device count is 0 or a clear error).
"""
from __future__ import annotations

import ctypes
import glob
import os
import re
import sys
from pathlib import Path

import pytest

from conftest import clean_env, run_python
from gpu_stub import build_stub, runtime_is_stub, use_stub

STUB = use_stub()
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def rt():
    from nccl import _runtime

    if not runtime_is_stub():
        pytest.skip("the process's GPU runtime is not the test stub")
    return _runtime


@pytest.fixture(scope="module")
def stub_lib():
    lib = ctypes.CDLL(str(STUB))
    lib.gpuStubLastCall.restype = ctypes.c_char_p
    lib.gpuStubCallCount.restype = ctypes.c_long
    lib.gpuStubCallCount.argtypes = [ctypes.c_char_p]
    return lib


def test_table_symbols_pair_up():
    from nccl import _nccl

    table = _nccl.gpu_runtime_table()
    assert len(table) >= 20
    for hip, cuda, hip_alt, cuda_alt in table:
        assert hip.startswith("hip") and cuda.startswith("cuda"), (hip, cuda)
        assert hip[3:].lower().replace("r0600", "") == cuda[4:].lower().replace("_v2", "") or \
            (hip, cuda) in {("hipHostMalloc", "cudaHostAlloc"), ("hipHostFree", "cudaFreeHost")}


def test_stub_implements_every_entry(rt, stub_lib):
    info = rt.info()
    assert info["loaded"] and info["platform"] == "rocm" and info["missing"] == []
    from nccl import _nccl

    for hip, *_ in _nccl.gpu_runtime_table():
        assert stub_lib.gpuStubCallCount(hip.encode()) >= 0, hip


def test_devices(rt, stub_lib):
    assert rt.device_count() == 2
    rt.set_device(1)
    assert rt.get_device() == 1
    assert stub_lib.gpuStubLastCall() == b"hipGetDevice"
    rt.set_device(0)
    assert rt.device_name(1) == "Stub GPU 1"
    assert rt.pci_bus_id(0) == "0000:10:00.0"
    assert rt.runtime_version() == 60400000
    rt.device_synchronize()


def test_errors_carry_the_runtime_message(rt):
    with pytest.raises(rt.GpuRuntimeError) as ei:
        rt.set_device(7)
    e = ei.value
    assert isinstance(e, RuntimeError)
    assert e.status == 101 and e.function == "hipSetDevice"
    assert "hipErrorInvalidDevice" in str(e) and "invalid device ordinal" in str(e)
    assert rt.error_string(100) == "no ROCm-capable device is detected"
    assert rt.error_name(1) == "hipErrorInvalidValue"
    with pytest.raises(rt.GpuRuntimeError, match="invalid argument"):
        rt.free(12345)
    with pytest.raises(TypeError):
        rt.malloc("x")
    with pytest.raises(TypeError):
        rt.memcpy(1, 2)


def test_streams_and_events(rt, stub_lib):
    s = rt.stream_create()
    assert s != 0
    assert rt.stream_query(s) is True
    rt.stream_synchronize(s)
    a, b = rt.event_create(), rt.event_create(0)
    rt.event_record(a, s)
    rt.event_record(b)
    rt.event_synchronize(b)
    assert rt.event_elapsed(a, b) >= 0.0
    rt.event_destroy(a)
    rt.event_destroy(b)
    rt.stream_destroy(s)
    assert stub_lib.gpuStubLastCall() == b"hipStreamDestroy"

    class HasStream:
        def __cuda_stream__(self):
            return (0, 0)

    rt.stream_synchronize(HasStream())  # any stream object nccl accepts
    rt.stream_synchronize(None)


def test_memory(rt):
    n = 64
    d = rt.malloc(n)
    h = rt.malloc_host(n)
    assert rt.pointer_attributes(d) == (rt.MEMORY_DEVICE, 0)
    assert rt.pointer_attributes(h)[0] == rt.MEMORY_HOST
    rt.memset(d, 7, n)
    rt.memcpy(h, d, n)
    assert ctypes.string_at(h, n) == b"\x07" * n
    rt.memset_async(d, 1, n // 2, 0)
    rt.memcpy_async(h, d, n, None)
    assert ctypes.string_at(h, n) == b"\x01" * (n // 2) + b"\x07" * (n // 2)
    rt.free(d)
    rt.free_host(h)


def test_no_device_is_zero(tmp_path):
    code = ("from nccl import _runtime as r; print(r.device_count()); "
            "print(r.info()['platform'])")
    p = run_python(code, clean_env(NCCL4PY_GPU_RUNTIME=str(STUB), GPU_STUB_DEVICES="0"))
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["0", "rocm"]


def test_missing_runtime_is_a_clear_error(tmp_path):
    code = ("from nccl import _runtime as r\n"
            "try:\n    r.device_count()\nexcept r.GpuRuntimeError as e:\n    print('ERR', e)\n"
            "print(r.info()['loaded'])")
    p = run_python(code, clean_env(NCCL4PY_GPU_RUNTIME=str(tmp_path / "libnothere.so")))
    assert p.returncode == 0, p.stderr
    assert "Could not load a GPU runtime library" in p.stdout
    assert "libnothere.so" in p.stdout and p.stdout.split()[-1] == "False"


def test_candidates_follow_the_platform(tmp_path):
    code = "from nccl import _runtime as r; print(r.candidates())"
    rocm = run_python(code, clean_env(NCCL4PY_PLATFORM="rocm", ROCM_PATH=str(tmp_path), NCCL4PY_GPU_RUNTIME=None))
    assert rocm.returncode == 0, rocm.stderr
    assert f"{tmp_path}/lib/libamdhip64.so" in rocm.stdout and "cudart" not in rocm.stdout
    cuda = run_python(code, clean_env(NCCL4PY_PLATFORM="cuda", CUDA_HOME=str(tmp_path), NCCL4PY_GPU_RUNTIME=None))
    assert f"{tmp_path}/lib64/libcudart.so" in cuda.stdout and "amdhip" not in cuda.stdout


def _real_cudart() -> str | None:
    """A real libcudart: the nvidia-cuda-runtime wheel, CUDA_HOME, /usr/local/cuda."""
    pats = []
    for entry in sys.path:
        pats += [os.path.join(entry, "nvidia", sub, "lib", "libcudart.so.1[0-9]")
                 for sub in ("cu13", "cuda_runtime")]
    for root in (os.environ.get("CUDA_HOME"), "/usr/local/cuda", *glob.glob("/usr/local/cuda-*")):
        if root:
            pats += [os.path.join(root, d, "libcudart.so.1[0-9]") for d in ("lib64", "lib")]
    for pat in pats:
        found = sorted(glob.glob(pat))
        if found:
            return found[-1]
    return None


@pytest.mark.skipif(_real_cudart() is None,
                    reason="no real libcudart.so (pip install nvidia-cuda-runtime)")
def test_real_cudart_device_count_never_crashes():
    lib = _real_cudart()
    code = ("from nccl import _runtime as r\n"
            "print(r.info()['platform'], r.runtime_version())\n"
            "try:\n    print('COUNT', r.device_count())\n"
            "except r.GpuRuntimeError as e:\n    print('ERROR', e.status, e)\n"
            "print(r.error_string(100))\n")
    p = run_python(code, clean_env(NCCL4PY_GPU_RUNTIME=lib))
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith("cuda ")
    if lines[1].startswith("ERROR"):
        # the runtime's own message, e.g. cudaErrorInsufficientDriver (35): CUDA driver ...
        assert re.search(r"cudaGetDeviceCount failed: cudaError\w+ \(\d+\): \w", lines[1]), lines[1]
    else:
        assert int(lines[1].split()[1]) >= 0
    assert "CUDA-capable device" in lines[2]


def test_the_layer_is_the_table():
    """The C symbols bound, the Python functions and nccl._runtime's names all
    come from src/gpu_runtime.def."""
    from gen import gpu as gen_gpu

    from nccl import _nccl, _runtime

    fns, pys = gen_gpu.parse_table()
    assert _nccl.gpu_runtime_table() == [
        (f.hip[0], f.cuda[0], (f.hip[1:] or [""])[0], (f.cuda[1:] or [""])[0]) for f in fns]
    assert sorted(n for n in dir(_nccl) if n.startswith("gpu_runtime_")) == \
        sorted(f"gpu_runtime_{p.name}" for p in pys)
    for p in pys:
        assert getattr(_runtime, p.name) is getattr(_nccl, f"gpu_runtime_{p.name}")
        assert p.name in _runtime.__all__
    assert all(hasattr(_runtime, n) for n in _runtime.__all__)
