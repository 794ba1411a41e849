"""Which library files the loader tries, in which order, and why.

The C loader (src/loader.c) calls :func:`candidates` once, on first use, and
dlopens the candidates in order; the first that loads wins.

Order (documented in README.md, "Library discovery"):

1. ``NCCL_LIBRARY`` (a path or a soname): used alone when set.
2. ``NCCL4PY_BACKEND=host``: the bundled host backend, alone.
3. The platform's family first, then the other one:
   - ROCm: ``find_library("rccl")``, ``$ROCM_PATH/lib/librccl.so``,
     ``$HIP_PATH/lib/librccl.so``, ``/opt/rocm/lib/librccl.so``, ``librccl.so``;
   - CUDA: ``libnccl.so.2`` of the nvidia-nccl-cu12/cu13 wheels,
     ``$CUDA_HOME/lib64/libnccl.so.2``, ``find_library("nccl")``,
     ``libnccl.so.2``.
   ROCm comes first when a HIP runtime is present; ``NCCL4PY_PLATFORM=rocm|cuda``
   overrides the decision.
"""
from __future__ import annotations

import os
import sys

__all__ = ["candidates", "platform", "host_backend_path"]

_PLATFORMS = ("rocm", "cuda")
_BACKENDS = ("host", "auto", "")


def host_backend_path() -> str:
    """Path of the bundled host backend library (it may not exist)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "_lib", "libnccl4py_host.so")


def _hip_runtime_hint() -> str | None:
    for var in ("ROCM_PATH", "HIP_PATH"):
        root = os.environ.get(var)
        if root and os.path.exists(os.path.join(root, "lib", "libamdhip64.so")):
            return f"${var}/lib/libamdhip64.so exists"
    if os.path.exists("/opt/rocm/lib/libamdhip64.so"):
        return "/opt/rocm/lib/libamdhip64.so exists"
    if os.path.exists("/dev/kfd"):
        return "/dev/kfd (the AMD GPU driver) exists"
    return None


def platform() -> tuple[str, str]:
    """``("rocm" | "cuda", reason)``."""
    forced = os.environ.get("NCCL4PY_PLATFORM", "").strip().lower()
    if forced:
        if forced == "hip":
            forced = "rocm"
        if forced not in _PLATFORMS:
            raise ValueError(f"NCCL4PY_PLATFORM={forced!r} is not one of: rocm, cuda")
        return forced, f"NCCL4PY_PLATFORM={forced}"
    hint = _hip_runtime_hint()
    if hint:
        return "rocm", f"a HIP runtime is present ({hint})"
    return "cuda", "no HIP runtime found"


def _find_library(name: str) -> str | None:
    try:
        from ctypes.util import find_library
    except ImportError:  # pragma: no cover - ctypes is optional in some builds
        return None
    try:
        return find_library(name)
    except Exception:
        return None


def _rocm_candidates() -> list[tuple[str, str]]:
    out = []
    found = _find_library("rccl")
    if found:
        out.append(('find_library("rccl")', found))
    for var in ("ROCM_PATH", "HIP_PATH"):
        root = os.environ.get(var)
        if root:
            out.append((f"${var}/lib", os.path.join(root, "lib", "librccl.so")))
    out.append(("/opt/rocm/lib", "/opt/rocm/lib/librccl.so"))
    out.append(("loader search path", "librccl.so"))
    return out


def _wheel_libraries() -> list[str]:
    found = []
    for entry in sys.path:
        if not entry or not os.path.isdir(entry):
            continue
        for sub in ("nccl", "cu13", "cu12"):
            path = os.path.join(entry, "nvidia", sub, "lib", "libnccl.so.2")
            if os.path.exists(path) and path not in found:
                found.append(path)
    return found


def _cuda_candidates() -> list[tuple[str, str]]:
    out = [("nvidia-nccl wheel", p) for p in _wheel_libraries()]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if root:
            out.append((f"${var}/lib64", os.path.join(root, "lib64", "libnccl.so.2")))
    found = _find_library("nccl")
    if found:
        out.append(('find_library("nccl")', found))
    out.append(("loader search path", "libnccl.so.2"))
    return out


def candidates() -> tuple[str, list[tuple[str, str]]]:
    """``(decision, [(label, path-or-soname), ...])`` in the order to try."""
    explicit = os.environ.get("NCCL_LIBRARY")
    if explicit:
        return "NCCL_LIBRARY is set, so only it is tried", [("NCCL_LIBRARY", explicit)]
    backend = os.environ.get("NCCL4PY_BACKEND", "").strip().lower()
    if backend not in _BACKENDS:
        raise ValueError(f"NCCL4PY_BACKEND={backend!r} is not one of: host, auto")
    if backend == "host":
        return "NCCL4PY_BACKEND=host selects the bundled host backend", [
            ("host backend", host_backend_path())]
    plat, why = platform()
    rocm, cuda = _rocm_candidates(), _cuda_candidates()
    ordered = rocm + cuda if plat == "rocm" else cuda + rocm
    seen, out = set(), []
    for label, path in ordered:
        if path not in seen:
            seen.add(path)
            out.append((label, path))
    return f"platform {plat} first: {why}", out
