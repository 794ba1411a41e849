"""nccl.core.memory.NcclMemoryResource and get_memory_resource (upstream 0.3.1):
a memory resource of the cuda.core in use (the real one, or nccl's shim on
ROCm), whose buffers come from ncclMemAlloc on its device and go back
through ncclMemFree.  The GPU paths run in subprocesses on the recording
stub library (a GPU-library family, not the host backend), with a stand-in
cuda.core package or the shim on the recording HIP runtime stub."""
from __future__ import annotations

import json
import re

import pytest

import nccl.core
import nccl.core.memory as memory
from conftest import build_stub, clean_env, run_python
from gpu_stub import build_stub as build_gpu_stub

# A stand-in for cuda.core with the part of its interface the resource uses;
# it logs device switches and the device current when a Buffer is made.
FAKE_CUDA_CORE = '''
import abc
current = [0]
log = []

class MemoryResource(abc.ABC):
    @abc.abstractmethod
    def allocate(self, size, stream=None): ...
    @abc.abstractmethod
    def deallocate(self, ptr, size, stream=None): ...

class Device:
    def __init__(self, device_id=None):
        self.device_id = current[0] if device_id is None else int(device_id)
    def set_current(self):
        log.append(("set_current", self.device_id))
        current[0] = self.device_id

class Stream:
    def __init__(self, name):
        self.name = name
    def sync(self):
        log.append(("sync", self.name))

class Buffer:
    @classmethod
    def from_handle(cls, ptr, size, mr=None):
        log.append(("buffer", current[0]))
        b = cls()
        b.handle, b.size, b.memory_resource = ptr, size, mr
        return b
    def close(self, stream=None):
        self.memory_resource.deallocate(self.handle, self.size, stream)
'''

STUB_CALLS = '''
import ctypes, os
stub = ctypes.CDLL(os.environ["NCCL_LIBRARY"])
stub.nccl4pyStubLastCall.restype = ctypes.c_char_p
def last():
    return stub.nccl4pyStubLastCall().decode()
'''

WITH_FAKE_CORE = STUB_CALLS + r'''
import json, sys, threading
import nccl.core
out = {"imported_core": "cuda.core" in sys.modules}
from nccl.core.memory import NcclMemoryResource, get_memory_resource
import cuda.core as core
out["subclass"] = issubclass(NcclMemoryResource, core.MemoryResource)
mr = get_memory_resource(1)
out["same_in_thread"] = get_memory_resource(1) is mr and type(mr) is NcclMemoryResource
other = []
t = threading.Thread(target=lambda: other.append(get_memory_resource(1)))
t.start(); t.join()
out["other_thread_differs"] = other[0] is not mr and other[0].device_id == 1
out["props"] = [mr.device_id, mr.is_device_accessible, mr.is_host_accessible, repr(mr)]
core.log.clear()
buf = mr.allocate(4096)
out["alloc_call"] = last()
out["buffer"] = [buf.handle, buf.size, buf.memory_resource is mr]
out["alloc_log"] = list(core.log)
out["current_after"] = core.current[0]
core.log.clear()
buf.close(core.Stream("s1"))
out["free_call"] = last()
out["free_log"] = list(core.log)
buf2 = nccl.core.mem_alloc(64, device=1)
out["mem_alloc"] = [type(buf2.memory_resource) is NcclMemoryResource,
                    buf2.memory_resource is mr, buf2.size]
print(json.dumps(out))
'''

