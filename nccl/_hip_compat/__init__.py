"""ROCm compatibility: a cuda.core shim on nccl's C runtime layer.

:func:`register` is called by ``import nccl``.  It installs
:mod:`nccl._hip_compat.cuda_core_shim` as ``cuda.core`` (every spelling,
including ``cuda.core.experimental``) when all of these hold:

* the platform decision of the loader (``nccl._discovery.platform()``,
  overridden by ``NCCL4PY_PLATFORM=rocm|cuda``) is ROCm;
* ``cuda.core`` is neither imported already nor importable for real
  (``importlib.util.find_spec``; nothing heavy is imported).

A real ``cuda`` namespace package (e.g. from cuda-bindings) is kept and the
shim is attached to it as ``cuda.core``, so ``import cuda.bindings`` keeps
working; without one, an empty ``cuda`` package is created in memory.  No
``cuda`` package exists on disk.  Registering twice is a no-op; on CUDA it
never happens.

:func:`core_module` is what ``nccl.core`` uses for Device/Buffer: cuda.core
(real or the registered shim) when importable, else the shim's classes, so
nccl4py needs neither cuda.core nor hip-python.
"""
from __future__ import annotations

import importlib
import importlib.machinery
import sys
import types
from typing import Any

__all__ = ["register", "registered", "core_module"]


def registered() -> bool:
    from .cuda_core_shim import is_shim_module

    return is_shim_module(sys.modules.get("cuda.core"))


def _rocm_platform() -> bool:
    from nccl._discovery import platform

    try:
        return platform()[0] == "rocm"
    except ValueError:  # a bad NCCL4PY_PLATFORM: the loader reports it when used
        return False


def _real_cuda_core_available() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("cuda.core") is not None
    except (ImportError, ValueError):
        return False


def register() -> bool:
    """Install the shim as ``cuda.core`` if the rules above allow it; True if
    the shim is (now) ``cuda.core``."""
    if "cuda.core" in sys.modules:
        return registered()
    if not _rocm_platform() or _real_cuda_core_available():
        return False
    from .cuda_core_shim import build_modules

    cuda_pkg: Any = sys.modules.get("cuda")
    if cuda_pkg is None:
        try:
            # a real namespace package (find_spec imported it)
            cuda_pkg = importlib.import_module("cuda")
        except ImportError:
            cuda_pkg = types.ModuleType("cuda", "In-memory cuda package holding nccl's "
                                                "HIP shim of cuda.core.")
            cuda_pkg.__spec__ = importlib.machinery.ModuleSpec("cuda", None, is_package=True)
            cuda_pkg.__path__ = []
            sys.modules["cuda"] = cuda_pkg
    for key, mod in build_modules().items():
        sys.modules.setdefault(key, mod)
    cuda_pkg.core = sys.modules["cuda.core"]
    return True


def core_module():
    """The module providing Device/Buffer/MemoryResource for nccl.core."""
    mod = sys.modules.get("cuda.core")
    if mod is not None:
        return mod
    if _rocm_platform():
        register()
        mod = sys.modules.get("cuda.core")
        if mod is not None:
            return mod
    else:
        try:
            import cuda.core as mod

            return mod
        except ImportError:
            pass
    from .cuda_core_shim import _core

    return _core
