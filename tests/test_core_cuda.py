"""nccl4py 0.6's nccl.core.cuda and nccl.core.buffer submodules.

The resolvers of stream and event handles run anywhere; the ones that make
cuda.core objects run in subprocesses with a stand-in cuda.core package (as
tests/test_core_memory.py does) and with nccl's shim on the recording HIP
runtime stub."""
from __future__ import annotations

import importlib.util
import json

import pytest

import nccl.core
from conftest import build_stub, clean_env, run_python
from gpu_stub import build_stub as build_gpu_stub
from test_core_memory import FAKE_CUDA_CORE

# nccl4py 0.6.0's public names of the two modules
CUDA_NAMES = ("CudaDeviceContext", "Device", "Event", "Stream", "NcclDeviceSpec",
              "NcclEventSpec", "NcclStreamSpec", "get_cuda_device", "get_cuda_stream",
              "get_device_id", "get_event_ptr", "get_stream_ptr")
NO_CUDA_CORE = (importlib.util.find_spec("cuda") is None
                or importlib.util.find_spec("cuda.core") is None)
no_cuda_core = pytest.mark.skipif(not NO_CUDA_CORE, reason="cuda.core is installed")


def test_submodules_import_without_cuda_core():
    import nccl.core.buffer as buffer
    import nccl.core.cuda as cuda

    assert nccl.core.buffer is buffer and nccl.core.cuda is cuda
    assert buffer.__all__ == ["mem_alloc", "mem_free"]
    assert buffer.mem_alloc is nccl.core.mem_alloc and buffer.mem_free is nccl.core.mem_free
    assert set(CUDA_NAMES) <= set(dir(cuda))
    for name in set(CUDA_NAMES) - {"Event"}:
        getattr(cuda, name)
    assert cuda.NcclEventSpec is nccl.core.NcclEventSpec
    with pytest.raises(AttributeError, match="no attribute 'bogus'"):
        cuda.bogus  # noqa: B018


@no_cuda_core
def test_without_cuda_core_event_names_what_is_missing():
    from nccl._hip_compat import core_module

    from nccl.core import cuda

    assert cuda.Device is core_module().Device and cuda.Stream is core_module().Stream
    with pytest.raises(ImportError, match="cuda.core is not installed .pip install cuda-core"):
        from nccl.core.cuda import Event  # noqa: F401


class _CudaStream:
    def __init__(self, h):
        self.h = h

    def __cuda_stream__(self):
        return (0, self.h)


class _Handle:
    def __init__(self, h):
        self.handle = h


class _TorchLike:
    cuda_stream = 0x77


def test_get_stream_ptr():
    from nccl.core.cuda import get_stream_ptr

    assert get_stream_ptr() == 0 and get_stream_ptr(None) == 0
    assert get_stream_ptr(0x1234) == 0x1234
    assert get_stream_ptr(_CudaStream(0x55)) == 0x55
    assert get_stream_ptr(_Handle(0x66)) == 0x66
    assert get_stream_ptr(_TorchLike()) == 0x77
    with pytest.raises(TypeError, match="stream must not be a bool"):
        get_stream_ptr(True)
    for bad in (1.5, "s", object()):
        with pytest.raises(TypeError, match="__cuda_stream__"):
            get_stream_ptr(bad)


def test_get_event_ptr_is_the_one_collectives_use():
    """Its cases are tests/test_coll_config.py::test_event_handles."""
    from nccl.core.coll_config import event_handle
    from nccl.core.cuda import get_event_ptr

    assert get_event_ptr is event_handle
    assert get_event_ptr() == 0 and get_event_ptr(_Handle(0x99)) == 0x99


def test_get_device_id_of_an_int_needs_no_gpu():
    from nccl.core.cuda import get_cuda_device, get_cuda_stream, get_device_id

    assert get_device_id(3) == 3
    for f in (get_device_id, get_cuda_device, get_cuda_stream):
        with pytest.raises(TypeError, match="must not be a bool"):
            f(True)


