"""Versions, unique ids and error strings."""
from __future__ import annotations

import pathlib
from typing import IO, Any

from packaging.version import Version as _PkgVersion

from nccl import bindings as _b
from nccl._diagnostics import (LibraryInfo, VersionInfo, decode_version, get_version,
                                 show_core_versions)
from nccl._version import __version__

from .constants import UNIQUE_ID_BYTES

__all__ = ["LibraryInfo", "VersionInfo", "get_version", "show_versions", "Version",
           "get_lib_version", "get_lib_path", "UniqueId", "get_unique_id", "get_error_string"]


def show_versions(file: IO[str] | None = None) -> None:
    """Print nccl4py's, the bindings' and the loaded library's versions."""
    show_core_versions(file)


class Version:
    """nccl4py 0.2/0.3's version pair: ``Version(code)`` decodes an
    ``ncclGetVersion`` code into ``.nccl_version`` and carries
    ``.nccl4py_version`` (both ``packaging.version.Version``).
    :func:`get_version` returns a :class:`VersionInfo`, which has the same
    two attributes."""

    def __init__(self, nccl_version: int):
        self.nccl_version = _PkgVersion(decode_version(int(nccl_version)))
        self.nccl4py_version = _PkgVersion(__version__)

    def __repr__(self) -> str:
        return (f"\nVersions:\n    NCCL4Py version: {self.nccl4py_version}\n"
                f"    NCCL Library version: {self.nccl_version}\n")


def get_lib_version() -> _PkgVersion:
    """The loaded library's version (loads it)."""
    return _PkgVersion(decode_version(_b.get_version()))


def get_lib_path() -> pathlib.Path | None:
    """The loaded library's path (loads it)."""
    p = _b.get_library_path()
    return pathlib.Path(p) if p else None


class UniqueId:
    """A 128-byte ``ncclUniqueId``: ``bytes(uid)``, picklable, ``from_bytes``.

    :attr:`as_ndarray` is a writable view of the id's own bytes, so a
    buffer transport can fill it in place, as in
    ``MPI.COMM_WORLD.Bcast([uid.as_ndarray, MPI.BYTE], root=0)``.  Ids
    compare by their bytes; since those can change through the view, a
    UniqueId is not hashable (use ``bytes(uid)`` as a key)."""

    __slots__ = ("_internal",)

    def __init__(self, _internal: Any = None):
        if _internal is None:
            _internal = _b.UniqueId()
        elif not isinstance(_internal, _b.UniqueId):
            _internal = _b.UniqueId.from_bytes(bytes(_internal))
        self._internal = _internal

    @staticmethod
    def from_bytes(b: bytes | bytearray | memoryview) -> "UniqueId":
        return UniqueId(_b.UniqueId.from_bytes(bytes(b)))

    def __bytes__(self) -> bytes:
        return bytes(self._internal)

    @property
    def as_bytes(self) -> bytes:
        return bytes(self._internal)

    @property
    def ptr(self) -> int:
        return self._internal.ptr

    @property
    def as_ndarray(self):
        """A 1-element ``unique_id_dtype`` record array over the id's own
        bytes (not a copy): writing into it changes the id.  The array keeps
        the id's storage alive."""
        import numpy as np

        return np.ndarray((1,), dtype=_b.unique_id_dtype,
                          buffer=self._internal).view(np.recarray)

    def __getstate__(self) -> bytes:
        return bytes(self._internal)

    def __setstate__(self, state: bytes) -> None:
        if not isinstance(state, (bytes, bytearray)) or len(state) != UNIQUE_ID_BYTES:
            raise ValueError(f"a UniqueId is restored from exactly {UNIQUE_ID_BYTES} bytes")
        self._internal = _b.UniqueId.from_bytes(bytes(state))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UniqueId) and bytes(self) == bytes(other)

    __hash__ = None  # type: ignore[assignment]  # mutable through as_ndarray

    def __repr__(self) -> str:
        h = bytes(self).hex()
        return f"<UniqueId: {h[:16]}...{h[-16:]}>"


def get_unique_id(empty: bool = False) -> UniqueId:
    """A new unique id from the library (``ncclGetUniqueId``), or a zeroed one."""
    return UniqueId() if empty else UniqueId(_b.get_unique_id())


def get_error_string(nccl_result: int) -> str:
    return _b.get_error_string(int(nccl_result))
