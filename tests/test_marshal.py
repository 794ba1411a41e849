"""Every API-table entry is called through the recording stub, and the stub's
record proves that each argument reached the right C parameter with the
right C type (pointers with the top bit set, sizes >= 2**32, negative ints,
enum values), in both calling conventions.

The tests fail when a table entry has no case here (entries whose every
parameter is one int are covered by the generic cases), no wrapper, no
function in the recording stub, or no typed entry in nccl/_nccl.pyi.
"""
from __future__ import annotations

import re

from gen import api as gen_api
import pytest

import nccl.bindings as b
from nccl import _nccl

TABLE = gen_api.parse_table()
BY_PY = {e.pyname: e for e in TABLE}
OUT_BASE = 0x5EED0000
OUT_INT = 4200
OUT_U64 = 1 << 40

# Distinct values per C type.  Pointers have the top bit set so that a value
# squeezed through a 32-bit or signed conversion shows up wrong.
PTRS = [0xFFFF_8000_0000_0000 + 0x1111 * (i + 1) for i in range(12)]
SIZES = [2**32 + 7 * (i + 1) for i in range(12)]
INTS = [-(1000 + 17 * i) for i in range(12)]
UINTS = [2**32 - 1 - i for i in range(12)]
ENUMS = {"dtype": 9, "redop": 3, "residence": 1, "memstat": 2, "cftmode": 2}


def idx(entry) -> int:
    return TABLE.index(entry)


def values_for(entry):
    """Python arguments and the expected record for a simple entry."""
    args, rec = [], [entry.name]
    for i, p in enumerate(entry.params):
        k = p.kind
        if gen_api.KINDS[k].cast == "(void **)":  # an address or handle
            v = PTRS[i]
            rec.append(f"{p.name}={k}:{v:#x}")
        elif k == "size":
            v = SIZES[i]
            rec.append(f"{p.name}={k}:{v}")
        elif k == "int":
            v = INTS[i]
            rec.append(f"{p.name}={k}:{v}")
        elif k == "uint":
            v = UINTS[i]
            rec.append(f"{p.name}={k}:{v}")
        else:
            v = ENUMS[k]
            rec.append(f"{p.name}={k}:{v}")
        args.append(v)
    return args, " ".join(rec)


def last(stub) -> str:
    return stub.nccl4pyStubLastCall().decode()


def returns_out(stub, name: str, *args) -> dict[str, str]:
    """``b.<name>(*args)`` returns the value the stub wrote to the omitted
    out-argument; the fields of the call the stub recorded."""
    assert getattr(b, name)(*args) == OUT_BASE + idx(BY_PY[name])
    return fields(last(stub))


def fields(record: str) -> dict[str, str]:
    out = {}
    for part in record.split(" ")[1:]:
        if "=" in part:
            k, _, v = part.partition("=")
            out[k] = v
    return out


# Entries whose every parameter is one int: a generic case each.  The stub
# returns STUB_OUT_INT + index from a function that returns an int.
SIMPLE = [e for e in TABLE if not e.hand and e.ret in ("status", "int")
          and all(p.kind in gen_api.SIMPLE_KINDS for p in e.params)]


def result_for(entry):
    return OUT_INT + idx(entry) if entry.ret == "int" else None


@pytest.mark.parametrize("entry", SIMPLE, ids=lambda e: e.pyname)
def test_simple_positional(stub, entry):
    args, expected = values_for(entry)
    assert getattr(b, entry.pyname)(*args) == result_for(entry)
    assert last(stub) == expected


@pytest.mark.parametrize("entry", [e for e in SIMPLE if e.params], ids=lambda e: e.pyname)
def test_simple_keywords(stub, entry):
    args, expected = values_for(entry)
    kwargs = {p.pyname: v for p, v in zip(entry.params, args)}
    assert getattr(b, entry.pyname)(**kwargs) == result_for(entry)
    assert last(stub) == expected


def test_negative_and_unsigned_addresses_agree(stub):
    b.all_reduce(-16, 2**64 - 16, 1, 7, 0, 0, 0)
    f = fields(last(stub))
    assert f["sendbuff"] == "cptr:0xfffffffffffffff0"
    assert f["recvbuff"] == "ptr:0xfffffffffffffff0"


# Values on both sides of each width the converters' inline path reads
# directly (0, 1 and 2 digits of 30 bits, either sign) and beyond it.
DIGIT_EDGES = [0, 1, 2**30 - 1, 2**30, 2**31 - 1, 2**31, 2**32 + 5, 2**60 - 1, 2**60,
               2**63 - 1, 2**63, 2**64 - 1]


@pytest.mark.parametrize("v", DIGIT_EDGES + [-x for x in DIGIT_EDGES[1:10]] + [-(2**63)])
def test_int_widths_reach_every_one_int_kind(stub, v):
    class Sub(int):
        pass

    for val in (v, Sub(v)):
        b.all_reduce(val, val, 0, 7, 0, val, val)
        f = fields(last(stub))
        want = f"{v % 2**64:#x}"
        assert (f["sendbuff"], f["recvbuff"], f["comm"], f["stream"]) == (
            f"cptr:{want}", f"ptr:{want}", f"comm:{want}", f"stream:{want}")
        if v >= 0:
            b.all_reduce(0, 0, val, 7, 0, 0, 0)
            assert fields(last(stub))["count"] == f"size:{v}"
        else:
            with pytest.raises(OverflowError, match="count must be non-negative"):
                b.all_reduce(0, 0, val, 7, 0, 0, 0)
        if -(2**31) <= v < 2**31:
            b.all_reduce(0, 0, 0, val, 0, 0, 0)
            assert fields(last(stub))["datatype"] == f"dtype:{v}"
        else:
            with pytest.raises(OverflowError, match="datatype does not fit in a C int"):
                b.all_reduce(0, 0, 0, val, 0, 0, 0)


