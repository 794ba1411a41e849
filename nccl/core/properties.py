"""``NCCLCommProperties`` (nccl4py 0.6): what the library reports about a
communicator, as a frozen dataclass."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .enums import NcclGinConnectionType, decode_gin_type

__all__ = ["NCCLCommProperties"]


@dataclass(frozen=True, kw_only=True)
class NCCLCommProperties:
    """The properties of a communicator (``ncclCommProperties_t``).

    Fields from NCCL 2.31 and 2.32 are ``None`` when the loaded library does
    not report them.  GIN types are decoded for the loaded library's family
    and version (see ``nccl.core.enums.decode_gin_type``).
    """

    rank: int
    n_ranks: int
    cuda_dev: int
    nvml_dev: int
    device_api_support: bool
    multimem_support: bool
    gin_type: Any
    n_lsa_teams: int
    host_rma_support: bool
    railed_gin_type: Any
    comm_hash: int | None = None
    gin_min_stride: int | None = None
    gin_connection_type: NcclGinConnectionType | None = None
    available_gin_types: frozenset | None = None
    dev_comm_runtime_version_size: int | None = None
    cft_support: bool | None = None
    cft_multicast_support: bool | None = None
    cft_counted_support: bool | None = None

    @classmethod
    def _from_struct(cls, pod: Any, reported: frozenset[str] | None = None) -> NCCLCommProperties:
        """From the low-level ``CommProperties`` the library filled; a field
        outside ``reported`` (the fields of the loaded library's layout, all of
        the struct's when None) is left ``None``."""

        def get(name: str) -> Any:
            if reported is not None and name not in reported:
                return None
            return getattr(pod, name, None)

        def flag(name: str) -> bool | None:
            v = get(name)
            return None if v is None else bool(v)

        conn = get("gin_connection_type")
        support = get("gin_support")
        available = None
        if support is not None:
            available = frozenset(decode_gin_type(i) for i, on in enumerate(support)
                                  if on and i != 0)
        return cls(rank=pod.rank, n_ranks=pod.n_ranks, cuda_dev=pod.cuda_dev,
                   nvml_dev=pod.nvml_dev, device_api_support=bool(pod.device_api_support),
                   multimem_support=bool(pod.multimem_support),
                   gin_type=decode_gin_type(pod.gin_type), n_lsa_teams=pod.n_lsa_teams,
                   host_rma_support=bool(pod.host_rma_support),
                   railed_gin_type=decode_gin_type(pod.railed_gin_type),
                   comm_hash=get("comm_hash"), gin_min_stride=get("gin_min_stride"),
                   gin_connection_type=None if conn is None else NcclGinConnectionType(conn),
                   available_gin_types=available,
                   dev_comm_runtime_version_size=get("dev_comm_runtime_version_size"),
                   cft_support=flag("cft_support"),
                   cft_multicast_support=flag("cft_multicast_support"),
                   cft_counted_support=flag("cft_counted_support"))
