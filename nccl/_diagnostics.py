"""What nccl4py found on this machine: the report of ``python -m nccl``,
``nccl.show_versions()`` and ``nccl.get_version()``, with the one decoder of
library version codes.

The report gives the nccl4py version, Python and platform, the GPUs visible,
the library decision and why, whether the bundled host backend is present and
chosen, every library candidate once (loaded, failed with the loader's error,
or not tried), the library loaded (path, version, family), the GPU runtime and
its device count, the API functions the library lacks and the versions of the
installed interop packages (read from their metadata, never imported).  It
succeeds, and says so plainly, when no library can be loaded.

``get_version()`` returns upstream nccl4py 0.3's form: ``VersionInfo(nccl4py,
nccl, nccl_ep)`` whose library fields are :class:`LibraryInfo` (``str()``
gives ``"2.30.4 @ /path/libnccl.so.2"``).  The integer code of the loaded
library stays ``nccl.bindings.get_version()``.  Nothing here is imported by
``import nccl``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from dataclasses import dataclass
from typing import IO, Any

from ._version import __version__

__all__ = ["LibraryInfo", "VersionInfo", "get_version", "show_versions", "decode_version",
           "collect", "render", "main"]

def decode_version(code: int) -> str:
    """``23004`` → ``"2.30.4"`` (and NCCL's pre-2.9 encoding, ``2708`` → ``"2.7.8"``)."""
    if code < 10000:
        return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"
    return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"


@dataclass(frozen=True)
class LibraryInfo:
    """A loaded library: its version, the CUDA variant of its wheel (``"cu12"``,
    ``"cu13"``; ``None`` when not from an NVIDIA wheel) and its path."""

    version: str
    cuda_variant: str | None
    path: str | None

    def __str__(self) -> str:
        return f"{self.version} @ {self.path}"


@dataclass(frozen=True)
class VersionInfo:
    """Versions of nccl4py, of the NCCL/RCCL library in use and of NCCL EP
    (``None`` when that library is not loaded)."""

    nccl4py: str
    nccl: LibraryInfo | None
    nccl_ep: LibraryInfo | None


def cuda_variant(path: str | None) -> str | None:
    """``cu12``/``cu13`` when *path* belongs to the nvidia-nccl-cuXX wheel."""
    if not path:
        return None
    import importlib.metadata as md

    real = os.path.realpath(path)
    for variant in ("cu13", "cu12"):
        try:
            dist = md.distribution(f"nvidia-nccl-{variant}")
        except md.PackageNotFoundError:
            continue
        for f in dist.files or []:
            if f.name.startswith("libnccl.so") and \
                    os.path.realpath(str(dist.locate_file(f))) == real:
                return variant
    return None


def get_version() -> VersionInfo:
    """Versions of nccl4py and of the library in use (loading it if needed).

    Raises ``NotSupportedError`` when no library can be loaded, like every
    first call into ``nccl.bindings``."""
    from nccl import bindings

    code = int(bindings.get_version())
    path = bindings.get_library_path()
    return VersionInfo(__version__, LibraryInfo(decode_version(code), cuda_variant(path), path),
                       None)


# Interop packages reported by version (distribution names; first found wins).
INTEROP = {
    "numpy": ("numpy",),
    "ml_dtypes": ("ml_dtypes", "ml-dtypes"),
    "torch": ("torch",),
    "cupy": ("cupy", "cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x", "cupy-rocm-6-0",
             "cupy-rocm-5-0"),
    "cuda.core": ("cuda-core", "cuda_core"),
    "hip-python": ("hip-python", "hip_python"),
    "mpi4py": ("mpi4py",),
}


FAMILY_NAMES = {"host": "host backend (nccl4py, host memory)", "rccl": "RCCL", "nccl": "NCCL"}


def interop_versions() -> dict[str, str | None]:
    """Installed versions of the interop packages (None: not installed)."""
    import importlib.metadata as md

    out: dict[str, str | None] = {}
    for name, dists in INTEROP.items():
        out[name] = None
        for dist in dists:
            try:
                out[name] = md.version(dist)
                break
            except md.PackageNotFoundError:
                continue
    return out


def gpu_runtime(nccl_mod: Any) -> dict[str, Any]:
    """The GPU runtime nccl4py's C layer found (HIP or CUDA) and its device count.

    ``device_count`` is a number, or None when it is not known (no runtime
    layer in this build, no runtime found, or a runtime that fails: its
    message is in ``device_count_error``); nothing here raises."""
    count_fn = getattr(nccl_mod, "gpu_runtime_device_count", None)
    info_fn = getattr(nccl_mod, "gpu_runtime_info", None)
    out: dict[str, Any] = {"runtime": "unknown", "device_count": None}
    if info_fn is not None:
        try:
            info = info_fn()
        except Exception as e:
            info = {"loaded": False, "error": str(e)}
        if isinstance(info, dict):
            if info.get("loaded"):
                out["runtime"] = {"cuda": "CUDA runtime", "rocm": "HIP runtime",
                                  "hip": "HIP runtime"}.get(str(info.get("platform")),
                                                            str(info.get("platform")))
                out["path"] = info.get("path")
            else:
                out["runtime"] = "none found"
                count_fn = None
            if info.get("decision"):
                out["decision"] = info["decision"]
            if info.get("error"):
                out["error"] = info["error"]
        elif info:
            out["runtime"] = str(info)
    if count_fn is not None:
        try:
            out["device_count"] = int(count_fn())
        except Exception as e:
            out["device_count_error"] = str(e)
    return out


def candidate_list(attempts: list[Any] | None) -> list[dict[str, Any]]:
    """Every candidate once, in order: those the loader tried (``loaded`` or
    ``failed`` with the loader's error) and those it did not reach."""
    from . import _discovery

    out = [{"label": a[0], "path": a[1],
            "status": "loaded" if a[2] is None else "failed", "error": a[2]}
           for a in attempts or []]
    try:
        _, planned = _discovery.candidates()
    except ValueError:  # a bad variable: the loader's error says which
        planned = []
    tried = {c["path"] for c in out}
    out += [{"label": label, "path": path, "status": "not tried", "error": None}
            for label, path in planned if path not in tried]
    return out


def host_backend(family: str | None, candidates: list[dict[str, Any]]) -> dict[str, Any]:
    """Whether the bundled host backend is present, and whether it is the
    library in use (or, when nothing loaded, the one discovery chose)."""
    from . import _discovery

    path = _discovery.host_backend_path()
    if family is not None:
        chosen = family == "host"
    else:
        chosen = bool(candidates) and candidates[0]["path"] == path
    return {"path": path, "present": os.path.exists(path), "chosen": chosen}


def collect() -> dict[str, Any]:
    from . import _nccl

    rep = _nccl._loader_report()
    version = None
    if rep["path"]:
        from . import bindings

        try:
            version = bindings.get_version()
        except Exception as e:  # a library without ncclGetVersion still gets reported
            rep["error"] = f"ncclGetVersion failed: {e}"
    table = _nccl._api_table()
    from . import _discovery

    try:
        ngpus, gpu_reason = _discovery.visible_gpus()
        gpus: dict[str, Any] = {"visible": ngpus, "reason": gpu_reason}
    except ValueError as e:
        gpus = {"visible": None, "reason": str(e)}
    candidates = candidate_list(rep["attempts"])
    return {
        "nccl4py": __version__,
        "python": sys.version.split()[0],
        "python_executable": sys.executable,
        "machine": f"{platform.system()} {platform.machine()}",
        "platform": platform.platform(),
        "decision": rep["decision"],
        "gpus": gpus,
        "host_backend": host_backend(rep["family"], candidates),
        "candidates": candidates,
        "library": {
            "path": rep["path"],
            "family": FAMILY_NAMES.get(rep["family"], rep["family"]),
            "version_code": version,
            "version": None if version is None else decode_version(version),
        } if rep["path"] else None,
        "error": rep["error"],
        "api_functions": len(table),
        "missing": rep["missing"],
        "gpu_runtime": gpu_runtime(_nccl),
        "interop": interop_versions(),
        "environment": {k: os.environ[k] for k in (
            "NCCL_LIBRARY", "NCCL4PY_BACKEND", "NCCL4PY_PLATFORM", "ROCM_PATH", "HIP_PATH",
            "CUDA_HOME", "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
            _discovery.TEST_DEV_DIR_ENV) if k in os.environ},
    }


def _error_summary(error: str) -> list[str]:
    """The loader's error without its candidate list (shown above it already)."""
    lines = error.splitlines()
    head = lines[0].split(" Tried, in order:")[0]
    tail = [ln for ln in lines[1:] if not ln.startswith("  ")]
    return [head, *tail]


def render(info: dict[str, Any]) -> str:
    out = [f"nccl4py {info['nccl4py']} (Python {info['python']}, {info['machine']})"]
    out.append(f"platform: {info['platform']}")
    gpus = info["gpus"]
    out.append(f"GPUs visible: {'?' if gpus['visible'] is None else gpus['visible']} "
               f"({gpus['reason']})")
    out.append(f"decision: {info['decision']}")
    for k, v in info["environment"].items():
        out.append(f"  {k}={v}")
    host = info["host_backend"]
    out.append(f"bundled host backend: {'present' if host['present'] else 'MISSING'} "
               f"({host['path']}); {'chosen' if host['chosen'] else 'not chosen'}")
    out.append("library candidates, in order:")
    for c in info["candidates"]:
        status = f"failed: {c['error']}" if c["status"] == "failed" else c["status"]
        out.append(f"  - [{c['label']}] {c['path']}: {status}")
    lib = info["library"]
    if lib:
        out.append(f"loaded: {lib['family']} {lib['version'] or '?'} from {lib['path']}")
        if info["missing"]:
            out.append(f"API functions missing from this library ({len(info['missing'])} of "
                       f"{info['api_functions']}): " + ", ".join(info["missing"]))
        else:
            out.append(f"all {info['api_functions']} API functions are present")
    else:
        out.append("no NCCL/RCCL library could be loaded.")
        if info["error"]:
            out += _error_summary(info["error"])
    gpu = info["gpu_runtime"]
    where = f" ({gpu['path']})" if gpu.get("path") else ""
    count = gpu["device_count"]
    if count is None:
        count = f"unknown ({gpu['device_count_error']})" if gpu.get("device_count_error") \
            else "unknown"
    out.append(f"GPU runtime: {gpu['runtime']}{where}, devices: {count}")
    if gpus["visible"] and gpu["device_count"] == 0:
        out.append("note: GPU device nodes exist but the runtime reports no device; the "
                   "decision above still treats this machine as a GPU machine")
    out.append("interop packages:")
    for name, version in info["interop"].items():
        out.append(f"  {name:<10} {version or 'not installed'}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m nccl",
                                 description="``python -m nccl``: what nccl4py found on this machine.")
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    ns = ap.parse_args(argv)
    info = collect()
    print(json.dumps(info, indent=2) if ns.json else render(info))
    return 0


def show_versions(file: IO[str] | None = None) -> None:
    """Print what nccl4py found: versions, platform decision, library,
    candidates, GPU runtime, missing functions and interop packages (the
    report of ``python -m nccl``).  Works when no library can be loaded."""
    print(render(collect()), file=file if file is not None else sys.stdout)
