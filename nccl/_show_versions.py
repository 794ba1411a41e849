"""``nccl.get_version()`` and ``nccl.show_versions()``.

``get_version()`` returns upstream nccl4py 0.3's form: ``VersionInfo(nccl4py,
nccl, nccl_ep)`` whose library fields are :class:`LibraryInfo` (``str()``
gives ``"2.30.4 @ /path/libnccl.so.2"``).  The integer code of the loaded
library stays ``nccl.bindings.get_version()``.  ``show_versions()`` prints
the report of ``python -m nccl``.  Nothing here is imported by ``import nccl``.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import IO

__all__ = ["LibraryInfo", "VersionInfo", "get_version", "show_versions", "decode_version"]


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
    import os

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
    from nccl._version import __version__

    code = int(bindings.get_version())
    path = bindings.get_library_path()
    return VersionInfo(__version__, LibraryInfo(decode_version(code), cuda_variant(path), path),
                       None)


def show_versions(file: IO[str] | None = None) -> None:
    """Print what nccl4py found: versions, platform decision, library,
    candidates, GPU runtime, missing functions and interop packages (the
    report of ``python -m nccl``).  Works when no library can be loaded."""
    from nccl.__main__ import collect, render

    print(render(collect()), file=file if file is not None else sys.stdout)
