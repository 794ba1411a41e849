"""Teams of a communicator and the device-communicator requirements that
name them (nccl4py 0.6): ``NCCLTeam``, ``TeamRequirement``,
``LsaBarrierRequirement``, ``GinBarrierRequirement``, ``LLA2ARequirement``."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["NCCLTeam", "TeamRequirement", "LsaBarrierRequirement", "GinBarrierRequirement",
           "LLA2ARequirement"]


@dataclass(frozen=True)
class NCCLTeam:
    """A team (``ncclTeam_t``): ``n_ranks`` ranks, this rank's index ``rank``
    in it, and the distance ``stride`` between neighbours in world ranks."""

    n_ranks: int
    rank: int
    stride: int


@dataclass(frozen=True)
class TeamRequirement:
    team: NCCLTeam
    multimem: bool = False


@dataclass(frozen=True)
class LsaBarrierRequirement:
    team: NCCLTeam
    n_barriers: int


@dataclass(frozen=True)
class GinBarrierRequirement:
    team: NCCLTeam
    n_barriers: int


@dataclass(frozen=True)
class LLA2ARequirement:
    n_blocks: int
    max_elements: int
    max_element_size: int
