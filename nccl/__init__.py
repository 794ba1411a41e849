"""nccl4py: Python bindings for NCCL (NVIDIA) and RCCL (AMD) with a C core.

``nccl.bindings`` is the low-level API (every C function, ints and pointers).
Importing this package loads no library; the first call does.
"""
from ._version import __version__

__all__ = ["__version__", "bindings"]


def __getattr__(name):
    if name == "bindings":
        import importlib

        return importlib.import_module("nccl.bindings")
    raise AttributeError(f"module 'nccl' has no attribute {name!r}")
