"""Versions, unique ids and error strings."""
from __future__ import annotations

import functools
import pathlib
from typing import Any

from nccl import bindings as _b
from nccl._version import __version__ as _nccl4py_version

__all__ = ["Version", "get_version", "get_lib_version", "get_lib_path", "UniqueId",
           "get_unique_id", "get_error_string"]


def _decode(code: int) -> str:
    from nccl._diagnostics import decode_version  # not at import: it brings the report's imports

    return decode_version(code)


def _pkg_version(text: str) -> Any:
    try:
        from packaging.version import Version as _V
    except ImportError:  # packaging is optional: fall back to the string
        return text
    return _V(text)


class Version:
    """The library version (``.nccl_version``) and nccl4py's (``.nccl4py_version``)."""

    def __init__(self, nccl_version: int):
        self._code = int(nccl_version)
        self.nccl_version = _pkg_version(_decode(self._code))
        self.nccl4py_version = _pkg_version(_nccl4py_version)

    def __repr__(self) -> str:
        return (f"nccl4py version: {self.nccl4py_version}\n"
                f"NCCL library version: {self.nccl_version}")


@functools.lru_cache(maxsize=1)
def get_version() -> Version:
    """Versions of nccl4py and of the loaded library (cached)."""
    return Version(_b.get_version())


def get_lib_version():
    """The loaded library's version (``packaging.version.Version`` when available)."""
    return _pkg_version(_decode(_b.get_version()))


def get_lib_path() -> pathlib.Path | None:
    p = _b.get_library_path()
    return pathlib.Path(p) if p else None


class UniqueId:
    """A 128-byte ``ncclUniqueId``: ``bytes(uid)``, picklable, ``from_bytes``."""

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
        import numpy as np

        return np.frombuffer(bytes(self._internal), dtype=_b.unique_id_dtype).view(np.recarray)

    def __getstate__(self) -> bytes:
        return bytes(self._internal)

    def __setstate__(self, state: bytes) -> None:
        if not isinstance(state, (bytes, bytearray)) or len(state) != 128:
            raise ValueError("a UniqueId is restored from exactly 128 bytes")
        self._internal = _b.UniqueId.from_bytes(bytes(state))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UniqueId) and bytes(self) == bytes(other)

    def __hash__(self) -> int:
        return hash(bytes(self))

    def __repr__(self) -> str:
        h = bytes(self).hex()
        return f"<UniqueId: {h[:16]}...{h[-16:]}>"


def get_unique_id(empty: bool = False) -> UniqueId:
    """A new unique id from the library (``ncclGetUniqueId``), or a zeroed one."""
    return UniqueId() if empty else UniqueId(_b.get_unique_id())


def get_error_string(nccl_result: int) -> str:
    return _b.get_error_string(int(nccl_result))
