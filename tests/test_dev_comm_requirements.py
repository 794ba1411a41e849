"""NCCLDevCommRequirements as a dataclass, and the C chains nccl.core builds
from it for ncclDevCommCreate (on the recording stub)."""
from __future__ import annotations

import dataclasses

import pytest

import nccl.bindings as b
import nccl.core as nc
from host_ranks import needs_host, run_ranks
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
    stub.nccl4pyStubSetDeref(1)  # real memory: the stub records and fills the chains
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
    # what reached ncclDevCommCreate (the stub walks the chains it got)
    rec = dict(f.split("=", 1) for f in stub.nccl4pyStubLastCall().decode().split(" ")[1:])
    assert rec["teams"] == "4,1,1,1,1;2,0,4,1,1"
    slots = b.ll_a2a_calc_slots(8, 4)
    assert rec["resources"] == f"192,16,0,0;{32 * slots},16,0,0"
    # the handles read back what the library wrote through the chains
    handles = res.resource_handles
    assert [type(h).__name__ for h in handles] == ["LsaBarrierHandle", "LLA2AHandle"]
    assert (handles[0].buf_handle, handles[0].n_barriers) == (0x100, 3)
    assert (handles[1].buf_handle, handles[1].n_slots) == (0x101, slots)
    assert res.multimem_handle(t1).mc_base_pointer == 0x5EED0000 + 0x1000
    assert res.multimem_handle(t2).mc_base_pointer == 0x5EED0000 + 0x1001
    assert handles[0] == res.resource_handles[0]
    assert isinstance(res.multimem_handle(t1), nc.MultimemHandle)
    with pytest.raises(KeyError, match="not requested with multimem=True"):
        res.multimem_handle(nc.NCCLTeam(8, 0, 1))
    with pytest.raises(TypeError, match="returned by NCCL APIs"):
        nc.LsaBarrierHandle()
    assert (res.dev_comm.rank, res.dev_comm.n_ranks) == (3, 8)
    res.close()
    stub.nccl4pyStubSetDeref(0)


def test_gin_custom_array_of_nccl_2_32_6_in_the_bindings():
    """ncclDevCommRequirements_t of NCCL 2.32.6 (136 bytes) ends with
    ginCustomArray (int *) and ginCustomArrayCount, both read and written."""
    import ctypes

    s = b.DevCommRequirements()
    assert (s.size_, s.version, s.gin_custom_array, s.gin_custom_array_count) == (136, 23206, 0, 0)
    ranks = (ctypes.c_int * 3)(4, 0, 2)
    s.gin_custom_array, s.gin_custom_array_count = ctypes.addressof(ranks), 3
    s.gin_connection_type = b.GinConnectionType.CUSTOM_ARRAY
    raw = bytes(s)
    assert int.from_bytes(raw[120:128], "little") == ctypes.addressof(ranks)
    assert int.from_bytes(raw[128:132], "little") == 3 and int.from_bytes(raw[72:76], "little") == 4
    assert (s.gin_custom_array, s.gin_custom_array_count) == (ctypes.addressof(ranks), 3)
    with pytest.raises(OverflowError):
        s.gin_custom_array_count = 2**31


def test_gin_custom_array_is_a_sequence_of_ranks_in_nccl_core(stub):
    """NCCLDevCommRequirements(gin_custom_array=...) takes world ranks; the struct
    points to an int32 copy (alive as long as what it was made for) and counts it."""
    import ctypes
    import gc

    names = [f.name for f in dataclasses.fields(nc.NCCLDevCommRequirements)]
    assert "gin_custom_array" in names and "gin_custom_array_count" not in names
    req = nc.NCCLDevCommRequirements(gin_custom_array=[3, 1, 2],
                                     gin_connection_type=nc.NcclGinConnectionType.CUSTOM_ARRAY)
    assert req.gin_custom_array == (3, 1, 2) and nc.NcclGinConnectionType.CUSTOM_ARRAY == 4

    def read(s):
        return list((ctypes.c_int * s.gin_custom_array_count).from_address(s.gin_custom_array))

    s = b.DevCommRequirements.from_ptr(req.ptr)
    assert read(s) == [3, 1, 2] and s.gin_connection_type == 4
    empty = b.DevCommRequirements.from_ptr(nc.NCCLDevCommRequirements(gin_custom_array=()).ptr)
    assert (empty.gin_custom_array, empty.gin_custom_array_count) == (0, 0)
    # create_dev_comm hands the library the array; the resource keeps it alive
    comm = nc.Communicator(COMM)
    res = comm.create_dev_comm(nc.NCCLDevCommRequirements(gin_custom_array=range(5)))
    gc.collect()
    bytearray(1 << 16)  # reuse of freed memory would show
    assert read(res._reqs.reqs) == [0, 1, 2, 3, 4]
    res.close()
    req.gin_custom_array = [7]  # reassigned after construction: checked when used
    assert read(b.DevCommRequirements.from_ptr(req.ptr)) == [7]
    for bad, exc, match in (([1.0], TypeError, "holds ints, not float"),
                            ([True], TypeError, "holds ints, not bool"),
                            ("12", TypeError, "sequence of ints, not str"),
                            (5, TypeError, "sequence of ints, not int"),
                            ([-1], ValueError, "0 to 2\\*\\*31-1"),
                            ([2**31], ValueError, "not 2147483648")):
        with pytest.raises(exc, match=match):
            nc.NCCLDevCommRequirements(gin_custom_array=bad)


