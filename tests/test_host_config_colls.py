"""Host backend: the per-call-config collectives of NCCL 2.31+ (nccl*Config),
called through ctypes by 2 and 4 ranks."""
from __future__ import annotations

import pytest

from conftest import clean_env
from host_ctypes import PRELUDE, run_ranks
from test_host_collectives import host_available

pytestmark = pytest.mark.skipif(not host_available(), reason="host backend not built")


# Rank r of n: every *Config collective gives the plain call's result and the
# expected one, with several valid configs; every bad config is refused on
# every rank at once and leaves the communicator usable.
COLLECTIVES = PRELUDE + r"""
n, r, uid = int(sys.argv[1]), int(sys.argv[2]), bytes.fromhex(sys.argv[3])
comm = P()
assert lib.ncclCommInitRank(c.byref(comm), n, UniqueId.from_buffer_copy(uid), r) == 0
C, root, dt, op = 5, n - 1, 4, 0   # count, root, ncclInt64, ncclSum
N = c.c_size_t(C)

def inp(rank, length):
    return np.arange(length, dtype=np.int64) * (rank + 1) + 1000 * rank

every = lambda L: [inp(k, L) for k in range(n)]
blocks = lambda a: a.reshape(n, C)
# name: (send length, recv length, plain args after the buffers, expected recv)
specs = {
    "AllReduce": (C, C, (N, dt, op), sum(every(C))),
    "Broadcast": (C, C, (N, dt, root), inp(root, C)),
    "Reduce": (C, C, (N, dt, op, root), sum(every(C)) if r == root else None),
    "AllGather": (C, C * n, (N, dt), np.concatenate(every(C))),
    "ReduceScatter": (C * n, C, (N, dt, op), sum(blocks(x)[r] for x in every(C * n))),
    "AlltoAll": (C * n, C * n, (N, dt), np.concatenate([blocks(x)[r] for x in every(C * n)])),
    "Gather": (C, C * n, (N, dt, root), np.concatenate(every(C)) if r == root else None),
    "Scatter": (C * n, C, (N, dt, root), blocks(inp(root, C * n))[r]),
}

ext2 = ConfigExt(None, 77, 2, 5)
ext1 = ConfigExt(c.cast(c.pointer(ext2), P), 77, 1, 3)
tuned = initializer()
tuned.minCTAs, tuned.maxCTAs, tuned.nvlsCTAs, tuned.cgaClusterSize = 2, 8, 4, 2
tuned.algSelection, tuned.forceAlgSelection, tuned.CTAPolicy = b"RING_LL", 0, 1
tuned.userProfilerTag, tuned.ext = 7, c.cast(c.pointer(ext1), P)
v2_31 = initializer()           # the 64-byte layout of 2.31: the event is not part of it
v2_31.size, v2_31.version, v2_31.launchCompletionEvent = 64, 23102, 0xdead
newer = (c.c_char * 96)()       # a longer config from a newer NCCL: its tail is ignored
c.memmove(newer, c.byref(initializer()), 72)
c.memmove(newer, c.byref(c.c_size_t(96)), 8)
newer[80] = b"\xff"
good = {"null": None, "initializer": c.byref(initializer()), "tuned": c.byref(tuned),
        "size_64": c.byref(v2_31), "size_96": newer}

def run(name, config=...):
    sl, rl, args, _ = specs[name]
    send = inp(r, sl)
    recv = np.full(rl, -7, np.int64)
    sp, rp = P(send.ctypes.data), P(recv.ctypes.data)
    if config is ...:
        rc = getattr(lib, "nccl" + name)(sp, rp, *args, comm, None)
    else:
        rc = getattr(lib, "nccl" + name + "Config")(sp, rp, *args, comm, None, config)
    return rc, recv

result = {"mismatch": [], "bad": {}}
for name, (_, _, _, want) in specs.items():
    rc, plain = run(name)
    assert rc == 0, (name, rc, last_error())
    if want is not None and not (plain == want).all():
        result["mismatch"].append([name, "plain", plain.tolist(), want.tolist()])
    for label, cfg in good.items():
        rc, got = run(name, cfg)
        if rc != 0 or not (got == plain).all():
            result["mismatch"].append([name, label, rc, got.tolist(), plain.tolist()])

def bad(**fields):
    cfg = initializer()
    for k, v in fields.items():
        setattr(cfg, k, v)
    return cfg

bad_configs = {
    "magic": bad(magic=0x12345678), "size_0": bad(size=0), "size_8": bad(size=8),
    "force_alg": bad(forceAlgSelection=2), "cta_policy": bad(CTAPolicy=9),
    "event": bad(launchCompletionEvent=0xdead),
}
for label, cfg in bad_configs.items():
    for name in specs:
        rc, got = run(name, c.byref(cfg))
        result["bad"].setdefault(label, []).append(
            [name, rc, bool((got == -7).all()), last_error()])

# a refused call inside a group discards the group, as in NCCL
assert lib.ncclGroupStart() == 0
rc_in_group, _ = run("AllReduce", c.byref(bad_configs["magic"]))
result["group"] = [rc_in_group, lib.ncclGroupEnd()]
# ... and the communicator still works, in step on every rank
rc, got = run("AllReduce", c.byref(initializer()))
result["after"] = [rc, bool((got == specs["AllReduce"][3]).all())]
assert lib.ncclCommDestroy(comm) == 0
print(json.dumps(result), flush=True)
"""


