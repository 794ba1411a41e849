"""``python -m nccl``: what nccl4py found on this machine.

Prints the nccl4py version, Python and platform, the platform decision and
why, every library candidate tried (with the loader's error for those that
failed), the library loaded (path, version, family), the GPU runtime and its
device count, the API functions the library lacks and the versions of the
installed interop packages (read from their metadata, never imported).  It
succeeds, and says so plainly, when no library can be loaded.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys

from typing import Any

from ._version import __version__

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


def format_version(code: int | None) -> str | None:
    if code is None:
        return None
    if code < 10000:  # NCCL's pre-2.9 encoding
        return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"
    return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"


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

    Reported as "unknown" where this build has no runtime layer; a runtime
    that fails (no driver, no device) is reported, never raised."""
    count_fn = getattr(nccl_mod, "gpu_runtime_device_count", None)
    info_fn = getattr(nccl_mod, "gpu_runtime_info", None)
    out: dict[str, Any] = {"runtime": "unknown", "device_count": "unknown"}
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
                out["device_count"] = 0
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
            out["device_count"] = f"unavailable ({e})"
    return out


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
    return {
        "nccl4py": __version__,
        "python": sys.version.split()[0],
        "python_executable": sys.executable,
        "machine": f"{platform.system()} {platform.machine()}",
        "platform": platform.platform(),
        "decision": rep["decision"],
        "candidates": [{"label": a[0], "path": a[1], "error": a[2]} for a in rep["attempts"] or []],
        "library": {
            "path": rep["path"],
            "family": FAMILY_NAMES.get(rep["family"], rep["family"]),
            "version_code": version,
            "version": format_version(version),
        } if rep["path"] else None,
        "error": rep["error"],
        "api_functions": len(table),
        "missing": rep["missing"],
        "gpu_runtime": gpu_runtime(_nccl),
        "interop": interop_versions(),
        "environment": {k: os.environ[k] for k in (
            "NCCL_LIBRARY", "NCCL4PY_BACKEND", "NCCL4PY_PLATFORM", "ROCM_PATH", "HIP_PATH",
            "CUDA_HOME") if k in os.environ},
    }


def render(info: dict[str, Any]) -> str:
    out = [f"nccl4py {info['nccl4py']} (Python {info['python']}, {info['machine']})"]
    out.append(f"platform: {info['platform']}")
    out.append(f"platform decision: {info['decision']}")
    for k, v in info["environment"].items():
        out.append(f"  {k}={v}")
    out.append("library candidates, in order:")
    for c in info["candidates"]:
        status = "loaded" if c["error"] is None else f"failed: {c['error']}"
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
            out.append(info["error"])
    gpu = info["gpu_runtime"]
    where = f" ({gpu['path']})" if gpu.get("path") else ""
    out.append(f"GPU runtime: {gpu['runtime']}{where}, devices: {gpu['device_count']}")
    out.append("interop packages:")
    for name, version in info["interop"].items():
        out.append(f"  {name:<10} {version or 'not installed'}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m nccl",
                                 description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    ns = ap.parse_args(argv)
    info = collect()
    print(json.dumps(info, indent=2) if ns.json else render(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