def test_handle_objects_and_their_subclasses_give_their_slot(stub):
    class MyComm(b.Comm):
        pass

    for comm in (b.Comm(0x1234_5678_9ABC), MyComm(-8)):
        b.all_reduce(1, 2, 3, 7, 0, comm, 0)
        assert fields(last(stub))["comm"] == f"comm:{int(comm) % 2**64:#x}"
    with pytest.raises(TypeError, match="comm must be a Comm .or an int handle., not a Window"):
        b.all_reduce(1, 2, 3, 7, 0, b.Window(5), 0)


def test_error_status_raises_with_library_text(stub):
    stub.nccl4pyStubSetResult(5)
    with pytest.raises(b.NCCLError) as ei:
        b.all_reduce(1, 2, 3, 7, 0, 4, 5)
    assert ei.value.status == 5
    assert str(ei.value) == "InvalidUsage (5): stub error string 5 [last error: stub last error]"
    stub.nccl4pyStubSetResult(7)  # InProgress is not an error
    assert b.all_reduce(1, 2, 3, 7, 0, 4, 5) is None


# ---------------------------------------------------------------- hand-written

def uid_bytes(i: int) -> bytes:
    return bytes((j * 7 + i) & 0xFF for j in range(128))


def case_get_version(stub):
    e = BY_PY["get_version"]
    assert b.get_version() == OUT_INT + idx(e)
    assert last(stub).startswith("ncclGetVersion version=out_int:0x")


def case_get_unique_id(stub):
    e = BY_PY["get_unique_id"]
    uid = b.get_unique_id()  # 0.3: returns a UniqueId
    assert isinstance(uid, b.UniqueId)
    assert bytes(uid) == uid_bytes(idx(e))
    assert fields(last(stub))["uniqueId"] == f"uid_ptr:{uid.ptr:#x}"
    storage = bytearray(128)  # 0.2: fills caller storage
    assert b.get_unique_id(storage) is None
    assert bytes(storage) == uid_bytes(idx(e))
    box = b.UniqueId()
    assert b.get_unique_id(box.ptr) is None
    assert bytes(box) == uid_bytes(idx(e))


def case_get_error_string(stub):
    assert b.get_error_string(-3) == "stub error string -3"
    assert last(stub) == "ncclGetErrorString result=result:-3"


def case_get_last_error(stub):
    assert b.get_last_error(PTRS[0]) == "stub last error"
    assert last(stub) == f"ncclGetLastError comm=comm:{PTRS[0]:#x}"


def case_mem_alloc(stub):
    assert returns_out(stub, "mem_alloc", SIZES[1])["size"] == f"size:{SIZES[1]}"


def _check_init(stub, name, rec_expect):
    f = fields(last(stub))
    for k, v in rec_expect.items():
        assert f[k] == v, (name, k, f)


def case_comm_init_rank(stub):
    e = BY_PY["comm_init_rank"]
    uid = b.UniqueId.from_bytes(uid_bytes(3))
    # 0.2: handle returned
    assert b.comm_init_rank(INTS[1], uid, INTS[3]) == OUT_BASE + idx(e)
    _check_init(stub, e.name, {"nranks": f"int:{INTS[1]}", "rank": f"int:{INTS[3]}",
                               "commId": "uid:" + uid_bytes(3).hex()})
    # 0.3: caller storage, status returned
    box = b.PointerBox()
    assert b.comm_init_rank(box.address, 4, bytearray(uid_bytes(4)), 2) == 0
    assert box.ptr == OUT_BASE + idx(e)
    _check_init(stub, e.name, {"comm": f"out_comm:{box.address:#x}",
                               "commId": "uid:" + uid_bytes(4).hex()})
    # keywords, 0.3 names
    box2 = b.PointerBox()
    b.comm_init_rank(comm=box2.address, nranks=2, comm_id=uid, rank=1)
    assert int(box2) == OUT_BASE + idx(e)


def case_comm_init_rank_config(stub):
    e = BY_PY["comm_init_rank_config"]
    cfg = b.Config()
    cfg.blocking = 0
    cfg.comm_name = "trainer"
    stub.nccl4pyStubSetDeref(1)
    assert b.comm_init_rank_config(8, uid_bytes(1), 7, cfg) == OUT_BASE + idx(e)
    f = fields(last(stub))
    assert f["config"] == f"config:{cfg.ptr:#x}"
    assert f["*config"] == bytes(cfg).hex()
    assert f["nranks"] == "int:8" and f["rank"] == "int:7"
    box = b.PointerBox()
    assert b.comm_init_rank_config(box.address, 8, uid_bytes(1), 7, 0) == 0
    assert fields(last(stub))["config"] == "config:0x0"
    assert box.ptr == OUT_BASE + idx(e)
    b.comm_init_rank_config(8, uid_bytes(1), 7, cfg.ptr)
    assert fields(last(stub))["config"] == f"config:{cfg.ptr:#x}"


def case_comm_init_rank_scalable(stub):
    e = BY_PY["comm_init_rank_scalable"]
    ids = [b.UniqueId.from_bytes(uid_bytes(i)) for i in range(3)]
    stub.nccl4pyStubSetDeref(1)
    assert b.comm_init_rank_scalable(16, 5, 3, ids, None) == OUT_BASE + idx(e)
    f = fields(last(stub))
    assert f["nranks"] == "int:16" and f["myrank"] == "int:5" and f["nId"] == "int:3"
    assert f["*commIds"] == uid_bytes(0).hex()  # the stub shows the first id
    box = b.PointerBox()
    joined = bytearray(b"".join(uid_bytes(i) for i in range(2)))
    assert b.comm_init_rank_scalable(box.address, 16, 5, 2, joined, b.Config()) == 0
    assert box.ptr == OUT_BASE + idx(e)
    with pytest.raises(ValueError):
        b.comm_init_rank_scalable(16, 5, 3, ids[:2], None)


