"""``python -m nccl``: what nccl4py found on this machine.

Prints the nccl4py version, the platform decision, every library candidate
tried (with the loader's error for those that failed), the library loaded
(path, version, family) and the API functions that library lacks.  It
succeeds, and says so plainly, when no library can be loaded.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys

from ._version import __version__


def format_version(code: int | None) -> str | None:
    if code is None:
        return None
    if code < 10000:  # NCCL's pre-2.9 encoding
        return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"
    return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"


FAMILY_NAMES = {"host": "host backend (nccl4py, host memory)", "rccl": "RCCL", "nccl": "NCCL"}


def collect() -> dict:
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
        "machine": f"{platform.system()} {platform.machine()}",
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
        "environment": {k: os.environ[k] for k in (
            "NCCL_LIBRARY", "NCCL4PY_BACKEND", "NCCL4PY_PLATFORM", "ROCM_PATH", "HIP_PATH",
            "CUDA_HOME") if k in os.environ},
    }


def render(info: dict) -> str:
    out = [f"nccl4py {info['nccl4py']} (Python {info['python']}, {info['machine']})"]
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
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m nccl", description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    ns = ap.parse_args(argv)
    info = collect()
    print(json.dumps(info, indent=2) if ns.json else render(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
