"""Configuration objects: NCCLConfig, WaitSignalDesc, NCCLDevCommRequirements.

Unset fields (``None``) keep the library's own defaults.  The C struct behind
each object (``._lowpp``, address ``.ptr``) is kept in step with every
assignment, also after construction.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

from nccl import bindings as _b
from nccl._errors import NcclInvalid

from .constants import CTAPolicy

__all__ = ["NCCLConfig", "WaitSignalDesc", "NCCLDevCommRequirements"]


def _check_bool(name: str, v: Any) -> int:
    if isinstance(v, bool) or (isinstance(v, int) and v in (0, 1)):
        return int(v)
    raise NcclInvalid(f"{name} must be a bool, got {type(v).__name__} {v!r}")


def _check_int(name: str, v: Any, lo: int | None = None, hi: int | None = None) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise NcclInvalid(f"{name} must be an int, got {type(v).__name__} {v!r}")
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        rng = f">= {lo}" if hi is None else f"in {lo}..{hi}"
        raise NcclInvalid(f"{name} must be {rng}, got {v}")
    return int(v)


def _check_str(name: str, v: Any) -> str:
    if not isinstance(v, str):
        raise NcclInvalid(f"{name} must be a str, got {type(v).__name__} {v!r}")
    return v


# field -> validator (value -> value stored in the C struct)
_CONFIG_FIELDS = {
    "blocking": lambda v: _check_bool("blocking", v),
    "cga_cluster_size": lambda v: _check_int("cga_cluster_size", v, 0, 8),
    "min_ctas": lambda v: _check_int("min_ctas", v, 1, 32),
    "max_ctas": lambda v: _check_int("max_ctas", v, 1, 32),
    "net_name": lambda v: _check_str("net_name", v),
    "split_share": lambda v: _check_bool("split_share", v),
    "traffic_class": lambda v: _check_int("traffic_class", v, 0),
    "comm_name": lambda v: _check_str("comm_name", v),
    "collnet_enable": lambda v: _check_bool("collnet_enable", v),
    "cta_policy": lambda v: _check_int("cta_policy", int(v) if isinstance(v, CTAPolicy) else v, 0),
    "shrink_share": lambda v: _check_bool("shrink_share", v),
    "nvls_ctas": lambda v: _check_int("nvls_ctas", v, 1),
    "n_channels_per_net_peer": lambda v: _check_int("n_channels_per_net_peer", v, 1),
    "nvlink_centric_sched": lambda v: _check_bool("nvlink_centric_sched", v),
    "graph_usage_mode": lambda v: _check_int("graph_usage_mode", v, 0, 2),
    "num_rma_ctx": lambda v: _check_int("num_rma_ctx", v, 1),
    "max_p2p_peers": lambda v: _check_int("max_p2p_peers", v, 1),
}
# Accepted for nccl4py 0.3 compatibility, but not part of the 2.30 ncclConfig_t
# we pass: it is stored and ignored, as upstream nccl4py 0.3 does.
_IGNORED_FIELDS = ("graph_stream_ordering",)


class NCCLConfig:
    """Communicator configuration (``ncclConfig_t``); keyword-only, every field
    defaults to ``None`` = the library's default.

    Fields: blocking, cga_cluster_size, min_ctas, max_ctas, net_name,
    split_share, traffic_class, comm_name, collnet_enable, cta_policy,
    shrink_share, nvls_ctas, n_channels_per_net_peer, nvlink_centric_sched,
    graph_usage_mode, num_rma_ctx, max_p2p_peers (and graph_stream_ordering,
    accepted and ignored).  Bad values raise ``NcclInvalid``.
    """

    __slots__ = ("_values", "_lowpp")

    def __init__(self, **fields: Any):
        object.__setattr__(self, "_values", {})
        object.__setattr__(self, "_lowpp", _b.Config())
        for name, value in fields.items():
            setattr(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _IGNORED_FIELDS:
            self._values[name] = value
            return
        check = _CONFIG_FIELDS.get(name)
        if check is None:
            raise AttributeError(f"NCCLConfig has no field {name!r}")
        default = _b.Config()
        if value is None:
            self._values.pop(name, None)
            setattr(self._lowpp, name, getattr(default, name) if name not in ("net_name", "comm_name") else None)
            return
        stored = check(value)
        setattr(self._lowpp, name, stored)
        self._values[name] = value

    def __getattr__(self, name: str) -> Any:
        if name in _CONFIG_FIELDS or name in _IGNORED_FIELDS:
            return self._values.get(name)
        raise AttributeError(f"NCCLConfig has no field {name!r}")

    @property
    def ptr(self) -> int:
        """Address of the ``ncclConfig_t`` (valid while this object lives)."""
        return self._lowpp.ptr

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NCCLConfig) and self._values == other._values

    def __repr__(self) -> str:
        if not self._values:
            return "<NCCLConfig: all defaults>"
        return "<NCCLConfig: " + ", ".join(f"{k}={v!r}" for k, v in self._values.items()) + ">"


@dataclass(frozen=True)
class WaitSignalDesc:
    """One signal to wait for in ``Communicator.wait_signal``."""

    peer: int
    op_count: int = 1
    signal_index: int = 0
    context: int = 0

    @property
    def _lowpp(self):
        d = _b.WaitSignalDesc()
        d.op_cnt, d.peer, d.sig_idx, d.ctx = self.op_count, self.peer, self.signal_index, self.context
        return d


_DEV_FIELDS = ("lsa_multimem", "barrier_count", "lsa_barrier_count", "rail_gin_barrier_count",
               "lsa_ll_a2a_block_count", "lsa_ll_a2a_slot_count", "gin_force_enable",
               "gin_context_count", "gin_signal_count", "gin_counter_count", "gin_connection_type",
               "gin_exclusive_contexts", "gin_queue_depth", "world_gin_barrier_count",
               "gin_traffic_class")
_DEV_IGNORED = ("gin_strong_signals_required", "gin_va_signals_required")


class NCCLDevCommRequirements:
    """Requirements of a device communicator (``ncclDevCommRequirements_t``);
    keyword-only; ``None`` keeps the initializer's default."""

    def __init__(self, **fields: Any):
        self._lowpp = _b.DevCommRequirements()
        self._values: dict[str, Any] = {}
        for name, value in fields.items():
            if name in _DEV_IGNORED:
                self._values[name] = value
                continue
            if name not in _DEV_FIELDS:
                raise TypeError(f"NCCLDevCommRequirements got an unexpected field {name!r}")
            if value is not None:
                setattr(self._lowpp, name, operator.index(value))
                self._values[name] = value

    def __getattr__(self, name: str) -> Any:
        if name in _DEV_FIELDS:
            return getattr(self._lowpp, name)
        if name in _DEV_IGNORED:
            return self._values.get(name)
        raise AttributeError(name)

    @property
    def ptr(self) -> int:
        return self._lowpp.ptr

    def __repr__(self) -> str:
        return "<NCCLDevCommRequirements: " + (", ".join(
            f"{k}={v!r}" for k, v in self._values.items()) or "defaults") + ">"