def case_comm_init_all(stub):
    e = BY_PY["comm_init_all"]
    comms = b.comm_init_all(3, [4, -5, 6])
    assert comms[0] == OUT_BASE + idx(e)
    assert len(comms) == 3
    assert fields(last(stub))["devlist"].endswith("[4,-5,6]")
    b.comm_init_all(2, None)
    assert fields(last(stub))["devlist"] == "cint_array:0x0[]"
    assert b.comm_init_all(0) == []
    with pytest.raises(ValueError):
        b.comm_init_all(2, [1, 2, 3])


def case_comm_split(stub):
    e = BY_PY["comm_split"]
    assert b.comm_split(PTRS[0], -1, INTS[2], None) == OUT_BASE + idx(e)
    f = fields(last(stub))
    assert f == {"comm": f"comm:{PTRS[0]:#x}", "color": "int:-1", "key": f"int:{INTS[2]}",
                 "newcomm": f["newcomm"], "config": "config:0x0"}
    box = b.PointerBox()
    assert b.comm_split(PTRS[0], 3, 4, box.address, 0) == 0
    assert fields(last(stub))["newcomm"] == f"out_comm:{box.address:#x}"
    assert box.ptr == OUT_BASE + idx(e)


def case_comm_shrink(stub):
    e = BY_PY["comm_shrink"]
    assert b.comm_shrink(PTRS[0], [2, 5], 2, None, 1) == OUT_BASE + idx(e)
    f = fields(last(stub))
    assert f["excludeRanksList"].endswith("[2,5]")
    assert f["excludeRanksCount"] == "int:2" and f["shrinkFlags"] == "int:1"
    box = b.PointerBox()
    assert b.comm_shrink(PTRS[0], (7,), 1, box.address, b.Config(), 0) == 0
    assert box.ptr == OUT_BASE + idx(e)
    with pytest.raises(ValueError):
        b.comm_shrink(PTRS[0], [1, 2, 3], 2, None, 0)


def case_comm_get_unique_id(stub):
    e = BY_PY["comm_get_unique_id"]
    uid = b.comm_get_unique_id(PTRS[1])
    assert bytes(uid) == uid_bytes(idx(e))
    assert fields(last(stub))["comm"] == f"comm:{PTRS[1]:#x}"
    store = bytearray(128)
    assert b.comm_get_unique_id(PTRS[1], store) is None
    assert bytes(store) == uid_bytes(idx(e))


def case_comm_grow(stub):
    e = BY_PY["comm_grow"]
    uid = b.UniqueId.from_bytes(uid_bytes(9))
    stub.nccl4pyStubSetDeref(1)
    assert b.comm_grow(PTRS[0], 12, uid, -1, None) == OUT_BASE + idx(e)
    f = fields(last(stub))
    assert f["nRanks"] == "int:12" and f["rank"] == "int:-1"
    assert f["*uniqueId"] == uid_bytes(9).hex()
    box = b.PointerBox()
    assert b.comm_grow(0, 12, uid.ptr, 3, box.address, 0) == 0
    assert fields(last(stub))["uniqueId"] == f"cuid_ptr:{uid.ptr:#x}"
    assert box.ptr == OUT_BASE + idx(e)
    b.comm_grow(PTRS[0], 12, None, -1, None)
    assert fields(last(stub))["uniqueId"] == "cuid_ptr:0x0"


def case_comm_mem_stats(stub):
    e = BY_PY["comm_mem_stats"]
    assert b.comm_mem_stats(PTRS[0], 3) == OUT_U64 + idx(e)
    assert fields(last(stub))["stat"] == "memstat:3"


def case_comm_get_async_error(stub):
    stub.nccl4pyStubSetAsyncResult(6)
    assert b.comm_get_async_error(PTRS[2]) == 6
    assert fields(last(stub))["comm"] == f"comm:{PTRS[2]:#x}"


def _int_query(stub, name):
    e = BY_PY[name]
    assert getattr(b, name)(PTRS[3]) == OUT_INT + idx(e)
    assert last(stub).startswith(f"{e.name} comm=comm:{PTRS[3]:#x} ")


def case_comm_count(stub):
    _int_query(stub, "comm_count")


def case_comm_cu_device(stub):
    _int_query(stub, "comm_cu_device")


def case_comm_user_rank(stub):
    _int_query(stub, "comm_user_rank")


def case_comm_query_properties(stub):
    props = b.comm_query_properties(PTRS[0])
    assert isinstance(props, b.CommProperties)
    assert (props.rank, props.n_ranks, props.cuda_dev, props.nvml_dev) == (3, 8, 5, 6)
    assert props.size_ == b.comm_properties_dtype.itemsize and props.magic == 0xCAFEBEEF
    assert props.device_api_support is True and props.n_lsa_teams == 2
    # RCCL's GIN types decode without error
    assert b.GinType(props.gin_type) == b.GinType.ANVIL
    assert b.GinType(props.railed_gin_type) == b.GinType.ROCSHMEM
    out = b.CommProperties()
    assert b.comm_query_properties(PTRS[0], out.ptr) is None
    assert out.rank == 3
    assert fields(last(stub))["props"] == f"props:{out.ptr:#x}"


def case_comm_register(stub):
    f = returns_out(stub, "comm_register", PTRS[0], PTRS[1], SIZES[2])
    assert f["buff"] == f"ptr:{PTRS[1]:#x}" and f["size"] == f"size:{SIZES[2]}"


