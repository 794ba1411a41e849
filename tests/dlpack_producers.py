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