@pytest.mark.nccl(nranks=2)
def test_buffer_mem_alloc_on_host_memory(comm):
    """On the host backend mem_alloc gives host memory the collectives take."""
    import numpy as np

    from nccl.core.buffer import mem_alloc, mem_free
    from nccl.core.memory import HostBuffer

    buf = mem_alloc(64, device=0)
    assert isinstance(buf, HostBuffer) and buf.size == 64
    a = np.from_dlpack(buf).view(np.float32)
    a[:] = comm.rank + 1
    comm.allreduce(a, a, nccl.core.SUM)
    np.testing.assert_array_equal(np.frombuffer(buf.memoryview(), np.float32), np.full(16, 3.0))
    del a
    mem_free(buf)
    with pytest.raises(RuntimeError, match="freed"):
        buf.memoryview()


WITH_FAKE_CORE = r'''
import json
import cuda.core as core
import nccl.core.cuda as nc_cuda
out = {"same": [nc_cuda.Device is core.Device, nc_cuda.Event is core.Event,
                nc_cuda.Stream is core.Stream]}
dev = nc_cuda.get_cuda_device(1)
out["device"] = [dev.device_id, nc_cuda.get_cuda_device(dev) is dev,
                 nc_cuda.get_cuda_device().device_id, nc_cuda.get_device_id(dev),
                 nc_cuda.get_device_id()]
core.log.clear()
with nc_cuda.CudaDeviceContext(1):
    out["inside"] = core.current[0]
out["context_log"] = list(core.log)
s = nc_cuda.get_cuda_stream(0x42)
out["stream"] = [type(s) is core.Stream, s.handle, nc_cuda.get_stream_ptr(s),
                 nc_cuda.get_cuda_stream(s) is s,
                 nc_cuda.get_cuda_stream(None, 1).handle]
e = core.Event(0x31)
out["event"] = nc_cuda.get_event_ptr(e)
e.handle = 0
try:
    nc_cuda.get_event_ptr(e)
except RuntimeError as x:
    out["closed"] = str(x)
print(json.dumps(out))
'''

FAKE_EXTRAS = '''
class Event:
    def __init__(self, handle):
        self.handle = handle

class _DefaultStream:
    handle = 0

def _from_handle(cls, handle):
    s = cls("borrowed")
    s.handle = handle
    s.__cuda_stream__ = lambda: (0, handle)
    return s
Stream.from_handle = classmethod(_from_handle)
Device.default_stream = _DefaultStream()
'''


def test_with_cuda_core(tmp_path):
    pkg = tmp_path / "cuda" / "core"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(FAKE_CUDA_CORE + FAKE_EXTRAS)
    p = run_python(WITH_FAKE_CORE, clean_env(NCCL4PY_PLATFORM="cuda", PYTHONPATH=str(tmp_path)),
                   timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["same"] == [True, True, True]
    assert out["device"] == [1, True, 0, 1, 0]
    assert out["inside"] == 1 and out["context_log"] == [["set_current", 1], ["set_current", 0]]
    assert out["stream"] == [True, 0x42, 0x42, True, 0]
    assert out["event"] == 0x31 and out["closed"] == "Event has been closed"


WITH_SHIM = r'''
import ctypes, json
from nccl import _runtime
import nccl.core.cuda as nc_cuda
gpu = ctypes.CDLL(_runtime.info()["path"])
sets = lambda: gpu.gpuStubCallCount(b"hipSetDevice")
out = {"module": nc_cuda.Device.__module__}
before = sets()
with nc_cuda.CudaDeviceContext(1) as ctx:
    out["inside"] = nc_cuda.get_device_id()
out["after"] = nc_cuda.get_device_id()
out["set_device_calls"] = sets() - before
s = nc_cuda.get_cuda_stream(0x4000)
out["stream"] = [s.handle, nc_cuda.get_stream_ptr(s), nc_cuda.get_cuda_stream(s) is s]
try:
    nc_cuda.Event
except ImportError as e:
    out["event"] = str(e)
print(json.dumps(out))
'''


def test_with_the_shim_on_rocm(tmp_path):
    lib = build_stub("libnccl.so.2", outdir=tmp_path / "stub")
    p = run_python(WITH_SHIM, clean_env(NCCL_LIBRARY=str(lib), NCCL4PY_PLATFORM="rocm",
                                        NCCL4PY_GPU_RUNTIME=str(build_gpu_stub())), timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["module"].startswith("nccl._hip_compat.cuda_core_shim")
    assert (out["inside"], out["after"], out["set_device_calls"]) == (1, 0, 2)
    assert out["stream"] == [0x4000, 0x4000, True]
    assert "Event" in out["event"] and "cuda-core" in out["event"]
