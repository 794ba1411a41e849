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
    in it, and the distance ``stride`` between neighbours in world ranks.

    A team a Communicator returns remembers that communicator (``_comm``,
    its handle; not a field: equality, hashing and ``astuple`` see the three
    values alone): using it with another one is NcclInvalid.  A team made by
    hand belongs to none."""

    n_ranks: int
    rank: int
    stride: int
    _comm = 0  # class default: made by hand

    @classmethod
    def _of(cls, n_ranks: int, rank: int, stride: int, comm: int) -> "NCCLTeam":
        team = cls(n_ranks, rank, stride)
        object.__setattr__(team, "_comm", int(comm))
        return team



def check_team(team: object, comm: int, what: str = "team") -> None:
    """NcclInvalid when team is an NCCLTeam another communicator made (a
    team given another way, a tuple or a bindings Team, names none)."""
    if isinstance(team, NCCLTeam):
        from .resources import check_owner

        check_owner(team._comm, int(comm), what, "made by", "a team")


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
