"""NCCLCommProperties and NCCLTeam: the 0.6 dataclasses."""
from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from nccl.core.properties import NCCLCommProperties
from nccl.core.team import LLA2ARequirement, NCCLTeam, TeamRequirement

BASE = dict(rank=1, n_ranks=4, cuda_dev=0, nvml_dev=0, device_api_support=1,
            multimem_support=0, gin_type=0, n_lsa_teams=1, host_rma_support=0,
            railed_gin_type=0)


def test_fields_a_2_30_library_does_not_report_are_none():
    p = NCCLCommProperties._from_struct(SimpleNamespace(**BASE))
    assert (p.rank, p.n_ranks, p.device_api_support, p.multimem_support) == (1, 4, True, False)
    assert p.comm_hash is None and p.gin_connection_type is None and p.cft_support is None
    assert p.available_gin_types is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.rank = 2  # type: ignore[misc]
    assert hash(p) == hash(NCCLCommProperties._from_struct(SimpleNamespace(**BASE)))


def test_2_32_fields_decoded():
    support = [0] * 64
    support[3] = support[5] = 1
    pod = SimpleNamespace(**BASE, comm_hash=0xABC, gin_min_stride=2, gin_connection_type=3,
                          gin_support=support, dev_comm_runtime_version_size=248,
                          cft_support=1, cft_multicast_support=0, cft_counted_support=1)
    p = NCCLCommProperties._from_struct(pod)
    assert p.comm_hash == 0xABC and p.gin_min_stride == 2
    assert p.gin_connection_type == 3 and p.gin_connection_type.name == "CUSTOM_STRIDE"
    assert {int(t) for t in p.available_gin_types} == {3, 5}
    assert (p.cft_support, p.cft_multicast_support, p.cft_counted_support) == (True, False, True)
    # a field outside the loaded library's layout is not read
    q = NCCLCommProperties._from_struct(pod, reported=frozenset({"comm_hash"}))
    assert q.comm_hash == 0xABC and q.cft_support is None and q.available_gin_types is None


def test_team():
    t = NCCLTeam(4, 1, 2)
    assert t == NCCLTeam(n_ranks=4, rank=1, stride=2) and hash(t) == hash(NCCLTeam(4, 1, 2))
    assert dataclasses.astuple(t) == (4, 1, 2)
    assert TeamRequirement(t).multimem is False
    assert LLA2ARequirement(1, 2, 3).max_element_size == 3


@pytest.mark.nccl(nranks=[2, 4])
def test_communicator_properties_match_the_communicator(comm):
    p = comm.properties
    assert isinstance(p, NCCLCommProperties)
    assert (p.rank, p.n_ranks) == (comm.rank, comm.nranks)
    assert p.gin_type == comm.gin_type and p.n_lsa_teams == comm.n_lsa_teams