def case_comm_window_register(stub):
    e = BY_PY["comm_window_register"]
    assert b.comm_window_register(PTRS[0], PTRS[1], SIZES[2], 3) == OUT_BASE + idx(e)
    f = fields(last(stub))
    assert f["winFlags"] == "int:3" and f["size"] == f"size:{SIZES[2]}"
    box = b.PointerBox()
    assert b.comm_window_register(PTRS[0], PTRS[1], SIZES[2], box.address, 1) == 0
    assert fields(last(stub))["win"] == f"out_win:{box.address:#x}"
    assert box.ptr == OUT_BASE + idx(e)


def case_win_get_user_ptr(stub):
    assert returns_out(stub, "win_get_user_ptr", PTRS[0], PTRS[4])["win"] == f"win:{PTRS[4]:#x}"


def case_red_op_create_pre_mul_sum(stub):
    e = BY_PY["red_op_create_pre_mul_sum"]
    assert b.red_op_create_pre_mul_sum(PTRS[0], 10, 1, PTRS[3]) == OUT_INT + idx(e)
    f = fields(last(stub))
    assert f == {"op": f["op"], "scalar": f"ptr:{PTRS[0]:#x}", "datatype": "dtype:10",
                 "residence": "residence:1", "comm": f"comm:{PTRS[3]:#x}"}


def case_wait_signal(stub):
    descs = []
    for i in range(2):
        d = b.WaitSignalDesc()
        d.op_cnt, d.peer, d.sig_idx, d.ctx = 1 + i, 2 + i, 3 + i, 4 + i
        descs.append(d)
    stub.nccl4pyStubSetDeref(1)
    b.wait_signal(2, descs, PTRS[0], PTRS[1])
    f = fields(last(stub))
    assert f["nDesc"] == "int:2" and f["stream"] == f"stream:{PTRS[1]:#x}"
    assert f["*signalDescs"] == bytes(descs[0]).hex()
    raw = bytearray(bytes(descs[0]) + bytes(descs[1]))
    b.wait_signal(2, raw, PTRS[0], PTRS[1])
    assert fields(last(stub))["*signalDescs"] == bytes(descs[0]).hex()
    with pytest.raises(ValueError):
        b.wait_signal(3, descs, PTRS[0], PTRS[1])


def case_group_start(stub):
    assert _nccl._group_depth() == 0
    assert b.group_start() is None
    assert last(stub) == "ncclGroupStart" and _nccl._group_depth() == 1
    stub.nccl4pyStubSetResult(5)
    with pytest.raises(b.NCCLError):
        b.group_start()  # a failed start opens no group
    stub.nccl4pyStubSetResult(0)
    assert _nccl._group_depth() == 1
    b.group_end()


def case_group_end(stub):
    b.group_start()
    b.group_start()
    assert b.group_end() is None and _nccl._group_depth() == 1
    stub.nccl4pyStubSetResult(5)
    with pytest.raises(b.NCCLError):
        b.group_end()  # the library leaves the group even when its end fails
    stub.nccl4pyStubSetResult(0)
    assert _nccl._group_depth() == 0
    b.group_end()  # unmatched (the stub does not mind): the depth stays 0
    assert last(stub) == "ncclGroupEnd" and _nccl._group_depth() == 0


def case_group_simulate_end(stub):
    e = BY_PY["group_simulate_end"]
    info = b.group_simulate_end()
    assert isinstance(info, b.SimInfo)
    assert info.estimated_time == 1.5 + idx(e)
    assert info.magic == 0x74685283
    out = b.SimInfo()
    b.group_start()
    assert b.group_simulate_end(out.ptr) is None and _nccl._group_depth() == 0
    assert fields(last(stub))["simInfo"] == f"siminfo:{out.ptr:#x}"
    assert out.estimated_time == 1.5 + idx(e)


def case_dev_comm_create(stub):
    reqs = b.DevCommRequirements()
    reqs.barrier_count = 7
    stub.nccl4pyStubSetDeref(1)
    dc = b.dev_comm_create(PTRS[0], reqs)
    assert isinstance(dc, b.DevComm)
    # what the stub wrote reads back through the fields (the layout of reqs.version)
    assert (dc.magic, dc.version) == (0xCAFEBEEF, reqs.version)
    assert (dc.rank, dc.n_ranks, dc.lsa_rank, dc.lsa_size) == (3, 8, 1, 4)
    f = fields(last(stub))
    assert f["reqs"] == f"devreqs:{reqs.ptr:#x}" and f["*reqs"] == bytes(reqs).hex()
    assert f["outDevComm"] == f"devcomm_out:{dc.ptr:#x}"
    out = b.DevComm()
    assert b.dev_comm_create(PTRS[0], reqs.ptr, out) is None
    assert fields(last(stub))["outDevComm"] == f"devcomm_out:{out.ptr:#x}"


def case_dev_comm_destroy(stub):
    dc = b.DevComm()
    b.dev_comm_destroy(PTRS[0], dc)
    assert fields(last(stub))["devComm"] == f"cdevcomm:{dc.ptr:#x}"
    b.dev_comm_destroy(PTRS[0], dc.ptr)
    assert fields(last(stub))["devComm"] == f"cdevcomm:{dc.ptr:#x}"


def case_get_lsa_multimem_device_pointer(stub):
    f = returns_out(stub, "get_lsa_multimem_device_pointer", PTRS[0], SIZES[1])
    assert f["offset"] == f"size:{SIZES[1]}"


