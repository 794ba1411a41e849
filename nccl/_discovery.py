"""Which library files the loader tries, in which order, and why.

The C loader (src/loader.c) calls :func:`candidates` once, on first use, and
dlopens the candidates in order; the first that loads wins.

Order (documented in docs/environment.md, "Library discovery"):

1. ``NCCL_LIBRARY`` (a path or a soname): used alone when set.
2. ``NCCL4PY_BACKEND=host``: the bundled host backend, alone.
3. No GPU visible (no ``/dev/nvidia[0-9]*`` or ``/dev/kfd`` device node, or
   every device hidden by ``CUDA_VISIBLE_DEVICES`` / ``HIP_VISIBLE_DEVICES``
   / ``ROCR_VISIBLE_DEVICES``) and ``NCCL4PY_PLATFORM`` unset: the bundled
   host backend, alone (when it is missing, step 4 follows and the decision
   says so).
4. The platform's family first, then the other one:
   - ROCm: ``find_library("rccl")``, ``$ROCM_PATH/lib/librccl.so``,
     ``$HIP_PATH/lib/librccl.so``, ``/opt/rocm/lib/librccl.so``, ``librccl.so``;
   - CUDA: ``libnccl.so.2`` of the nvidia-nccl-cu12/cu13 wheels,
     ``$CUDA_HOME/lib64/libnccl.so.2``, ``find_library("nccl")``,
     ``libnccl.so.2``.
   ROCm comes first when a HIP runtime is present; ``NCCL4PY_PLATFORM=rocm|cuda``
   overrides the decision.
"""
from __future__ import annotations

import glob
import os
import sys
from typing import Mapping

__all__ = ["candidates", "platform", "host_backend_path", "visible_gpus", "gpus_visible",
           "no_gpu_arrays_message"]

_PLATFORMS = ("rocm", "cuda")
_BACKENDS = ("host", "auto", "")

# For tests only: a directory that stands in for /dev in the GPU-visibility
# check, so that "a GPU is visible" can be tested on a machine without one.
TEST_DEV_DIR_ENV = "NCCL4PY_TEST_DEV_DIR"
_VISIBILITY_VARS = {"nvidia": ("CUDA_VISIBLE_DEVICES",),
                    "amd": ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
                            "ROCR_VISIBLE_DEVICES")}


def host_backend_path() -> str:
    """Path of the bundled host backend library (it may not exist)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "_lib", "libnccl4py_host.so")


def dev_dir() -> str:
    """``/dev``, or the directory named by NCCL4PY_TEST_DEV_DIR (tests only)."""
    d = os.environ.get(TEST_DEV_DIR_ENV, "")
    if not d:
        return "/dev"
    if not os.path.isdir(d):
        raise ValueError(f"{TEST_DEV_DIR_ENV}={d!r} is not a directory (it stands in for /dev "
                         "in tests)")
    return d


def _visible_ids(environ: Mapping[str, str], names: tuple[str, ...]) -> tuple[str, list[str]] | None:
    """The most restrictive of *names* that is set, with the device ids it keeps
    (none: all hidden).  The runtimes apply these filters one after another, so
    one variable that hides everything hides everything."""
    best: tuple[str, list[str]] | None = None
    for name in names:
        value = environ.get(name)
        if value is None:
            continue
        ids = [x.strip() for x in value.split(",")]
        kept = [] if not ids[0] or ids[0] == "-1" else [x for x in ids if x]
        if best is None or len(kept) < len(best[1]):
            best = (name, kept)
    return best


def visible_gpus(environ: Mapping[str, str] | None = None,
                 dev: str | None = None) -> tuple[int, str]:
    """``(count, reason)``: how many GPUs this process would see, without
    loading any library.  A GPU counts when its driver's device node exists
    (``/dev/nvidia[0-9]*``; ``/dev/kfd`` with one ``/dev/dri/renderD*`` per AMD
    GPU) and ``CUDA_VISIBLE_DEVICES`` (NVIDIA and AMD), ``HIP_VISIBLE_DEVICES``
    or ``ROCR_VISIBLE_DEVICES`` (AMD) does not hide it; when one of those is
    set, the number of ids it lists is the count."""
    env = os.environ if environ is None else environ
    root = dev_dir() if dev is None else dev
    found = {"nvidia": len(glob.glob(os.path.join(root, "nvidia[0-9]*")))}
    found["amd"] = (max(len(glob.glob(os.path.join(root, "dri", "renderD*"))), 1)
                    if os.path.exists(os.path.join(root, "kfd")) else 0)
    if not any(found.values()):
        return 0, (f"no GPU device node ({root}/nvidia[0-9]* or {root}/kfd) exists")
    total, why = 0, []
    for vendor, nodes in found.items():
        if not nodes:
            continue
        vis = _visible_ids(env, _VISIBILITY_VARS[vendor])
        name = "NVIDIA" if vendor == "nvidia" else "AMD"
        if vis is None:
            total += nodes
            why.append(f"{nodes} {name} GPU device node(s) in {root}")
        elif not vis[1]:
            why.append(f"{vis[0]}={env[vis[0]]!r} hides the {name} GPUs")
        else:
            total += len(vis[1])
            why.append(f"{vis[0]} lists {len(vis[1])} {name} GPU(s)")
    return total, "; ".join(why)


def gpus_visible(environ: Mapping[str, str] | None = None, dev: str | None = None) -> bool:
    """True when this process would see at least one GPU (see :func:`visible_gpus`)."""
    return visible_gpus(environ, dev)[0] > 0


def no_gpu_arrays_message(family: str) -> str:
    """Why a program cannot make GPU arrays for the *family* library ("nccl",
    "rccl"), and what to do: without a GPU, use the host backend."""
    ngpus, why = visible_gpus()
    name = {"nccl": "NCCL", "rccl": "RCCL"}.get(family, family)
    if ngpus == 0:
        return (f"{name} needs GPU arrays, but no GPU is visible ({why}); on this machine use "
                "the bundled host backend: unset NCCL4PY_PLATFORM and NCCL_LIBRARY (it is the "
                "default without a GPU) or set NCCL4PY_BACKEND=host")
    return f"{name} needs GPU arrays: install torch (with CUDA or ROCm) or CuPy"


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
    note = ""
    if not os.environ.get("NCCL4PY_PLATFORM", "").strip():
        ngpus, seen_gpus = visible_gpus()
        if ngpus == 0:
            host = host_backend_path()
            if os.path.exists(host):
                return (f"no GPU is visible ({seen_gpus}), so the bundled host backend is "
                        "used (set NCCL4PY_PLATFORM=cuda|rocm or NCCL_LIBRARY to load a GPU "
                        "library instead)", [("host backend", host)])
            note = (f"no GPU is visible ({seen_gpus}) but the bundled host backend is "
                    f"missing ({host}); ")
        else:
            note = f"GPUs are visible ({seen_gpus}); "
    plat, why = platform()
    rocm, cuda = _rocm_candidates(), _cuda_candidates()
    ordered = rocm + cuda if plat == "rocm" else cuda + rocm
    return f"{note}platform {plat} first: {why}", first_of_each_path(ordered)


def first_of_each_path(cands: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """``cands`` without the later entries of a path already listed."""
    seen, out = set(), []
    for label, path in cands:
        if path not in seen:
            seen.add(path)
            out.append((label, path))
    return out
