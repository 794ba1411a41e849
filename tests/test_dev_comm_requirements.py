"""NCCLDevCommRequirements as a dataclass, and the C chains nccl.core builds
from it for ncclDevCommCreate (on the recording stub)."""
from __future__ import annotations

import dataclasses

import pytest

import nccl.bindings as b
import nccl.core as nc
from stub_comm import COMM


def test_is_a_keyword_only_dataclass_with_the_0_6_fields():
    names = [f.name for f in dataclasses.fields(nc.NCCLDevCommRequirements)]
    for n in ("lsa_multimem", "barrier_count", "gin_context_count", "gin_type", "cft_caps",
              "cft_barrier_count", "gin_strong_signals_required", "teams", "resources"):
        assert n in names
    assert "use_runtime_version" not in names
    r = nc.NCCLDevCommRequirements(barrier_count=3)
    assert dataclasses.replace(r, lsa_multimem=True).lsa_multimem is True
    assert dataclasses.asdict(r)["barrier_count"] == 3 and r.teams == () and r.gin_type is None
    with pytest.raises(TypeError):
        nc.NCCLDevCommRequirements(3)
    with pytest.raises(TypeError, match="unknown resource requirement"):
        nc.NCCLDevCommRequirements(resources=[object()])
    with pytest.raises(TypeError, match="TeamRequirement"):
        nc.NCCLDevCommRequirements(teams=[nc.NCCLTeam(2, 0, 1)])
    with pytest.raises(OverflowError):
        nc.NCCLDevCommRequirements(barrier_count=2**40)


def test_chains_hold_what_the_dataclass_says(stub):
    stub.nccl4pyStubSetWriteOutputs(1)
    t1, t2 = nc.NCCLTeam(4, 1, 1), nc.NCCLTeam(2, 0, 4)
    req = nc.NCCLDevCommRequirements(
        barrier_count=2,
        teams=(nc.TeamRequirement(t1), nc.TeamRequirement(t2, multimem=True),
               nc.TeamRequirement(t1, multimem=True)),
        resources=(nc.LsaBarrierRequirement(t1, 3), nc.LLA2ARequirement(1, 8, 4)))
    comm = nc.Communicator(COMM)
    res = comm.create_dev_comm(req)
    chain = res._reqs
    assert chain.reqs.barrier_count == 2
    # one node per team (merged by value, multimem if any entry asked), in first-seen order
    node = b.TeamRequirements.from_ptr(chain.reqs.team_requirements_list)
    seen = []
    while True:
        seen.append(((node.team.n_ranks, node.team.rank, node.team.stride), node.multimem,
                     node.out_multimem_handle != 0))
        if not node.next:
            break
        node = b.TeamRequirements.from_ptr(node.next)
    assert seen == [((4, 1, 1), True, True), ((2, 0, 4), True, True)]
    first = b.DevResourceRequirements.from_ptr(chain.reqs.resource_requirements_list)
    assert first.next == chain.resource_nodes[1].ptr and chain.resource_nodes[1].next == 0
    handles = res.resource_handles
    assert [type(h).__name__ for h in handles] == ["LsaBarrierHandle", "LLA2AHandle"]
    assert handles[0] == res.resource_handles[0]
    assert isinstance(res.multimem_handle(t1), nc.MultimemHandle)
    with pytest.raises(KeyError, match="not requested with multimem=True"):
        res.multimem_handle(nc.NCCLTeam(8, 0, 1))
    with pytest.raises(TypeError, match="returned by NCCL APIs"):
        nc.LsaBarrierHandle()
    assert (res.dev_comm.rank, res.dev_comm.n_ranks) == (3, 8)
    res.close()


def test_0_2_forms_still_work():
    r = nc.NCCLDevCommRequirements(lsa_multimem=True, gin_context_count=8)
    s = b.DevCommRequirements.from_ptr(r.ptr)
    assert s.lsa_multimem is True and s.gin_context_count == 8
