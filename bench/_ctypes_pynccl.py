"""A minimal ctypes wrapper of the NCCL C API, in the style of vLLM's pynccl.

A benchmark baseline for bench/core_overhead.py: the usual pure-Python way
of calling NCCL (``ctypes.CDLL`` plus declared ``argtypes``/``restype``, a
method per C function, every status checked and turned into an exception).
Only what the benchmark calls is declared.
"""
from __future__ import annotations

import ctypes

nccl_result_t = ctypes.c_int
nccl_comm_t = ctypes.c_void_p
nccl_datatype_t = ctypes.c_int
nccl_redop_t = ctypes.c_int
buffer_t = ctypes.c_void_p
stream_t = ctypes.c_void_p

# name -> (restype, argtypes)
_SIGNATURES = {
    "ncclGetErrorString": (ctypes.c_char_p, [nccl_result_t]),
    "ncclGetVersion": (nccl_result_t, [ctypes.POINTER(ctypes.c_int)]),
    "ncclAllReduce": (nccl_result_t, [buffer_t, buffer_t, ctypes.c_size_t, nccl_datatype_t,
                                      nccl_redop_t, nccl_comm_t, stream_t]),
}


class CtypesNccl:
    """Loads an NCCL-compatible library and exposes a few calls through ctypes."""

    def __init__(self, path: str):
        self.lib = ctypes.CDLL(path)
        self._fns = {}
        for name, (restype, argtypes) in _SIGNATURES.items():
            fn = getattr(self.lib, name)
            fn.restype = restype
            fn.argtypes = argtypes
            self._fns[name] = fn

    def get_error_string(self, result: int) -> str:
        return self._fns["ncclGetErrorString"](result).decode()

    def check(self, result: int) -> None:
        if result != 0:
            raise RuntimeError(f"NCCL error {result}: {self.get_error_string(result)}")

    def get_version(self) -> int:
        v = ctypes.c_int()
        self.check(self._fns["ncclGetVersion"](ctypes.byref(v)))
        return v.value

    def all_reduce(self, sendbuf_ptr: int, recvbuf_ptr: int, count: int, dtype: int, op: int,
                   comm: int, stream: int) -> None:
        self.check(self._fns["ncclAllReduce"](sendbuf_ptr, recvbuf_ptr, count, dtype, op,
                                              comm, stream))
