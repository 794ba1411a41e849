"""What nccl4py found on this machine: the versions of nccl4py, of the NCCL API
it is built for and of the library in use, and the report of ``python -m nccl``.

``get_version()`` (both ``nccl.get_version()`` and ``nccl.core.get_version()``)
returns one :class:`VersionInfo` that every upstream form of the result can
read:

* nccl4py 0.5 / 0.6 (``nccl.core``): the dataclass fields ``nccl4py``,
  ``nccl_bindings`` and ``libnccl`` (``dataclasses.fields``, ``asdict``,
  ``replace`` and the repr are those of a dataclass with exactly these fields);
* nccl4py 0.3 top level (``nccl.get_version()``): ``.nccl`` (= ``libnccl``) and
  ``.nccl_ep`` (always ``None``: nccl4py has no NCCL EP library);
* nccl4py 0.2 / 0.3 ``nccl.core.get_version()``: ``.nccl_version`` (the loaded
  library's version) and ``.nccl4py_version``.

Every version is a ``packaging.version.Version`` and a path a
``pathlib.Path``.  The integer code of the loaded library stays
``nccl.bindings.get_version()``.  ``show_versions()`` prints the report of
``python -m nccl``.  Nothing here is imported by ``import nccl``.

The report gives the nccl4py version, Python and platform, the GPUs visible,
the library decision and why, whether the bundled host backend is present and
chosen, every library candidate once (loaded, failed with the loader's error,
or not tried), the library loaded (path, version, family, and whether it is an
NCCL newer than the release whose struct layouts nccl4py knows), the GPU runtime and
its device count, the API functions the library lacks and the versions of the
installed interop packages (read from their metadata, never imported).  It
succeeds, and says so plainly, when no library can be loaded.
"""
from __future__ import annotations

import argparse
import functools
import json
import mmap
import os
import platform
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from nccl._version import __version__

if TYPE_CHECKING:  # imported where used: python -m nccl needs no packaging
    from packaging.version import Version

__all__ = ["LibraryInfo", "VersionInfo", "get_version", "show_versions", "show_core_versions",
           "decode_version", "collect", "render", "main"]

# The banner NCCL builds embed ("NCCL version 2.32.3+cuda13.4") names the CUDA
# toolkit they were built with; RCCL and the host backend have none.
_CUDA_BANNER = re.compile(rb"NCCL version [^+\s\x00]+\+cuda(\d+)\.(\d+)")


def decode_version(code: int) -> str:
    """``23004`` → ``"2.30.4"`` (and NCCL's pre-2.9 encoding, ``2708`` → ``"2.7.8"``)."""
    if code < 10000:
        return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"
    return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"


def _pkg_version(text: str) -> Version:
    from packaging.version import Version

    return Version(text)


@functools.lru_cache(maxsize=None)
def _cuda_variant(path: Path) -> Version | None:
    """The CUDA toolkit (``Version("13.4")``) named by the library's banner."""
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            m = _CUDA_BANNER.search(mm)
            # read the groups while the map is open: they are views of it
            return None if m is None else _pkg_version(f"{int(m.group(1))}.{int(m.group(2))}")
    except (OSError, ValueError):  # unreadable, or empty (mmap refuses size 0)
        return None


@dataclass(frozen=True)
class LibraryInfo:
    """The library in use: its version, the CUDA toolkit it was built with
    (``None`` for RCCL, the host backend and builds without the banner) and
    its path (``None`` when unknown).  ``str()`` gives
    ``"2.32.3+cuda13.4 @ /path/libnccl.so.2"``."""

    version: Version
    cuda_variant: Version | None
    path: Path | None

    def __str__(self) -> str:
        out = str(self.version)
        if self.cuda_variant is not None:
            out += f"+cuda{self.cuda_variant}"
        if self.path is not None:
            out += f" @ {self.path}"
        return out


@dataclass(frozen=True)
class VersionInfo:
    """Versions of nccl4py, of the NCCL API its bindings follow and of the
    library in use (``libnccl``: ``None`` when no library could be loaded).

    The properties serve code written for older upstream versions (see the
    module documentation); they are not dataclass fields."""

    nccl4py: Version
    nccl_bindings: Version
    libnccl: LibraryInfo | None

    @property
    def nccl(self) -> LibraryInfo | None:
        """``libnccl`` under nccl4py 0.3's top-level name."""
        return self.libnccl

    @property
    def nccl_ep(self) -> LibraryInfo | None:
        """Always ``None``: nccl4py provides no NCCL EP library."""
        return None

    @property
    def nccl4py_version(self) -> Version:
        """``nccl4py`` under nccl4py 0.2/0.3's ``nccl.core`` name."""
        return self.nccl4py

    @property
    def nccl_version(self) -> Version:
        """The loaded library's version (nccl4py 0.2/0.3's ``nccl.core`` name).

        Those versions raised when no library could be loaded; so does this,
        with the loader's error."""
        if self.libnccl is None:
            err = self.__dict__.get("_load_error")
            if isinstance(err, BaseException):
                raise err.with_traceback(None)
            raise RuntimeError("no NCCL/RCCL library is loaded (libnccl is None)")
        return self.libnccl.version


def _bindings_version() -> Version:
    from nccl import _nccl

    return _pkg_version(decode_version(int(_nccl.ABI_VERSION)))


