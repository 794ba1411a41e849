"""The library's parameters as a read-only mapping (nccl4py 0.6).

``nccl.core.params["NCCL_DEBUG"]`` is the library's own rendering of the
value; iterating lists the keys registered so far (the set grows as the
library's subsystems register theirs).  ``dump_params()`` has the library
print them all.  On the host backend these are its ``NCCL4PY_HOST_*``
settings.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping

from nccl import bindings as _b

__all__ = ["params", "dump_params"]


class _NcclParams(Mapping):
    def __getitem__(self, key: str) -> str:
        return _b.param_get_parameter(key)

    def __iter__(self) -> Iterator[str]:
        return iter(_b.param_get_all_keys())

    def __len__(self) -> int:
        return len(_b.param_get_all_keys())

    def __repr__(self) -> str:
        return f"<nccl.core.params: {len(self)} parameters>"


params = _NcclParams()


def dump_params() -> None:
    """Have the library print every parameter (to its standard output)."""
    _b.param_dump_all()