WITH_SHIM = STUB_CALLS + r'''
import ctypes, json, sys
import nccl.core
from nccl import _runtime
from nccl.core.memory import NcclMemoryResource, get_memory_resource
import cuda.core as core
gpu = ctypes.CDLL(_runtime.info()["path"])
sets = lambda: gpu.gpuStubCallCount(b"hipSetDevice")
out = {"shim": core.Device.__module__,
       "subclass": issubclass(NcclMemoryResource, core.MemoryResource)}
before = sets()
buf = nccl.core.mem_alloc(256, device=1)
out["alloc_call"] = last()
out["set_device_calls"] = sets() - before
out["current_after"] = core.Device().device_id
out["buffer"] = [buf.handle, buf.size, buf.memory_resource is get_memory_resource(1),
                 type(buf).__module__]
buf.close()
out["free_call"] = last()
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def gpu_lib(tmp_path_factory):
    """The recording stub as a GPU library (its family is NCCL's, not the host's)."""
    return build_stub("libnccl.so.2", outdir=tmp_path_factory.mktemp("mr-stub"))


def _out_ptr(entry_name: str) -> int:
    from gen import api as gen_api

    table = gen_api.parse_table()
    return 0x5EED0000 + [e.pyname for e in table].index(entry_name)


def _run(code: str, env: dict[str, str]) -> dict:
    p = run_python(code, env, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_names_resolve_without_importing_cuda_core():
    assert {"NcclMemoryResource", "get_memory_resource"} <= set(memory.__all__)
    assert "NcclMemoryResource" in dir(memory)
    from nccl.core.memory import NcclMemoryResource, get_memory_resource  # noqa: F401

    assert NcclMemoryResource.__name__ == "NcclMemoryResource"
    assert NcclMemoryResource.__module__ == "nccl.core.memory"
    assert memory.NcclMemoryResource is NcclMemoryResource  # made once
    with pytest.raises(AttributeError, match="no attribute 'NoSuchName'"):
        memory.NoSuchName  # noqa: B018


def test_refused_on_the_host_backend():
    """The test process's library poses as the host backend: no GPU memory."""
    from nccl import _nccl

    assert _nccl.library_family() == "host"
    with pytest.raises(NotImplementedError, match="host backend has no GPU memory"):
        memory.NcclMemoryResource(0)
    with pytest.raises(NotImplementedError, match="mem_alloc"):
        memory.get_memory_resource(0)
    assert isinstance(nccl.core.mem_alloc(16), memory.HostBuffer)


@pytest.mark.parametrize("bad", ["0", 1.0, True, None])
def test_device_id_must_be_an_int(bad):
    with pytest.raises(TypeError, match="device_id must be an int"):
        memory.get_memory_resource(bad)


def test_with_cuda_core(tmp_path, gpu_lib):
    pkg = tmp_path / "cuda" / "core"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(FAKE_CUDA_CORE)
    out = _run(WITH_FAKE_CORE, clean_env(NCCL_LIBRARY=str(gpu_lib), NCCL4PY_PLATFORM="cuda",
                                         PYTHONPATH=str(tmp_path)))
    assert out["imported_core"] is False  # import nccl.core leaves cuda.core alone
    assert out["subclass"] and out["same_in_thread"] and out["other_thread_differs"]
    assert out["props"] == [1, True, False, "<NcclMemoryResource device_id=1>"]
    ptr = _out_ptr("mem_alloc")
    assert re.fullmatch(r"ncclMemAlloc ptr=out_ptr:0x[0-9a-f]+ size=size:4096", out["alloc_call"])
    assert out["buffer"] == [ptr, 4096, True]
    # made on device 1, then device 0 is current again
    assert out["alloc_log"] == [["set_current", 1], ["buffer", 1], ["set_current", 0]]
    assert out["current_after"] == 0
    # the stream is synchronized before ncclMemFree, which is not stream-ordered
    assert out["free_log"][0] == ["sync", "s1"]
    assert out["free_call"] == f"ncclMemFree ptr=ptr:{ptr:#x}"
    assert out["mem_alloc"] == [True, True, 64]


def test_with_the_shim_on_rocm(gpu_lib):
    out = _run(WITH_SHIM, clean_env(NCCL_LIBRARY=str(gpu_lib), NCCL4PY_PLATFORM="rocm",
                                    NCCL4PY_GPU_RUNTIME=str(build_gpu_stub())))
    assert out["shim"].startswith("nccl._hip_compat.cuda_core_shim")
    assert out["subclass"]
    ptr = _out_ptr("mem_alloc")
    assert re.fullmatch(r"ncclMemAlloc ptr=out_ptr:0x[0-9a-f]+ size=size:256", out["alloc_call"])
    assert out["set_device_calls"] == 2 and out["current_after"] == 0
    assert out["buffer"] == [ptr, 256, True, "nccl._hip_compat.cuda_core_shim._core"]
    assert out["free_call"] == f"ncclMemFree ptr=ptr:{ptr:#x}"