def get_version() -> VersionInfo:
    """Versions of nccl4py, of its bindings and of the library in use (loading
    it if needed).  When no library can be loaded ``libnccl`` is ``None`` and
    reading ``nccl_version`` raises the loader's error."""
    from nccl import bindings
    from nccl._errors import NCCLError

    libnccl: LibraryInfo | None = None
    error: BaseException | None = None
    try:
        code = int(bindings.get_version())
        raw = bindings.get_library_path()
        path = Path(raw) if raw else None
        libnccl = LibraryInfo(_pkg_version(decode_version(code)),
                              _cuda_variant(path) if path is not None else None, path)
    except (ImportError, RuntimeError, NCCLError) as e:  # NotSupportedError is a RuntimeError
        error = e.with_traceback(None)
    info = VersionInfo(_pkg_version(__version__), _bindings_version(), libnccl)
    if error is not None:
        object.__setattr__(info, "_load_error", error)  # not a field: equality ignores it
    return info


def show_core_versions(file: IO[str] | None = None) -> None:
    """Print nccl4py 0.6's version block (``nccl.core.show_versions()``)."""
    v = get_version()
    title = "NCCL4Py versions"
    lines = ["", title, "-" * len(title), f"nccl4py  : {v.nccl4py}",
             f"bindings : {v.nccl_bindings}",
             f"libnccl  : {v.libnccl if v.libnccl is not None else 'not available'}"]
    print("\n".join(lines), file=file if file is not None else sys.stdout)


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


# The runtimes' status for "no driver, or one older than this runtime"
# (cudaErrorInsufficientDriver, hipErrorInsufficientDriver; src/gpu_runtime.h).
INSUFFICIENT_DRIVER = 35
_DRIVER = {"CUDA runtime": "NVIDIA", "HIP runtime": "AMD GPU"}


def gpu_runtime(nccl_mod: Any, gpus_visible: int | None = None) -> dict[str, Any]:
    """The GPU runtime nccl4py's C layer found (HIP or CUDA) and its device count.

    ``device_count`` is a number, or None when it is not known (no runtime
    layer in this build, no runtime found, or a runtime that fails: its
    message is in ``device_count_error``); nothing here raises.  A runtime
    that reports no driver (``cudaErrorInsufficientDriver``) on a machine
    where no GPU is visible (*gpus_visible* 0) is no failure: the count is 0
    and ``note`` says that there is no driver."""
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
            vendor = _DRIVER.get(out["runtime"], "GPU")
            if getattr(e, "status", None) == INSUFFICIENT_DRIVER and gpus_visible == 0:
                out["device_count"] = 0
                out["note"] = f"no {vendor} driver on this machine (the runtime says: {e})"
            else:
                out["device_count_error"] = str(e)
                if getattr(e, "status", None) == INSUFFICIENT_DRIVER:
                    out["note"] = (f"the {vendor} driver is missing or older than this "
                                   "runtime needs")
    return out


def candidate_list(attempts: list[Any] | None) -> list[dict[str, Any]]:
    """Every candidate once, in order: those the loader tried (``loaded`` or
    ``failed`` with the loader's error) and those it did not reach."""
    from nccl import _discovery

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
    from nccl import _discovery

    path = _discovery.host_backend_path()
    if family is not None:
        chosen = family == "host"
    else:
        chosen = bool(candidates) and candidates[0]["path"] == path
    return {"path": path, "present": os.path.exists(path), "chosen": chosen}


def collect() -> dict[str, Any]:
    from nccl import _nccl

    rep = _nccl._loader_report()
    version = None
    if rep["path"]:
        from nccl import bindings

        try:
            version = bindings.get_version()
        except Exception as e:  # a library without ncclGetVersion still gets reported
            rep["error"] = f"ncclGetVersion failed: {e}"
    table = _nccl._api_table()
    from nccl import _discovery

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
            # the newest NCCL whose struct layouts nccl4py knows, and whether this one is newer
            "known_version": decode_version(rep["known_version"]),
            "newer_than_known": bool(rep["newer_version"]),
        } if rep["path"] else None,
        "error": rep["error"],
        "api_functions": len(table),
        "missing": rep["missing"],
        "gpu_runtime": gpu_runtime(_nccl, gpus["visible"]),
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
        if lib["newer_than_known"]:
            known = lib["known_version"]
            out.append(f"  newer than NCCL {known}, the newest whose struct layouts nccl4py "
                       f"knows: structs reach it in {known}'s layouts, and fields it added "
                       "are not available")
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
    if gpu.get("note"):
        out.append(f"  {gpu['note']}")
    if gpus["visible"] and gpu["device_count"] == 0:
        out.append("note: GPU device nodes exist but the runtime reports no device; the "
                   "decision above still treats this machine as a GPU machine")
    out.append("interop packages:")
    for name, version in info["interop"].items():
        out.append(f"  {name:<10} {version or 'not installed'}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    from nccl._cli import quiet_pipe

    return quiet_pipe(lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    from nccl._cli import add_version

    ap = argparse.ArgumentParser(prog="python -m nccl",
                                 description="``python -m nccl``: what nccl4py found on this machine.")
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    add_version(ap)
    ns = ap.parse_args(argv)
    try:
        info = collect()
    except ImportError:
        from nccl._source_tree import missing_build

        hint = missing_build()
        if hint is None:
            raise
        print(f"python -m nccl: {hint}", file=sys.stderr)
        return 1
    print(json.dumps(info, indent=2) if ns.json else render(info))
    return 0


def show_versions(file: IO[str] | None = None) -> None:
    """Print what nccl4py found: versions, platform decision, library,
    candidates, GPU runtime, missing functions and interop packages (the
    report of ``python -m nccl``).  Works when no library can be loaded."""
    print(render(collect()), file=file if file is not None else sys.stdout)
