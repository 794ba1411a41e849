"""nccl's cuda.core shim (nccl._hip_compat) on the recording HIP stub:
surface under every module spelling, behaviour, and the registration rules
(in subprocesses on a simulated ROCm platform)."""
from __future__ import annotations

import importlib
import json
import sys
import types

import numpy as np
import pytest

from conftest import clean_env, run_python
from gpu_stub import runtime_is_stub, use_stub

STUB = use_stub()

from nccl._hip_compat.cuda_core_shim import SERVED, build_modules  # noqa: E402

SPELLINGS = [p + s for p in ("cuda.core", "cuda.core.experimental") for s in SERVED]


@pytest.fixture(scope="module")
def mods():
    if not runtime_is_stub():
        pytest.skip("the process's GPU runtime is not the test stub")
    return build_modules()


def test_every_name_under_every_spelling(mods):
    assert sorted(mods) == sorted(SPELLINGS)
    for key in SPELLINGS:
        mod = mods[key]
        _, names = SERVED[key.replace(".experimental", "")[len("cuda.core"):]]
        for name in names:
            assert getattr(mod, name) is not None, (key, name)
        assert mod.__spec__.name == key.replace(".experimental", "")
    core = mods["cuda.core"]
    for sub in ("system", "utils", "typing", "_stream", "_memory", "experimental"):
        assert isinstance(getattr(core, sub), types.ModuleType)
    assert mods["cuda.core.experimental._memory._buffer"] is mods["cuda.core._memory._buffer"]
    assert core.experimental is core
    assert mods["cuda.core._stream"].Stream is core.Stream
    assert mods["cuda.core._memory._buffer"].Buffer is core.Buffer
    assert mods["cuda.core.typing"].IsStreamT is mods["cuda.core.typing"].IsStreamType
    assert mods["cuda.core.typing"].DevicePointerT is mods["cuda.core.typing"].DevicePointerType


@pytest.mark.parametrize("key", SPELLINGS)
def test_unknown_names_raise_the_documented_error(mods, key):
    with pytest.raises(AttributeError, match="is not provided by the HIP shim"):
        getattr(mods[key], "launch")


def test_device(mods):
    core = mods["cuda.core"]
    d0 = core.Device(0)
    assert d0.device_id == 0 and core.Device(0) is d0
    assert mods["cuda.core.system"].get_num_devices() == 2
    d1 = core.Device(1)
    d1.set_current()
    assert core.Device() is d1
    d0.set_current()
    assert core.Device().device_id == 0
    assert d1.name == "Stub GPU 1" and d1.pci_bus_id == "0000:11:00.0"
    with pytest.raises(ValueError, match="out of range"):
        core.Device(2)
    with pytest.raises(AttributeError, match="Device.launch is not provided by the HIP shim"):
        d0.launch
    assert d0.default_stream.handle == 0
    assert d0.default_stream.__cuda_stream__() == (0, 0)
    d0.sync()
    assert repr(d0) == "<Device id=0 (HIP shim)>"


def test_streams(mods):
    core = mods["cuda.core"]
    s = core.Device(1).create_stream()
    assert s.handle != 0 and s.__cuda_stream__() == (0, s.handle)
    s.sync()
    assert s.is_done
    from nccl import _nccl

    assert _nccl.resolve_stream(s) == s.handle
    borrowed = core.Stream.from_handle(s.handle)
    assert borrowed == s
    wrapped = core.Device(0).create_stream(s)
    assert wrapped.handle == s.handle
    s.close()
    s.close()
    with pytest.raises(RuntimeError):
        core.Stream()

    class Bad:
        def __cuda_stream__(self):
            return (1, 0)

    with pytest.raises(RuntimeError, match="version"):
        core.Device(0).create_stream(Bad())


def test_buffer_and_dlpack(mods):
    core = mods["cuda.core"]
    buf = core.Device(1).allocate(32)
    assert buf.size == 32 and buf.handle != 0 and buf.device_id == 1
    assert buf.is_device_accessible and not buf.is_host_accessible
    assert buf.__dlpack_device__() == (10, 1)  # kDLROCM
    from nccl import _nccl

    for kw in ({}, {"max_version": (1, 0)}):
        cap = buf.__dlpack__(stream=0, **kw)
        assert type(cap).__name__ == "PyCapsule"
    # nccl's own buffer resolution consumes the export: 32 int8 on ROCm device 1
    assert _nccl.resolve_buffer(buf, "buf", True)[1:] == (32, 0, 10, 1, False)
    with pytest.raises(BufferError):
        buf.__dlpack__(copy=True)
    with pytest.raises(RuntimeError, match="cannot be instantiated"):
        core.Buffer()
    other = core.Device(0).allocate(32)
    buf.copy_from(other, stream=0)
    buf.close()
    buf.close()
    assert buf.handle == 0
    with pytest.raises(ValueError):
        core.Device(0).allocate(0)
    # a DLPack export keeps the buffer alive after the last reference is gone
    cap = other.__dlpack__()
    del other
    import gc

    gc.collect()
    del cap


def test_memory_resource_is_abstract(mods):
    core = mods["cuda.core"]
    with pytest.raises(TypeError):
        core.MemoryResource()
    assert core.Device(0).memory_resource.device_id == 0