def case_get_lsa_device_pointer(stub):
    f = returns_out(stub, "get_lsa_device_pointer", PTRS[0], SIZES[1], INTS[2])
    assert f["lsaRank"] == f"int:{INTS[2]}" and f["window"] == f"win:{PTRS[0]:#x}"


def case_get_peer_device_pointer(stub):
    f = returns_out(stub, "get_peer_device_pointer", PTRS[0], SIZES[1], INTS[2])
    assert f["peer"] == f"int:{INTS[2]}"


def case_all_to_all_v(stub):
    from nccl.bindings import rocm_extensions as rx

    stub.nccl4pyStubSetArrayLen(3)
    # sequences: checked against the communicator size (the stub's count is
    # OUT_INT + index of ncclCommCount), so use addresses for the stub record
    import ctypes

    arrs = [(ctypes.c_size_t * 3)(*(10 * k + j for j in range(3))) for k in range(4)]
    addrs = [ctypes.addressof(a) for a in arrs]
    rx.all_to_all_v(PTRS[0], addrs[0], addrs[1], PTRS[3], addrs[2], addrs[3], 9, PTRS[7], PTRS[8])
    f = fields(last(stub))
    assert f["sendcounts"] == f"size_array:{addrs[0]:#x}[0,1,2]"
    assert f["rdispls"] == f"size_array:{addrs[3]:#x}[30,31,32]"
    assert f["datatype"] == "dtype:9" and f["stream"] == f"stream:{PTRS[8]:#x}"
    assert last(stub).startswith("ncclAllToAllv ")
    nranks = b.comm_count(PTRS[7])
    seq = list(range(nranks))
    rx.all_to_all_v(PTRS[0], seq, seq, PTRS[3], seq, seq, 9, PTRS[7], PTRS[8])
    assert fields(last(stub))["sendcounts"].endswith("[0,1,2]")
    with pytest.raises(ValueError, match="one entry per rank"):
        rx.all_to_all_v(PTRS[0], [1], [0], PTRS[3], [1], [0], 9, PTRS[7], PTRS[8])


# ------------------------------------------ NCCL 2.28 - 2.32: teams, params, resources

