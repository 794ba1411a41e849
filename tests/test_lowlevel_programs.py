"""Programs written for each low level of upstream nccl4py run unchanged on
the host backend with 2 and 4 ranks: 0.2 (int handles returned), 0.3
(PointerBox addresses, status returned) and 0.6 (Comm / Window objects,
per-call configs, teams, parameters)."""
from __future__ import annotations

import pytest

from host_ranks import needs_host, run_ranks

pytestmark = needs_host

COMMON = '''\
import ctypes, json
import numpy as np
import nccl.run

env = nccl.run.environment()
N, RANK = env.nranks, env.rank


def report(**fields):
    print(json.dumps({"rank": RANK, **fields}), flush=True)


def summed(comm, b):
    x = np.full(8, RANK + 1, np.float32)
    y = np.zeros(8, np.float32)
    b.all_reduce(x.ctypes.data, y.ctypes.data, 8, b.DataType.Float32, b.RedOp.Sum, comm, 0)
    return float(y[0])


'''

V02 = COMMON + '''\
import nccl.bindings as b

comm = b.comm_init_rank(N, env.unique_id, RANK)
names = {comm: "world"}                       # handles as dict keys ...
assert names[int(comm)] == "world" and comm != 0 and comm + 0 == int(comm)
sub = b.comm_split(comm, RANK % 2, RANK, None)
buf = np.zeros(1024, np.uint8)
win = b.comm_window_register(comm, buf.ctypes.data, buf.nbytes, 0)
user = b.win_get_user_ptr(comm, win)
b.comm_window_deregister(comm, win)
report(total=summed(comm, b), size=b.comm_count(comm), rank_=b.comm_user_rank(comm),
       sub_size=b.comm_count(sub), sub_total=summed(sub, b), user_ok=user == buf.ctypes.data)
b.comm_destroy(sub)
b.comm_destroy(comm)
'''

V03 = COMMON + '''\
from nccl.bindings import nccl as b

box = b.PointerBox()
assert b.comm_init_rank(box.address, N, env.unique_id, RANK) == 0
comm = box.ptr
sub_box = b.PointerBox()
assert b.comm_split(comm, RANK % 2, RANK, sub_box.address, 0) == 0
buf = np.zeros(1024, np.uint8)
win_box = b.PointerBox()
assert b.comm_window_register(comm, buf.ctypes.data, buf.nbytes, win_box.address, 0) == 0
b.comm_window_deregister(comm, win_box.ptr)
report(total=summed(comm, b), size=b.comm_count(comm), rank_=b.comm_user_rank(comm),
       sub_size=b.comm_count(sub_box.ptr), sub_total=summed(sub_box.ptr, b), user_ok=True)
b.comm_destroy(sub_box.ptr)
b.comm_destroy(comm)
'''

