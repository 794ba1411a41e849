"""The GPU runtime layer: HIP (``libamdhip64.so``) or the CUDA runtime
(``libcudart.so``), opened lazily by the C core (src/gpu_runtime.c).

It serves nccl's cuda.core shim and ``nccl.core``'s device and memory
helpers, so nccl4py needs neither cuda.core nor hip-python.  Failures raise
:class:`GpuRuntimeError` (a ``RuntimeError``) with the runtime's own message.

Which library (``candidates()``; the C core tries them in order):

1. ``NCCL4PY_GPU_RUNTIME`` (a path or a soname): used alone.  Its family
   (HIP or CUDA) follows from its name, else from its symbols.
2. Otherwise the platform decision of the NCCL loader
   (``nccl._discovery.platform()``, ``NCCL4PY_PLATFORM=rocm|cuda`` overrides):
   - ROCm: ``$ROCM_PATH/lib``, ``$HIP_PATH/lib``, ``/opt/rocm/lib``, then the
     dynamic loader's search path (``libamdhip64.so``, ``.so.7``, ``.so.6``);
   - CUDA: the nvidia wheels (``nvidia/cu13/lib``, ``nvidia/cuda_runtime/lib``),
     ``$CUDA_HOME/lib64`` (and ``$CUDA_PATH``), ``find_library("cudart")``, then
     the loader's search path (``libcudart.so.13``, ``.so.12``, ``libcudart.so``).
"""
from __future__ import annotations

import os
import sys

from nccl import _nccl

__all__ = [
    "GpuRuntimeError", "candidates", "info", "device_count", "get_device", "set_device",
    "device_name", "pci_bus_id", "device_synchronize", "runtime_version", "stream_create",
    "stream_destroy", "stream_synchronize", "stream_query", "event_create", "event_destroy",
    "event_record", "event_synchronize", "event_elapsed", "malloc", "free", "malloc_host",
    "free_host", "memcpy", "memcpy_async", "memset", "memset_async", "pointer_attributes",
    "error_string", "error_name", "platform", "MEMORY_UNREGISTERED", "MEMORY_HOST",
    "MEMORY_DEVICE", "MEMORY_MANAGED",
]

GpuRuntimeError = _nccl.GpuRuntimeError

# memory types of pointer_attributes()
MEMORY_UNREGISTERED, MEMORY_HOST, MEMORY_DEVICE, MEMORY_MANAGED = 0, 1, 2, 3

info = _nccl.gpu_runtime_info
device_count = _nccl.gpu_runtime_device_count
get_device = _nccl.gpu_runtime_get_device
set_device = _nccl.gpu_runtime_set_device
device_name = _nccl.gpu_runtime_device_name
pci_bus_id = _nccl.gpu_runtime_pci_bus_id
device_synchronize = _nccl.gpu_runtime_device_synchronize
runtime_version = _nccl.gpu_runtime_runtime_version
stream_create = _nccl.gpu_runtime_stream_create
stream_destroy = _nccl.gpu_runtime_stream_destroy
stream_synchronize = _nccl.gpu_runtime_stream_synchronize
stream_query = _nccl.gpu_runtime_stream_query
event_create = _nccl.gpu_runtime_event_create
event_destroy = _nccl.gpu_runtime_event_destroy
event_record = _nccl.gpu_runtime_event_record
event_synchronize = _nccl.gpu_runtime_event_synchronize
event_elapsed = _nccl.gpu_runtime_event_elapsed
malloc = _nccl.gpu_runtime_malloc
free = _nccl.gpu_runtime_free
malloc_host = _nccl.gpu_runtime_malloc_host
free_host = _nccl.gpu_runtime_free_host
memcpy = _nccl.gpu_runtime_memcpy
memcpy_async = _nccl.gpu_runtime_memcpy_async
memset = _nccl.gpu_runtime_memset
memset_async = _nccl.gpu_runtime_memset_async
pointer_attributes = _nccl.gpu_runtime_pointer_attributes
error_string = _nccl.gpu_runtime_error_string
error_name = _nccl.gpu_runtime_error_name


def platform() -> str:
    """``"rocm"`` or ``"cuda"``: the family of the loaded runtime (loads it)."""
    r = info()
    if not r["loaded"]:
        raise GpuRuntimeError(r["error"])
    return r["platform"]


def _rocm_candidates() -> list[tuple[str, str]]:
    out = []
    for var in ("ROCM_PATH", "HIP_PATH"):
        root = os.environ.get(var)
        if root:
            out.append((f"${var}/lib", os.path.join(root, "lib", "libamdhip64.so")))
    out.append(("/opt/rocm/lib", "/opt/rocm/lib/libamdhip64.so"))
    for name in ("libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6"):
        out.append(("loader search path", name))
    return out


def _cuda_candidates() -> list[tuple[str, str]]:
    out = []
    for entry in sys.path:
        if not entry or not os.path.isdir(entry):
            continue
        for sub, names in (("cu13", ("libcudart.so.13",)),
                           ("cuda_runtime", ("libcudart.so.13", "libcudart.so.12"))):
            for name in names:
                path = os.path.join(entry, "nvidia", sub, "lib", name)
                if os.path.exists(path):
                    out.append(("nvidia wheel", path))
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if root:
            out.append((f"${var}/lib64", os.path.join(root, "lib64", "libcudart.so")))
    try:
        from ctypes.util import find_library

        found = find_library("cudart")
    except Exception:  # pragma: no cover - ctypes is optional in some builds
        found = None
    if found:
        out.append(('find_library("cudart")', found))
    for name in ("libcudart.so.13", "libcudart.so.12", "libcudart.so"):
        out.append(("loader search path", name))
    return out


def candidates() -> tuple[str, list[tuple[str, str]]]:
    """``(decision, [(label, path-or-soname), ...])`` in the order to try."""
    explicit = os.environ.get("NCCL4PY_GPU_RUNTIME")
    if explicit:
        return "NCCL4PY_GPU_RUNTIME is set, so only it is tried", [
            ("NCCL4PY_GPU_RUNTIME", explicit)]
    from nccl._discovery import platform as _platform

    plat, why = _platform()
    cands = _rocm_candidates() if plat == "rocm" else _cuda_candidates()
    seen, out = set(), []
    for label, path in cands:
        if path not in seen:
            seen.add(path)
            out.append((label, path))
    return f"platform {plat}: {why}", out
