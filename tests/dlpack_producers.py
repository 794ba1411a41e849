"""Hand-written array producers for the buffer-resolution tests: DLPack
producers handing out capsules made by tests/producers.c (whose deleters
count their calls), and a __cuda_array_interface__ object."""
from __future__ import annotations

import ctypes
import subprocess
import sysconfig
from pathlib import Path

from conftest import ROOT, cc

CPU, CUDA = 1, 2


def build(outdir: Path) -> ctypes.PyDLL:
    """Compile tests/producers.c into outdir and load it."""
    out = outdir / "libproducers.so"
    inc = sysconfig.get_paths()["include"]
    subprocess.run([cc(), "-std=c11", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
                    f"-I{inc}", f"-I{ROOT / 'src'}", "-o", str(out),
                    str(ROOT / "tests" / "producers.c")], check=True)
    lib = ctypes.PyDLL(str(out))
    lib.t_make_capsule.argtypes = [ctypes.py_object]
    lib.t_make_capsule.restype = ctypes.py_object
    lib.t_deleter_calls.restype = ctypes.c_long
    lib.t_exchange_capsule.argtypes = [ctypes.c_int]
    lib.t_exchange_capsule.restype = ctypes.py_object
    lib.t_exchange_address.argtypes = [ctypes.c_int]
    lib.t_exchange_address.restype = ctypes.py_object
    lib.t_formatted.argtypes = [ctypes.c_char_p, ctypes.c_ssize_t]
    lib.t_formatted.restype = ctypes.py_object
    return lib


def spec(data=0x1000, shape=(4,), strides=None, code=2, bits=32, lanes=1, device=(CUDA, 3),
         offset=0, flags=0, major=1, versioned=True, name=None):
    return (versioned, data, tuple(shape), None if strides is None else tuple(strides), code,
            bits, lanes, device[0], device[1], offset, flags, major, name)


class Producer:
    """A DLPack producer handing out capsules made by the C helper."""

    def __init__(self, lib, **kw):
        self.lib = lib
        self.spec = spec(**kw)

    def __dlpack__(self, *, stream=None, max_version=None):
        return self.lib.t_make_capsule(self.spec)

    def __dlpack_device__(self):
        return (self.spec[7], self.spec[8])


class LegacyProducer(Producer):
    """Refuses the max_version keyword (pre-DLPack-1.0 signature)."""

    def __dlpack__(self, stream=None):
        return self.lib.t_make_capsule(self.spec)


class Deleters:
    def __init__(self, lib):
        self.lib = lib
        self.start = lib.t_deleter_calls()

    @property
    def calls(self):
        return self.lib.t_deleter_calls() - self.start


def exchange_class(lib, which, legacy=False):
    """A class offering producer `which` of the DLPack C exchange API (legacy:
    as an address attribute)."""
    attrs = {"__init__": lambda self, **kw: setattr(self, "_dl", spec(**kw))}
    if legacy:
        attrs["__c_dlpack_exchange_api__"] = lib.t_exchange_address(which)
    else:
        attrs["__dlpack_c_exchange_api__"] = lib.t_exchange_capsule(which)
    return type(f"Exchange{which}{'L' if legacy else ''}", (), attrs)


class CAI:
    def __init__(self, **fields):
        self.d = {"shape": (2, 3), "typestr": "<f4", "data": (0x3000, False), "version": 3}
        self.d.update(fields)
        for k in [k for k, v in fields.items() if v is KeyError]:
            del self.d[k]

    @property
    def __cuda_array_interface__(self):
        return self.d


# ------------------------------------------------ Python-level deleters

class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32),
                ("device_id", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _Versioned(ctypes.Structure):
    pass


class _Legacy(ctypes.Structure):
    pass


_DELETER_V = ctypes.CFUNCTYPE(None, ctypes.POINTER(_Versioned))
_DELETER_L = ctypes.CFUNCTYPE(None, ctypes.POINTER(_Legacy))
_Versioned._fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                       ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER_V),
                       ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]
_Legacy._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                    ("deleter", _DELETER_L)]

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class PyDeleterProducer:
    """A DLPack producer written in Python (ctypes): its managed tensors'
    deleter is a Python function (a ctypes callback) that counts its calls
    in ``self.calls`` and records whether an exception was pending when it
    ran (``self.pending``: ctypes cannot even build the callback's argument
    then).  The tensor describes ``shape`` elements of (code, bits) at
    ``data`` (a NumPy array's memory by default)."""

    def __init__(self, shape=(4,), strides=None, code=2, bits=32, device=(CPU, 0), flags=0,
                 major=1, versioned=True, data=None):
        import numpy as np

        self.calls = 0
        self.pending = []
        self.versioned = versioned
        self.array = np.zeros(64, np.uint8)
        self._shape = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        self._strides = None if strides is None else (ctypes.c_int64 * len(shape))(*strides)
        t = _DLTensor(self.array.ctypes.data if data is None else data, device[0], device[1],
                      len(shape), code, bits, 1, self._shape,
                      self._strides if self._strides is not None else None, 0)
        if versioned:
            self._deleter = _DELETER_V(self._delete)
            self._m = _Versioned(major, 1, None, self._deleter, flags, t)
        else:
            self._deleter = _DELETER_L(self._delete)
            self._m = _Legacy(t, None, self._deleter)

    def _delete(self, _managed):
        import sys

        self.pending.append(sys.exc_info()[0] is not None)
        self.calls += 1

    @property
    def address(self) -> int:
        return ctypes.addressof(self._m)

    def __dlpack__(self, *, stream=None, max_version=None):
        name = b"dltensor_versioned" if self.versioned else b"dltensor"
        return _capsule_new(self.address, name, None)  # no destructor: consumed or leaked

    def __dlpack_device__(self):
        return (self._m.dl_tensor.device_type, self._m.dl_tensor.device_id)


class _ExchangeHeader(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("prev_api", ctypes.c_void_p)]


_MANAGED_FROM_PY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p,
                                    ctypes.POINTER(ctypes.c_void_p))


class _ExchangeApi(ctypes.Structure):
    _fields_ = [("header", _ExchangeHeader), ("allocator", ctypes.c_void_p),
                ("managed_from_py", _MANAGED_FROM_PY), ("to_py", ctypes.c_void_p),
                ("dltensor_from_py", ctypes.c_void_p), ("current_work_stream", ctypes.c_void_p)]


def py_exchange_class():
    """A class offering the DLPack C exchange API from Python: its
    managed_tensor_from_py_object_no_sync hands out the versioned tensor of
    the instance's PyDeleterProducer (``self.producer``)."""
    def managed(py_object, out):
        obj = ctypes.cast(py_object, ctypes.py_object).value
        out[0] = obj.producer.address
        return 0

    fn = _MANAGED_FROM_PY(managed)
    api = _ExchangeApi(_ExchangeHeader(1, 2, None), None, fn, None, None, None)
    cls = type("PyExchange", (), {
        "__init__": lambda self, **kw: setattr(self, "producer", PyDeleterProducer(**kw)),
        "__dlpack_c_exchange_api__": _capsule_new(ctypes.addressof(api),
                                                  b"dlpack_exchange_api", None),
        "_keep": (fn, api),
    })
    return cls