def test_strided_memory_view(mods):
    utils = mods["cuda.core.utils"]
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    v = utils.StridedMemoryView(a, stream_ptr=-1)
    assert v.ptr == a.ctypes.data and v.shape == (3, 4) and v.strides is None
    assert v.dtype == np.float32 and v.device_id == -1 and not v.is_device_accessible
    assert v.exporting_obj is a and not v.readonly
    ro = np.arange(3, dtype=np.int64)
    ro.flags.writeable = False
    assert utils.StridedMemoryView(ro, -1).readonly

    buf = mods["cuda.core"].Device(1).allocate(16)
    with pytest.raises(BufferError, match="ambiguous"):
        utils.StridedMemoryView(buf)
    dv = utils.StridedMemoryView(buf, stream_ptr=0)
    assert dv.ptr == buf.handle and dv.device_id == 1 and dv.is_device_accessible
    assert dv.shape == (16,) and dv.dtype == np.int8

    class CAI:  # __cuda_array_interface__ v3 producer over stub "device" memory
        def __init__(self, b):
            self.__cuda_array_interface__ = {"shape": (4,), "typestr": "<f4",
                                             "data": (b.handle, False), "version": 3,
                                             "strides": None}

    cv = utils.StridedMemoryView(CAI(buf), stream_ptr=0)
    assert cv.ptr == buf.handle and cv.dtype == np.float32 and cv.device_id == 1

    @utils.args_viewable_as_strided_memory((1,))
    def f(x, arr):
        return arr.view(-1)

    assert f(None, a).shape == (3, 4)
    with pytest.raises(AttributeError, match="not provided by the HIP shim"):
        v.copy_to
    buf.close()


def test_typing(mods):
    t = mods["cuda.core.typing"]
    assert isinstance(mods["cuda.core"].Device(0).default_stream, t.IsStreamType)
    assert not isinstance(object(), t.IsStreamT)


# ------------------------------------------------------------- registration

PROBE = """
import json, sys
before = {k for k in sys.modules if k == "cuda" or k.startswith("cuda.")}
import nccl
import nccl as again  # a second import is a no-op
from nccl._hip_compat import register
register()
out = {"before": sorted(before), "core": "cuda.core" in sys.modules}
if out["core"]:
    from cuda.core import Device
    from cuda.core.experimental import Buffer
    import cuda.core.experimental._memory._buffer as mb
    out["device"] = Device.__module__
    out["id"] = Device(0).device_id
    out["same"] = mb.Buffer is Buffer and sys.modules["cuda.core.experimental"] is sys.modules["cuda.core"]
    out["numpy"] = "numpy" in sys.modules
print(json.dumps(out))
"""


def _probe(env, code=PROBE):
    p = run_python(code, env)
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_registered_on_rocm():
    out = _probe(clean_env(NCCL4PY_PLATFORM="rocm", NCCL4PY_GPU_RUNTIME=str(STUB)))
    assert out["core"] and out["device"].startswith("nccl._hip_compat.cuda_core_shim")
    assert out["id"] == 0 and out["same"]


def test_import_nccl_stays_light_on_rocm():
    code = ("import sys, nccl\nimport json\n"
            "print(json.dumps(sorted(m for m in ('numpy', 'nccl._hip_compat.cuda_core_shim._core',"
            " 'nccl._nccl', 'typing') if m in sys.modules)))")
    p = run_python(code, clean_env(NCCL4PY_PLATFORM="rocm", NCCL4PY_GPU_RUNTIME=str(STUB)))
    assert p.returncode == 0, p.stderr
    loaded = json.loads(p.stdout)
    assert "numpy" not in loaded and "nccl._hip_compat.cuda_core_shim._core" not in loaded


def test_never_on_cuda():
    out = _probe(clean_env(NCCL4PY_PLATFORM="cuda", NCCL4PY_GPU_RUNTIME=str(STUB)))
    assert not out["core"]


def test_real_cuda_namespace_package_is_kept(tmp_path):
    pkg = tmp_path / "cuda" / "bindings"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("MARK = 'real bindings'\n")
    code = ("import cuda.bindings\nb1 = cuda.bindings.MARK\n" + PROBE.replace(
        "print(json.dumps(out))",
        "import cuda.bindings as b2, cuda\nout['bindings'] = [b1, b2.MARK]\n"
        "out['cuda_is_namespace'] = cuda.__file__ is None and len(list(cuda.__path__)) > 0\n"
        "out['core_attached'] = cuda.core is sys.modules['cuda.core']\n"
        "print(json.dumps(out))"))
    env = clean_env(NCCL4PY_PLATFORM="rocm", NCCL4PY_GPU_RUNTIME=str(STUB),
                    PYTHONPATH=str(tmp_path))
    out = _probe(env, code)
    assert out["core"] and out["bindings"] == ["real bindings"] * 2
    assert out["cuda_is_namespace"] and out["core_attached"]
    # and cuda.bindings imported after nccl too
    code2 = ("import nccl, sys\nimport cuda.bindings\nfrom cuda.core import Device\n"
             "print(cuda.bindings.MARK, Device.__module__)")
    p = run_python(code2, env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["real", "bindings", "nccl._hip_compat.cuda_core_shim._core"]


def test_a_real_cuda_core_wins(tmp_path):
    core = tmp_path / "cuda" / "core"
    core.mkdir(parents=True)
    (core / "__init__.py").write_text("REAL = True\n")
    code = "import nccl, cuda.core\nprint(getattr(cuda.core, 'REAL', False))"
    p = run_python(code, clean_env(NCCL4PY_PLATFORM="rocm", NCCL4PY_GPU_RUNTIME=str(STUB),
                                   PYTHONPATH=str(tmp_path)))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "True"


def test_no_cuda_package_on_disk():
    import nccl

    root = __import__("pathlib").Path(nccl.__file__).resolve().parent.parent
    assert not (root / "cuda").exists()