class _Obj:
    """An object with attributes (a struct object stand-in)."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


def _team_record(t) -> str:
    return ",".join(str(v) for v in t)


def _check_team(stub, name, *args, **kwargs):
    e = BY_PY[name]
    t = getattr(b, name)(*args, **kwargs)
    assert type(t) is b.Team
    assert (t.n_ranks, t.rank, t.stride) == (OUT_INT + idx(e), idx(e), 3)
    return t


def case_team_world(stub):
    _check_team(stub, "team_world", PTRS[0])
    assert last(stub) == f"ncclTeamWorld comm=comm:{PTRS[0]:#x}"
    _check_team(stub, "team_world", b.Comm(PTRS[1]))  # 0.6: a Comm
    assert last(stub) == f"ncclTeamWorld comm=comm:{PTRS[1]:#x}"
    with pytest.raises(TypeError, match="comm must be a Comm.*not a Window"):
        b.team_world(b.Window(PTRS[1]))


def case_team_lsa(stub):
    _check_team(stub, "team_lsa", comm=b.Comm(PTRS[2]))
    assert last(stub) == f"ncclTeamLsa comm=comm:{PTRS[2]:#x}"


def case_team_rail(stub):
    _check_team(stub, "team_rail", PTRS[3])
    assert last(stub) == f"ncclTeamRail comm=comm:{PTRS[3]:#x}"


def case_team_cft(stub):
    _check_team(stub, "team_cft", PTRS[0], 2)
    assert last(stub) == f"ncclTeamCft comm=comm:{PTRS[0]:#x} mode=cftmode:2"
    _check_team(stub, "team_cft", comm=PTRS[0], mode=1)
    assert fields(last(stub))["mode"] == "cftmode:1"


def case_team_cft_multimem(stub):
    _check_team(stub, "team_cft_multimem", PTRS[4])
    assert last(stub) == f"ncclTeamCftMultimem comm=comm:{PTRS[4]:#x}"


def _team(n_ranks, rank, stride):
    t = b.Team()
    t.n_ranks, t.rank, t.stride = n_ranks, rank, stride
    return t


def _team_args_forms():
    """Every accepted form of a team argument, with the record it gives."""
    import ctypes

    raw = (ctypes.c_int * 3)(8, -2, 2**31 - 1)
    team = _team(16, 3, 4)
    return [((8, 1, 2), "8,1,2"), (team, "16,3,4"), (team.ptr, "16,3,4"),
            (_Obj(n_ranks=4, rank=-1, stride=7), "4,-1,7"),
            (ctypes.addressof(raw), f"8,-2,{2**31 - 1}")], (raw, team)


def _rank_conv(stub, name):
    e = BY_PY[name]
    forms, keep = _team_args_forms()
    for team, rec in forms:
        assert getattr(b, name)(PTRS[0], team, INTS[2]) == OUT_INT + idx(e)
        assert last(stub) == f"{e.name} comm=comm:{PTRS[0]:#x} team=team:{rec} rank=int:{INTS[2]}"
    assert getattr(b, name)(comm=b.Comm(PTRS[1]), team=(1, 0, 1), rank=0) == OUT_INT + idx(e)
    for bad, exc in (((1, 2), ValueError), (None, TypeError), (1.5, TypeError),
                     (0, ValueError), (_Obj(n_ranks=1), AttributeError),
                     ((2**31, 0, 1), OverflowError)):
        with pytest.raises(exc):
            getattr(b, name)(PTRS[0], bad, 0)
    del keep


def case_team_rank_to_world(stub):
    _rank_conv(stub, "team_rank_to_world")


def case_team_rank_to_lsa(stub):
    _rank_conv(stub, "team_rank_to_lsa")


def case_get_multimem_device_pointer(stub):
    import ctypes

    e = BY_PY["get_multimem_device_pointer"]
    raw = ctypes.c_void_p(PTRS[5])
    mmh = b.MultimemHandle()
    mmh.mc_base_ptr = PTRS[5]
    for mm in ((PTRS[5],), _Obj(mc_base_ptr=PTRS[5]), ctypes.addressof(raw), mmh, mmh.ptr):
        got = b.get_multimem_device_pointer(b.Window(PTRS[0]), SIZES[1], mm)
        assert got == OUT_BASE + idx(e)
        assert last(stub).startswith(f"{e.name} window=win:{PTRS[0]:#x} offset=size:{SIZES[1]} "
                                     f"multimem=multimem:{PTRS[5]:#x} outPtr=out_ptr:0x")
    with pytest.raises(TypeError, match="window must be a Window.*not a Comm"):
        b.get_multimem_device_pointer(b.Comm(PTRS[0]), 0, (0,))
    with pytest.raises(TypeError):
        b.get_multimem_device_pointer(PTRS[0], 0, None)


def _le_info(stub, name, *args, **kwargs):
    e = BY_PY[name]
    le_id, le_offset = getattr(b, name)(*args, **kwargs)
    assert le_id == 0xFFFFFFF0 + idx(e) % 8 and le_offset == OUT_U64 + idx(e)
    return fields(last(stub))


def case_get_multimem_device_le_info(stub):
    f = _le_info(stub, "get_multimem_device_le_info", b.Window(PTRS[0]), SIZES[1])
    assert f["window"] == f"win:{PTRS[0]:#x}" and f["offset"] == f"size:{SIZES[1]}"


def case_get_cft_device_le_info(stub):
    f = _le_info(stub, "get_cft_device_le_info", PTRS[0], SIZES[1], INTS[2], (4, 1, 2))
    assert f["peerCft"] == f"int:{INTS[2]}" and f["cftTeam"] == "team:4,1,2"
    f = _le_info(stub, "get_cft_device_le_info", window=PTRS[1], offset=0, peer_cft=1,
                 cft_team=_team(2, 1, 1))
    assert f["cftTeam"] == "team:2,1,1" and f["window"] == f"win:{PTRS[1]:#x}"


def case_get_peer_device_le_info(stub):
    f = _le_info(stub, "get_peer_device_le_info", PTRS[0], SIZES[1], INTS[2])
    assert f["peerWorld"] == f"int:{INTS[2]}"


def _requirement(stub, name, lead, lead_rec):
    """out_handle / out_req: an address or an object with .ptr; never 0 or None."""
    e = BY_PY[name]
    h, r = _Obj(ptr=PTRS[6]), PTRS[7]
    assert getattr(b, name)(*lead, h, r) is None
    f = fields(last(stub))
    for k, v in lead_rec.items():
        assert f[k] == v, (k, f)
    kinds = [p.kind for p in e.params]
    assert f["outHandle"] == f"{kinds[-2]}:{PTRS[6]:#x}"
    assert f["outReq"] == f"{kinds[-1]}:{PTRS[7]:#x}"
    for bad_h, bad_r, exc in ((0, r, ValueError), (h, None, TypeError),
                              (_Obj(ptr=None), r, TypeError), (object(), r, TypeError),
                              (b.Comm(1), r, TypeError)):
        with pytest.raises(exc):
            getattr(b, name)(*lead, bad_h, bad_r)


def case_lsa_barrier_create_requirement(stub):
    _requirement(stub, "lsa_barrier_create_requirement", ((4, 0, 1), INTS[1]),
                 {"team": "team:4,0,1", "nBarriers": f"int:{INTS[1]}"})


def case_gin_barrier_create_requirement(stub):
    _requirement(stub, "gin_barrier_create_requirement", (b.Comm(PTRS[0]), (2, 1, 8), 3),
                 {"comm": f"comm:{PTRS[0]:#x}", "team": "team:2,1,8", "nBarriers": "int:3"})


def case_gin_inbox_a2a_create_requirement(stub):
    _requirement(stub, "gin_inbox_a2a_create_requirement", ((8, 2, 1), 5, 12),
                 {"peers": "teamv:8,2,1", "nBlocks": "int:5", "size_log2": "int:12"})


def case_param_bind(stub):
    e = BY_PY["param_bind"]
    assert b.param_bind("NCCL_DEBUG") == OUT_BASE + idx(e)
    assert last(stub).startswith("ncclParamBind out=out_param:0x")
    assert fields(last(stub))["key"] == "cstr:NCCL_DEBUG"
    assert b.param_bind(key=b"NCCL_PROTO") == OUT_BASE + idx(e)
    assert fields(last(stub))["key"] == "cstr:NCCL_PROTO"
    with pytest.raises(ValueError, match="NUL"):
        b.param_bind("A\0B")
    with pytest.raises(TypeError):
        b.param_bind(None)


# the typed getters: what the stub writes, per C type
_TYPED = {"param_get_i8": lambda i: -i, "param_get_i16": lambda i: -1000 - i,
          "param_get_i32": lambda i: -(OUT_INT + i), "param_get_i64": lambda i: -(OUT_U64 + i),
          "param_get_u8": lambda i: 200 + i % 50, "param_get_u16": lambda i: 60000 + i,
          "param_get_u32": lambda i: 4_000_000_000 + i, "param_get_u64": lambda i: OUT_U64 + i}


def _typed(stub, name):
    e = BY_PY[name]
    assert getattr(b, name)(PTRS[3]) == _TYPED[name](idx(e))
    assert last(stub).startswith(f"{e.name} h=param:{PTRS[3]:#x} out=")
    assert getattr(b, name)(h=PTRS[4]) == _TYPED[name](idx(e))
    stub.nccl4pyStubSetResult(4)
    with pytest.raises(b.NCCLError):
        getattr(b, name)(PTRS[3])


for _name in _TYPED:
    globals()["case_" + _name] = (lambda n: lambda stub: _typed(stub, n))(_name)


def case_param_get_str(stub):
    assert b.param_get_str(PTRS[3]) == "stub-text"
    assert fields(last(stub))["h"] == f"param:{PTRS[3]:#x}"


def case_param_get(stub):
    assert b.param_get(PTRS[3], 64) == bytes([1, 2, 3, 250, 0, 7])
    f = fields(last(stub))
    assert f["h"] == f"param:{PTRS[3]:#x}" and f["maxLen"] == "int:64"
    assert b.param_get(h=PTRS[3], max_len=6) == bytes([1, 2, 3, 250, 0, 7])
    assert b.param_get(PTRS[3], 2) == b""  # the stub's value does not fit: length 0
    with pytest.raises(ValueError):
        b.param_get(PTRS[3], -1)


def case_param_get_parameter(stub):
    assert b.param_get_parameter("NCCL_DEBUG") == "stub-text"
    assert last(stub).startswith("ncclParamGetParameter key=cstr:NCCL_DEBUG value=out_cstr:0x")
    assert b.param_get_parameter(key=b"X") == "stub-text"
    stub.nccl4pyStubSetResult(4)  # NCCL's answer for an unknown key
    with pytest.raises(KeyError) as ei:
        b.param_get_parameter("NO_SUCH")
    assert ei.value.args == ("NO_SUCH",)
    stub.nccl4pyStubSetResult(5)
    with pytest.raises(b.NCCLError):
        b.param_get_parameter("X")


def case_param_get_all_keys(stub):
    assert b.param_get_all_keys() == ["STUB_KEY_A", "STUB_KEY_B", "STUB_KEY_C"]
    assert last(stub).startswith("ncclParamGetAllParameterKeys table=out_cstr_list:0x")


def case_param_dump_all(stub):
    assert b.param_dump_all() is None
    assert last(stub) == "ncclParamDumpAll"


def case_reset_debug_init(stub):
    assert b.reset_debug_init() is None
    assert last(stub) == "ncclResetDebugInit"


def test_config_arguments_take_struct_objects_and_none(stub):
    """collconfig: None and 0 give NULL; an object's int .ptr its address."""
    stub.nccl4pyStubSetDeref(1)
    b.all_reduce_config(1, 2, 3, 7, 0, b.Comm(PTRS[0]), 0, None)
    assert fields(last(stub))["config"] == "collconfig:0x0"
    import ctypes

    raw = (ctypes.c_ubyte * 72)(*range(72))
    b.all_gather_config(1, 2, 3, 7, PTRS[0], 0, _Obj(ptr=ctypes.addressof(raw)))
    f = fields(last(stub))
    assert f["config"] == f"collconfig:{ctypes.addressof(raw):#x}"
    assert f["*config"] == bytes(range(72)).hex()
    with pytest.raises(TypeError, match="config must be an object with an int .ptr"):
        b.scatter_config(1, 2, 3, 7, 0, PTRS[0], 0, "cfg")
    with pytest.raises(TypeError):
        b.set_encryption(None)
    b.set_encryption(_Obj(ptr=PTRS[2]))
    assert fields(last(stub))["config"] == f"encconfig:{PTRS[2]:#x}"


