"""nccl4py: Python bindings for NCCL (NVIDIA) and RCCL (AMD) with a C core.

``nccl.bindings`` is the low-level API (every C function, ints and pointers).
``nccl.core`` is the Pythonic API.  ``nccl.get_version()`` returns the
versions of nccl4py, of its bindings and of the library in use (see
``nccl._diagnostics``).  Importing this package loads no library; the first
call does.
"""
from ._source_tree import use_installed_copy as _use_installed_copy

# A source checkout without its build: take the submodules from the installed
# copy (see nccl._source_tree).  Before anything else is imported.
_use_installed_copy(__path__)

from ._version import __version__  # noqa: E402
from ._hip_compat import register as _register_cuda_core_shim  # noqa: E402

_register_cuda_core_shim()  # ROCm only, when cuda.core is not installed (see nccl._hip_compat)

__all__ = ["__version__", "LibraryInfo", "VersionInfo", "bindings", "get_version",
           "show_versions"]


def __getattr__(name):
    if name == "bindings":
        import importlib

        return importlib.import_module("nccl.bindings")
    if name in ("get_version", "show_versions", "VersionInfo", "LibraryInfo"):
        from . import _diagnostics

        return getattr(_diagnostics, name)
    raise AttributeError(f"module 'nccl' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