V06 = COMMON + '''\
from nccl.bindings import nccl as b


class CollConfig(ctypes.Structure):  # NCCL 2.32's ncclCollConfig_t, with .ptr
    _fields_ = [("size", ctypes.c_size_t), ("magic", ctypes.c_uint), ("version", ctypes.c_uint),
                ("ext", ctypes.c_void_p), ("min_ctas", ctypes.c_int), ("max_ctas", ctypes.c_int),
                ("nvls_ctas", ctypes.c_int), ("cga_cluster_size", ctypes.c_int),
                ("alg_selection", ctypes.c_char_p), ("force_alg_selection", ctypes.c_int),
                ("cta_policy", ctypes.c_int), ("user_profiler_tag", ctypes.c_uint64),
                ("launch_completion_event", ctypes.c_void_p)]

    @property
    def ptr(self):
        return ctypes.addressof(self)


def fields(team):
    return [team.n_ranks, team.rank, team.stride]


U = -2**31
cfg = CollConfig(72, 0xCAFEBEEF, 23203, None, U, U, U, U, None, 1, U, 0, None)

comm = b.comm_init_rank(N, b.UniqueId.from_bytes(env.unique_id), RANK)
assert type(comm) is b.Comm and comm.handle != 0 and bool(comm)
x = np.full(8, RANK + 1, np.float32)
y = np.zeros(8, np.float32)
b.all_reduce_config(x.ctypes.data, y.ctypes.data, 8, b.DataType.Float32, b.RedOp.Sum, comm, 0,
                    cfg)
g = np.zeros(8 * N, np.float32)
coll = b.CollConfig()  # the bindings' struct: NCCL_COLLCONFIG_INITIALIZER's values
coll.cta_policy = 0
b.all_gather_config(x.ctypes.data, g.ctypes.data, 8, b.DataType.Float32, comm, 0, coll)
b.all_gather_config(x.ctypes.data, g.ctypes.data, 8, b.DataType.Float32, comm, 0, cfg.ptr)
b.broadcast_config(x.ctypes.data, y.ctypes.data, 8, b.DataType.Float32, 0, comm, 0, None)
bcast = float(y[0])
world, lsa, rail = b.team_world(comm), b.team_lsa(comm), b.team_rail(comm)
peer = (RANK + 1) % N
keys = b.param_get_all_keys()
try:
    b.param_get_parameter("NO_SUCH_PARAMETER")
    unknown = "found"
except KeyError:
    unknown = "KeyError"
h = b.param_bind("NCCL4PY_HOST_SLOT_BYTES")
sub = b.comm_split(comm, RANK % 2, RANK, 0)
buf = np.zeros(1024, np.uint8)
b.group_start()
win = b.comm_window_register(comm, buf.ctypes.data, buf.nbytes, 0)
b.group_end()
assert type(win) is b.Window and win.handle != 0
user = b.win_get_user_ptr(comm, win)
b.comm_window_deregister(comm, win)
try:
    b.comm_count(win)
    refused = False
except TypeError:
    refused = True
report(total=float(g.reshape(N, 8)[:, 0].sum()), size=b.comm_count(comm),
       rank_=b.comm_user_rank(comm), sub_size=b.comm_count(sub), sub_total=summed(sub, b),
       user_ok=user == buf.ctypes.data, bcast=bcast, world=fields(world), lsa=fields(lsa),
       rail=fields(rail), peer_world=b.team_rank_to_world(comm, world, peer),
       peer_lsa=b.team_rank_to_lsa(comm, (N, RANK, 1), peer), unknown=unknown,
       keys="NCCL4PY_HOST_SLOT_BYTES" in keys, slot_bytes=b.param_get_u64(h),
       slot_text=b.param_get_parameter("NCCL4PY_HOST_SLOT_BYTES"), refused=refused)
b.comm_destroy(sub)
b.comm_destroy(comm)
'''


@pytest.mark.parametrize("nranks", [2, 4])
@pytest.mark.parametrize("program", [V02, V03, V06], ids=["0.2", "0.3", "0.6"])
def test_program_runs_unchanged(tmp_path, program, nranks):
    reports = run_ranks(tmp_path, program, nranks, prelude="")
    total = nranks * (nranks + 1) / 2
    for r in reports:
        assert r["total"] == total and r["size"] == nranks and r["rank_"] == r["rank"]
        assert r["user_ok"]
        half = len(range(r["rank"] % 2, nranks, 2))
        assert r["sub_size"] == half
        assert r["sub_total"] == sum(q + 1 for q in range(r["rank"] % 2, nranks, 2))
        if program is V06:
            rank = r["rank"]
            assert r["bcast"] == 1.0  # rank 0's value
            # one machine: the lsa team is the world, the rail team this rank alone
            assert r["world"] == [nranks, rank, 1] and r["lsa"] == [nranks, rank, 1]
            assert r["rail"] == [1, 0, nranks]
            assert r["peer_world"] == (rank + 1) % nranks == r["peer_lsa"]
            assert r["unknown"] == "KeyError" and r["keys"] and r["refused"]
            assert r["slot_bytes"] == 0 and r["slot_text"] == "0"
