"""Versions of nccl4py, of the NCCL API it is built for and of the library in use.

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
"""
from __future__ import annotations

import functools
import mmap
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: python -m nccl needs no packaging
    from packaging.version import Version

__all__ = ["LibraryInfo", "VersionInfo", "get_version", "show_versions", "show_core_versions",
           "decode_version"]

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
    from nccl._version import __version__

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


def show_versions(file: IO[str] | None = None) -> None:
    """Print what nccl4py found: versions, platform decision, library,
    candidates, GPU runtime, missing functions and interop packages (the
    report of ``python -m nccl``).  Works when no library can be loaded."""
    from nccl.__main__ import collect, render

    print(render(collect()), file=file if file is not None else sys.stdout)