@pytest.mark.parametrize("n", [2, 4])
def test_config_collectives_match_the_plain_calls(n):
    for r, res in enumerate(run_ranks(COLLECTIVES, n)):
        assert res["mismatch"] == [], (r, res["mismatch"])
        for label, calls in res["bad"].items():
            for name, rc, untouched, msg in calls:
                assert rc == 4, (r, label, name, rc, msg)
                assert untouched, (r, label, name)
                assert f"nccl{name}Config" in msg, (label, msg)
        assert "magic mismatch (got 0x12345678" in res["bad"]["magic"][0][3]
        assert "magic mismatch (got 0x0" in res["bad"]["size_8"][0][3]
        assert "forceAlgSelection=2" in res["bad"]["force_alg"][0][3]
        assert "CTAPolicy=9" in res["bad"]["cta_policy"][0][3]
        assert "launchCompletionEvent" in res["bad"]["event"][0][3]
        assert res["group"] == [4, 4], res["group"]
        assert res["after"] == [0, True], res["after"]


# Rank 0 is refused its config and aborts; the others, with a valid config,
# fail with ncclRemoteError instead of waiting for it.
ONE_BAD = PRELUDE + r"""
n, r, uid = int(sys.argv[1]), int(sys.argv[2]), bytes.fromhex(sys.argv[3])
comm = P()
assert lib.ncclCommInitRank(c.byref(comm), n, UniqueId.from_buffer_copy(uid), r) == 0
x = np.ones(4, np.float32)
cfg = initializer()
if r == 0:
    cfg.magic = 0
rc = lib.ncclAllReduceConfig(P(x.ctypes.data), P(x.ctypes.data), c.c_size_t(4), 7, 0, comm, None,
                             c.byref(cfg))
print(json.dumps({"rc": rc, "error": last_error()}), flush=True)
lib.ncclCommAbort(comm)
"""


def test_a_refused_config_does_not_hang_the_peers():
    res = run_ranks(ONE_BAD, 3, env=clean_env(NCCL4PY_HOST_TIMEOUT="600"), timeout=180)
    assert res[0]["rc"] == 4 and "magic mismatch" in res[0]["error"], res[0]
    for r in (1, 2):
        assert res[r]["rc"] == 6, res[r]
        assert "rank 0" in res[r]["error"], res[r]