def _struct_arg_case(entry, kind: str, cls, other):
    """A case for an entry whose last parameter is a struct of `cls` that also
    takes an object with an int .ptr: its struct objects, addresses and such
    objects reach the library; a struct of another class is refused."""
    def case(stub):
        head = entry.params[:-1]
        assert entry.params[-1].kind == kind
        args, expected = values_for(type(entry)(**{**vars(entry), "params": head}))
        name = entry.params[-1].pyname
        fn = getattr(b, entry.pyname)
        obj = cls()
        for wrong, named in ((other(), f"not a {other.__name__}"),
                             (_Obj(ptr=obj.ptr, _lowpp=other()),
                              f"not _Obj (a {other.__name__})")):
            with pytest.raises(TypeError) as ei:
                fn(*args, wrong)
            assert str(ei.value) == (f"{name} must be a {cls.__name__}, an object with an int "
                                     f".ptr or an int address, {named}")
        assert stub.nccl4pyStubCallCount() == 0              # nothing reached the library
        fn(*args, obj)
        assert last(stub) == f"{expected} {name}={kind}:{obj.ptr:#x}"
        fn(*args, **{name: obj.ptr})                         # its address
        assert last(stub) == f"{expected} {name}={kind}:{obj.ptr:#x}"
        fn(*args, _Obj(ptr=obj.ptr))                         # an object with an int .ptr
        assert last(stub) == f"{expected} {name}={kind}:{obj.ptr:#x}"
    return case


for _e in TABLE:
    if _e.params and _e.params[-1].kind == "collconfig":
        globals()[f"case_{_e.pyname}"] = _struct_arg_case(_e, "collconfig", b.CollConfig, b.Config)
case_set_encryption = _struct_arg_case(BY_PY["set_encryption"], "encconfig", b.EncryptionConfig,
                                       b.CollConfig)

HAND_WRITTEN = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}


def test_every_table_entry_has_a_case():
    missing = [e.pyname for e in TABLE if e not in SIMPLE and e.pyname not in HAND_WRITTEN]
    assert missing == [], f"table entries without a marshaling case: {missing}"
    stale = [n for n in HAND_WRITTEN if n not in BY_PY]
    assert stale == [], f"marshaling cases of no table entry: {stale}"


