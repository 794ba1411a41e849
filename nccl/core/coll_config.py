"""Per-call configuration of a collective (nccl4py 0.6): ``NCCLCollConfig``
and ``VendorOption``.

``config=None`` on a collective is the plain call.  A config is checked when
it is made and again when it is used (the dataclass is mutable), with
nccl4py 0.6's messages; its values are then written into an
``ncclCollConfig_t`` for the ``nccl*Config`` function of the collective.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from nccl._errors import NcclInvalid

from .constants import CTAPolicy
from .cuda import get_event_ptr as event_handle
from .typing import NcclEventSpec

__all__ = ["NCCLCollConfig", "VendorOption", "NcclEventSpec", "event_handle"]

_VALUE_FIELDS = ("int_value", "str_value", "raw_value")


@dataclass(frozen=True)
class VendorOption:
    """One vendor-specific option of a collective: a ``(vendor_id, option_id)``
    key and exactly one of an int, a string or a raw 64-bit value."""

    vendor_id: int
    option_id: int
    int_value: int | None = None
    str_value: str | None = None
    raw_value: int | None = None

    def __post_init__(self) -> None:
        given = [f for f in _VALUE_FIELDS if getattr(self, f) is not None]
        if len(given) != 1:
            raise NcclInvalid("VendorOption requires exactly one of int_value, str_value, "
                              f"raw_value to be set, got {given or 'none'}")


def _check_vendor_options(options: Any) -> None:
    if isinstance(options, (VendorOption, str, bytes)) or not isinstance(options, Sequence):
        raise NcclInvalid("vendor_options must be a sequence of VendorOption, got "
                          f"{type(options).__name__}")
    seen = set()
    for opt in options:
        if not isinstance(opt, VendorOption):
            raise NcclInvalid("vendor_options must contain VendorOption instances, got "
                              f"{type(opt).__name__}")
        key = (opt.vendor_id, opt.option_id)
        if key in seen:
            raise NcclInvalid(f"Duplicate vendor option key (vendor_id={opt.vendor_id}, "
                              f"option_id={opt.option_id}); keys must be unique")
        seen.add(key)


@dataclass(kw_only=True)
class NCCLCollConfig:
    """Tuning of one collective call (``ncclCollConfig_t``, NCCL 2.31+).

    Unset fields (``None``) keep the communicator's settings.  Every rank must
    pass the same configuration; the library checks it locally when the call
    is made.  ``launch_completion_event`` needs NCCL 2.32.
    """

    min_ctas: int | None = None
    max_ctas: int | None = None
    nvls_ctas: int | None = None
    cga_cluster_size: int | None = None
    alg_selection: str | None = None
    force_alg_selection: bool | None = None
    cta_policy: CTAPolicy | None = None
    user_profiler_tag: int | None = None
    launch_completion_event: NcclEventSpec | None = None
    vendor_options: Sequence[VendorOption] = ()

    def __post_init__(self) -> None:
        _check_vendor_options(self.vendor_options)

    # The low-level struct made from the fields (_materialize), kept for the
    # next call until a field changes.  Not a field: equality, repr, asdict
    # and replace() do not see it.
    _lowpp: ClassVar[Any] = None  # per instance once set (object.__setattr__)

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name != "_lowpp":
            object.__setattr__(self, "_lowpp", None)

    def _fields_to_write(self) -> dict[str, Any]:
        """The C fields this config sets, checked (again: it is mutable)."""
        _check_vendor_options(self.vendor_options)
        out: dict[str, Any] = {}
        for name in ("min_ctas", "max_ctas", "nvls_ctas", "cga_cluster_size", "cta_policy"):
            v = getattr(self, name)
            if v is not None:
                out[name] = _int_field(name, v, -2**31, 2**31 - 1)
        if self.force_alg_selection is not None:
            out["force_alg_selection"] = int(bool(self.force_alg_selection))
        if self.user_profiler_tag is not None:
            out["user_profiler_tag"] = _int_field("user_profiler_tag", self.user_profiler_tag,
                                                  0, 2**64 - 1)
        if self.alg_selection is not None:
            if not isinstance(self.alg_selection, str):
                raise TypeError(f"alg_selection must be a str, not "
                                f"{type(self.alg_selection).__name__}")
            out["alg_selection"] = self.alg_selection
        out["launch_completion_event"] = event_handle(self.launch_completion_event)
        return out


def _materialize(config: Any) -> Any:
    """The low-level ``CollConfig`` for ``config=`` of a collective (called by
    the C executor when config is not None); the struct keeps its strings."""
    from nccl import bindings as b

    low = getattr(b, "CollConfig", None)
    if low is not None and isinstance(config, low):
        return config
    if not isinstance(config, NCCLCollConfig):
        raise TypeError(f"config must be an NCCLCollConfig or None, not {type(config).__name__}")
    if low is None:
        raise b.FunctionNotFoundError("this build has no ncclCollConfig_t (NCCL 2.31+)")
    if config._lowpp is not None:
        return config._lowpp
    fields = config._fields_to_write()
    cfg = low()
    event = fields.pop("launch_completion_event")
    for name, value in fields.items():
        setattr(cfg, name, value)
    if event:
        cfg.launch_completion_event_handle = event
    if config.vendor_options:  # a list can change in place: made again each time
        return _Held(cfg, _link_vendor_options(cfg, config.vendor_options))
    if config.launch_completion_event is None:  # an event can be closed meanwhile
        object.__setattr__(config, "_lowpp", cfg)
    return cfg


class _Held:
    """A config with the extension nodes it points to, alive together."""

    __slots__ = ("cfg", "nodes", "ptr")

    def __init__(self, cfg: Any, nodes: list) -> None:
        self.cfg, self.nodes, self.ptr = cfg, nodes, cfg.ptr


def _link_vendor_options(cfg: Any, options: Sequence[VendorOption]) -> list:
    """One ``ConfigExt`` node per option, linked through ``next``."""
    from nccl import bindings as b

    ext = getattr(b, "ConfigExt", None)
    if ext is None:
        raise NotImplementedError("vendor_options need the ncclConfigExt_t binding (NCCL 2.31+), "
                                  "which this build lacks")
    nodes = []
    for opt in options:
        node = ext()
        node.key.vendor_id, node.key.option_id = int(opt.vendor_id), int(opt.option_id)
        if opt.int_value is not None:
            node.val.i = int(opt.int_value)
        elif opt.str_value is not None:
            node.val.s = opt.str_value
        else:
            node.val.raw = int(opt.raw_value)  # type: ignore[arg-type]
        nodes.append(node)
    for a, nxt in zip(nodes, nodes[1:]):
        a.next = nxt.ptr
    cfg.ext = nodes[0].ptr
    return nodes


def _int_field(name: str, v: Any, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        raise TypeError(f"{name} must be an integer, not {type(v).__name__}")
    i = v.__index__()
    if not lo <= i <= hi:
        raise OverflowError(f"{name}={i} is out of range [{lo}, {hi}]")
    return i
