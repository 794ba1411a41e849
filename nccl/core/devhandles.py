"""Read-only views of what the library fills for a device communicator
(multimem handles, barrier and all-to-all handles) and the load/store
endpoint info of a window (``CftLeInfo``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["MultimemHandle", "LsaBarrierHandle", "GinBarrierHandle", "LLA2AHandle", "CftLeInfo"]


class _View:
    """A live, read-only view of a bindings struct; made by nccl.core only."""

    _fields: tuple[tuple[str, str], ...] = ()  # (attribute, struct field)
    _lowpp: Any
    _comm = 0  # the communicator whose device communicator filled it (0: unknown)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(f"{type(self).__name__} objects are returned by NCCL APIs")

    @classmethod
    def _from_lowpp(cls, lowpp: Any) -> Any:
        obj = object.__new__(cls)
        obj._lowpp = lowpp
        return obj

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._lowpp.ptr == self._lowpp.ptr  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._lowpp.ptr)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(" + ", ".join(
            f"{a}={getattr(self, a)!r}" for a, _ in self._fields) + ")"


def _getter(cfield: str) -> Any:
    def get(self: _View) -> Any:
        return getattr(self._lowpp, cfield)
    return get


def _view(name: str, fields: tuple[tuple[str, str], ...], doc: str) -> type:
    ns: dict[str, Any] = {"_fields": fields, "__doc__": doc, "__module__": __name__}
    for attr, cfield in fields:
        ns[attr] = property(_getter(cfield))
    return type(name, (_View,), ns)


MultimemHandle = _view("MultimemHandle", (("mc_base_pointer", "mc_base_ptr"),),
                       "The multicast base address of a team (``ncclMultimemHandle_t``).")
LsaBarrierHandle = _view("LsaBarrierHandle", (("buf_handle", "buf_handle"),
                                              ("n_barriers", "n_barriers")),
                         "A barrier over the load/store team (``ncclLsaBarrierHandle_t``).")
GinBarrierHandle = _view("GinBarrierHandle", (("signal0", "signal0"),),
                         "A network (GIN) barrier (``ncclGinBarrierHandle_t``).")
LLA2AHandle = _view("LLA2AHandle", (("buf_handle", "buf_handle"), ("n_slots", "n_slots")),
                    "A low-latency all-to-all buffer (``ncclLLA2AHandle_t``).")

_VIEWS: dict[str, Any] = {"MultimemHandle": MultimemHandle, "LsaBarrierHandle": LsaBarrierHandle,
          "GinBarrierHandle": GinBarrierHandle, "LLA2AHandle": LLA2AHandle}


def view_of(lowpp: Any, comm: int = 0) -> Any:
    """The view class of a bindings handle struct, filled for communicator comm."""
    view = _VIEWS[type(lowpp).__name__]._from_lowpp(lowpp)
    view._comm = int(comm)
    return view


@dataclass(frozen=True, slots=True)
class CftLeInfo:
    """A load/store endpoint id and the offset in it."""

    le_id: int
    le_offset: int