def test_every_table_entry_has_its_wrapper():
    """The module's function is the one generated for the entry: its
    docstring (text signature included) is the generator's."""
    for e in TABLE:
        fn = getattr(_nccl, e.pyname, None)
        assert fn is not None, f"no wrapper for {e.name}"
        assert getattr(b, e.pyname) is fn
        sig, _, doc = gen_api.docstring(e).partition("\n--\n\n")
        assert fn.__doc__ == doc, e.pyname
        assert fn.__text_signature__ == sig[len(e.pyname):], e.pyname


def test_every_table_entry_is_in_the_stub(recording_stub):
    missing = [e.name for e in TABLE if not hasattr(recording_stub, e.name)]
    assert missing == [], f"the recording stub lacks {missing}"


def test_every_table_entry_has_a_typed_stub_entry():
    """nccl/_nccl.pyi types every entry: one def, or one overload per form
    when an optional out-argument selects the calling convention."""
    from conftest import ROOT

    pyi = (ROOT / "nccl" / "_nccl.pyi").read_text()
    for e in TABLE:
        defs = re.findall(rf"^(@overload\n)?def {e.pyname}\((.*)\) -> (.+): \.\.\.$", pyi, re.M)
        want = 2 if e.optional_out else 1
        assert len(defs) == want, (e.pyname, defs)
        assert all(bool(d[0]) == (want == 2) for d in defs), e.pyname
        assert all("Any" not in d[1] for d in defs), (e.pyname, "untyped")
        names = [p.pyname for p in e.py_params]
        assert re.findall(r"(\w+):", defs[-1][1]) == names, (e.pyname, defs[-1][1])


@pytest.mark.parametrize("name", sorted(n for n in HAND_WRITTEN if BY_PY[n] not in SIMPLE))
def test_hand_written(stub, name):
    HAND_WRITTEN[name](stub)
    assert stub.nccl4pyStubCallCount() > 0
    assert re.match(r"^ncc", last(stub))


# ------------------------------------------------ handle objects (nccl4py 0.5+)

def _creators():
    """(name, 0.2/0.6-form call, out-parameter name, handle type) of every
    function that creates a handle."""
    uid = uid_bytes(1)
    return [
        ("comm_init_rank", lambda: b.comm_init_rank(2, uid, 1), "comm", b.Comm),
        ("comm_init_rank_config", lambda: b.comm_init_rank_config(2, uid, 1, None), "comm",
         b.Comm),
        ("comm_init_rank_scalable", lambda: b.comm_init_rank_scalable(2, 1, 1, [uid], None),
         "newcomm", b.Comm),
        ("comm_split", lambda: b.comm_split(b.Comm(PTRS[0]), 1, 2, None), "newcomm", b.Comm),
        ("comm_shrink", lambda: b.comm_shrink(PTRS[0], [1], 1, None, 0), "newcomm", b.Comm),
        ("comm_grow", lambda: b.comm_grow(PTRS[0], 4, None, 1, None), "newcomm", b.Comm),
        ("comm_window_register", lambda: b.comm_window_register(b.Comm(PTRS[0]), PTRS[1], 64, 0),
         "win", b.Window),
    ]


@pytest.mark.parametrize("name, call, out, typ", _creators(), ids=lambda x: x if isinstance(x, str) else "")
def test_creating_functions_return_a_handle_whose_slot_the_library_filled(stub, name, call, out,
                                                                          typ):
    import ctypes

    e = BY_PY[name]
    h = call()
    assert type(h) is typ
    assert fields(last(stub))[out].endswith(f":{h.handle_ptr:#x}")  # the object's own slot
    assert h.handle == OUT_BASE + idx(e) and h == OUT_BASE + idx(e)  # 0.2 code compares ints
    assert hash(h) == hash(OUT_BASE + idx(e)) and int(h) + 1 == OUT_BASE + idx(e) + 1
    # a library that fills the slot later (non-blocking, groups): .handle follows
    stub.nccl4pyStubSetWriteOutputs(0)
    h = call()
    assert h.handle == 0 and not h
    ctypes.c_void_p.from_address(h.handle_ptr).value = 0x1234
    assert h.handle == 0x1234 and h


def test_a_handle_created_in_a_group_lives_until_the_group_ends(stub):
    import sys

    b.group_start()
    try:
        h = b.comm_split(PTRS[0], 0, 0, None)
        held = sys.getrefcount(h)
    finally:
        b.group_end()
    assert sys.getrefcount(h) == held - 1  # the group's reference is released at its end


def test_comm_init_all_returns_comm_objects(stub):
    comms = b.comm_init_all(2, [0, 1])
    assert [type(c) for c in comms] == [b.Comm, b.Comm]
    assert comms[0] == OUT_BASE + idx(BY_PY["comm_init_all"])


@pytest.mark.parametrize("entry", [e for e in TABLE if any(p.kind in ("comm", "win")
                                                            for p in e.params)],
                         ids=lambda e: e.pyname)
def test_every_handle_parameter_refuses_the_other_kind_of_handle(stub, entry):
    """A Window where a Comm is expected (and vice versa) is a TypeError that
    names both, before the library is called."""
    p = next(p for p in entry.py_params if p.kind in ("comm", "win"))
    want, other = ("Comm", b.Window) if p.kind == "comm" else ("Window", b.Comm)
    before = stub.nccl4pyStubCallCount()
    args = {q.pyname: 0 for q in entry.py_params if not q.default}
    args[p.pyname] = other(PTRS[0])
    with pytest.raises(TypeError, match=f"{p.pyname} must be a {want}.*not a {other.__name__}"):
        getattr(b, entry.pyname)(**args)
    assert stub.nccl4pyStubCallCount() == before