def test_0_2_forms_still_work():
    r = nc.NCCLDevCommRequirements(lsa_multimem=True, gin_context_count=8)
    s = b.DevCommRequirements.from_ptr(r.ptr)
    assert s.lsa_multimem is True and s.gin_context_count == 8


HOST_CODE = '''
out = {}
def outcome(call):
    try:
        call()
        return "ok"
    except Exception as e:
        return f"{type(e).__name__}: {e}"

world = comm.team_world
req = nc.NCCLDevCommRequirements(teams=(nc.TeamRequirement(world, multimem=True),),
                                 resources=(nc.LsaBarrierRequirement(world, 1),))
out["dev_comm"] = outcome(lambda: comm.create_dev_comm(req))
out["plain_dev_comm"] = outcome(lambda: comm.create_dev_comm())
buf = np.zeros(64, np.float32)
win = comm.register_window(buf)
out["le_peer"] = outcome(lambda: win.get_peer_le_info(0))
out["le_multimem"] = outcome(lambda: win.get_multimem_le_info())
out["le_cft"] = outcome(lambda: win.get_cft_le_info(0, world))
from nccl.core.devhandles import view_of
import nccl.bindings as b
mm = view_of(b.MultimemHandle())
out["mm_pointer"] = outcome(lambda: win.get_multimem_device_pointer(mm))
win.close()
report(**out)
'''


# what each call of HOST_CODE needs first that the host backend lacks
HOST_MISSING = {"dev_comm": "ncclLsaBarrierCreateRequirement", "plain_dev_comm": "ncclDevCommCreate",
                "le_peer": "ncclGetPeerDeviceLeInfo", "le_multimem": "ncclGetMultimemDeviceLeInfo",
                "le_cft": "ncclGetCftDeviceLeInfo", "mm_pointer": "ncclGetMultimemDevicePointer"}


@needs_host
def test_host_backend_refuses_device_calls_by_name(tmp_path):
    ranks = run_ranks(tmp_path, HOST_CODE, 2)
    assert [r["rank"] for r in ranks] == [0, 1]
    for r in ranks:
        assert set(r) - {"rank"} == set(HOST_MISSING)
        for key, fn in HOST_MISSING.items():
            # FunctionNotFoundError is a NotImplementedError; the message names the C function
            assert r[key].startswith(f"FunctionNotFoundError: function {fn} is not found"), r[key]


def test_window_le_info_and_multimem_pointer_reach_the_library(stub):
    from gen import api as gen_api

    table = {e.pyname: i for i, e in enumerate(gen_api.parse_table())}
    stub.nccl4pyStubSetWriteOutputs(1)
    win = nc.RegisteredWindowHandle(COMM, 0x10, 64)

    def rec():
        parts = stub.nccl4pyStubLastCall().decode().split(" ")
        return parts[0], dict(f.split("=", 1) for f in parts[1:])

    def expected(name):  # what the stub writes to (leId, leOffset) of entry `name`
        i = table[name]
        return nc.CftLeInfo(0xFFFFFFF0 + i % 8, (1 << 40) + i)

    assert win.get_peer_le_info(1, offset=8) == expected("get_peer_device_le_info")
    fn, f = rec()
    assert fn == "ncclGetPeerDeviceLeInfo" and f["peerWorld"] == "int:1" and f["offset"] == "size:8"
    assert win.get_multimem_le_info(4) == expected("get_multimem_device_le_info")
    assert rec()[0] == "ncclGetMultimemDeviceLeInfo"
    assert win.get_cft_le_info(2, nc.NCCLTeam(4, 1, 1)) == expected("get_cft_device_le_info")
    fn, f = rec()
    assert fn == "ncclGetCftDeviceLeInfo" and f["cftTeam"] == "team:4,1,1" and f["peerCft"] == "int:2"
    from nccl.core.devhandles import view_of

    mm = b.MultimemHandle()
    mm.mc_base_ptr = 0x7000
    assert win.get_multimem_device_pointer(view_of(mm), 16) == 0x5EED0000 + table[
        "get_multimem_device_pointer"]
    fn, f = rec()
    assert fn == "ncclGetMultimemDevicePointer" and f["multimem"] == "multimem:0x7000"
