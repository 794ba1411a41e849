"""The host backend's single-copy path (process_vm_readv) against staging.

NCCL4PY_HOST_SINGLE_COPY=0 forces staging, 1 single copy whenever the kernel
allows it, auto (the default) single copy above a size threshold (for
all-reduce, all-gather and all-to-all: whichever path measures faster).  Every
collective must give the same, exact results on every path, on 2, 3 and 4
ranks, at sizes around the thresholds, in place and out of place.  Which
path a call takes is observable: the ranks compare it like the other
arguments of the call, so ranks configured differently fail with
ncclInvalidUsage exactly where one of them tries single copy.  A rank dying
during single-copy collectives is a scenario of test_faults.py.
"""
from __future__ import annotations

import json
import os
import re

import pytest

from host_ranks import needs_host, run_ranks

pytestmark = needs_host

# Block sizes (bytes one rank sends to one peer): around the eager limit
# (4 KiB), where mode 1 starts to read peers directly, around 32 and 64 KiB,
# and larger than a staging slot.  The automatic thresholds (MiB) are
# checked by test_path_choice_is_checked_across_ranks.
BLOCKS = [4096, 4100, 32764, 32768, 65532, 65536, 600004]

# NCCL4PY_HOST_SINGLE_COPY=auto's smallest block per collective (host/kinds.c),
# with a CPU per rank and with more ranks than CPUs; 4100 is the first
# float32 block above the eager limit (4096 bytes).
# For all-reduce and broadcast the size is that of the message.
AUTO_MIN = {"allgather": (4100, 4 << 20), "alltoall": (4100, 64 << 10),
            "broadcast": (4100, 4 << 20), "allreduce": (16 << 10, 4 << 20)}


def auto_cases(nranks=2):
    crowded = nranks > (os.cpu_count() or 1)
    for op, mins in AUTO_MIN.items():
        t = mins[crowded]
        yield op, "auto", t - 4, False
        yield op, "auto", t, True

CHECK_ALL = r'''
import os
BLOCKS = json.loads(os.environ["TEST_BLOCKS"])
errors = []

def fill(n, salt):
    # distinct, exactly representable values per rank and position
    return ((np.arange(n, dtype=np.int64) * 7 + salt * 1000003) % 65521).astype(np.float32)

def check(name, got, want):
    if not np.array_equal(got, want):
        bad = int(np.flatnonzero(got != want)[0])
        errors.append(f"{name}: first difference at {bad}: {got[bad]} != {want[bad]}")

def run(c, tag):
    for blk in BLOCKS:
        m = blk // 4
        t = f"{tag} {blk}B"
        x = [fill(N * m, k) for k in range(N)]
        # all-gather, out of place and in place
        r = np.zeros(N * m, np.float32)
        c.allgather(x[RANK][:m], r)
        check(f"{t} allgather", r, np.concatenate([x[k][:m] for k in range(N)]))
        r = np.zeros(N * m, np.float32)
        r[RANK * m:(RANK + 1) * m] = x[RANK][:m]
        c.allgather(r[RANK * m:(RANK + 1) * m], r)
        check(f"{t} allgather in place", r, np.concatenate([x[k][:m] for k in range(N)]))
        # gather to the last rank
        root = N - 1
        r = np.zeros(N * m, np.float32)
        c.gather(x[RANK][:m], r if RANK == root else None, root)
        if RANK == root:
            check(f"{t} gather", r, np.concatenate([x[k][:m] for k in range(N)]))
        # all-to-all, out of place and in place
        r = np.zeros(N * m, np.float32)
        c.alltoall(x[RANK], r)
        want = np.concatenate([x[k][RANK * m:(RANK + 1) * m] for k in range(N)])
        check(f"{t} alltoall", r, want)
        r = x[RANK].copy()
        c.alltoall(r, r)
        check(f"{t} alltoall in place", r, want)
        # broadcast from every root, in place and out of place
        for root in range(N):
            r = x[RANK][:m].copy()
            c.broadcast(r, r, root)
            check(f"{t} broadcast in place root {root}", r, x[root][:m])
            r = np.zeros(m, np.float32)
            c.broadcast(x[RANK][:m], r, root)
            check(f"{t} broadcast root {root}", r, x[root][:m])
        # reductions and scatter keep working next to the single-copy calls
        r = np.zeros(N * m, np.float32)
        c.allreduce(x[RANK], r, nc.SUM)
        check(f"{t} allreduce", r, sum(x))
        r = np.zeros(m, np.float32)
        c.reduce_scatter(x[RANK], r, nc.SUM)
        check(f"{t} reduce_scatter", r, sum(x)[RANK * m:(RANK + 1) * m])
        r = np.zeros(m, np.float32)
        c.scatter(x[0] if RANK == 0 else None, r, 0)
        check(f"{t} scatter", r, x[0][RANK * m:(RANK + 1) * m])

comms = {}
for mode in ("0", "1", "auto"):
    os.environ["NCCL4PY_HOST_SINGLE_COPY"] = mode
    comms[mode] = comm.split(0, RANK)
for mode, c in comms.items():
    run(c, f"mode {mode}")
report(errors=errors[:10])
'''


@pytest.mark.parametrize("nranks", [2, 3, 4])
def test_every_collective_on_every_path(tmp_path, nranks):
    reps = run_ranks(tmp_path, CHECK_ALL, nranks, NCCL_DEBUG="INFO",
                     TEST_BLOCKS=json.dumps(BLOCKS))
    for rep in reps:
        assert rep["errors"] == [], rep


def test_info_line_says_which_path(tmp_path):
    code = "report(ok=True)\n"
    import subprocess
    import sys

    from conftest import clean_env

    script = tmp_path / "s.py"
    from host_ranks import PRELUDE
    script.write_text(PRELUDE + code)
    for mode, want in (("1", "single-copy transfers"), ("0", "staged transfers only")):
        p = subprocess.run([sys.executable, "-m", "nccl.run", "-n", "2", "--backend", "host",
                            str(script)], env=clean_env(NCCL_DEBUG="INFO",
                                                         NCCL4PY_HOST_SINGLE_COPY=mode),
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        assert p.stdout.count('"ok": true') == 2, p.stdout
        lines = [ln for ln in (p.stdout + p.stderr).splitlines() 
                 if "host backend: single-copy" in ln or "host backend: staged" in ln]
        assert len(lines) == 2 and all(want in ln for ln in lines), lines


# Rank 0 stages everything, rank 1 follows `mode`: they disagree exactly
# where rank 1 tries single copy.
DISAGREE = r'''
import os
from nccl.bindings import NCCLError
mode, blk, op = os.environ["TEST_MODE"], int(os.environ["TEST_BLOCK"]), os.environ["TEST_OP"]
os.environ["NCCL4PY_HOST_SINGLE_COPY"] = "0" if RANK == 0 else mode
c = comm.split(0, RANK)
m = blk // 4
x = np.ones(N * m, np.float32)
r = np.zeros(N * m, np.float32)
try:
    if op == "allgather":
        c.allgather(x[:m], r)
    elif op == "alltoall":
        c.alltoall(x, r)
    elif op == "allreduce":
        c.allreduce(x[:m], r[:m], nc.SUM)
    else:
        c.broadcast(x[:m], r[:m], 0)
    # a root that waits for nobody learns of a disagreement at its next call
    c.allreduce(x[:4], r[:4], nc.SUM)
    report(error=None, ok=bool((r[4:m] == (N if op == "allreduce" else 1)).all()))
except NCCLError as e:
    report(error=str(e))
'''


@pytest.mark.parametrize("op,mode,blk,disagree", [
    ("allgather", "1", 4100, True),      # forced: above the eager limit
    ("allgather", "1", 4096, False),     # eager: never single copy
    ("alltoall", "1", 8192, True),
    ("broadcast", "1", 8192, True),
    ("allreduce", "1", 4100, True),
    ("allreduce", "1", 4096, False),
    *auto_cases(),                       # just below and at the thresholds
])
def test_path_choice_is_checked_across_ranks(tmp_path, op, mode, blk, disagree):
    check_disagreement(tmp_path, 2, op, mode, blk, disagree)


def check_disagreement(tmp_path, nranks, op, mode, blk, disagree):
    """Runs DISAGREE: the call fails on every rank exactly when `disagree`."""
    reps = run_ranks(tmp_path, DISAGREE, nranks, TEST_MODE=mode, TEST_BLOCK=str(blk), TEST_OP=op,
                     NCCL4PY_HOST_TIMEOUT="20")
    for rep in reps:
        if disagree:
            assert rep["error"] and "NCCL4PY_HOST_SINGLE_COPY" in rep["error"], rep
        else:
            assert rep["error"] is None and rep["ok"], rep


# More ranks than CPUs, for the tests of that case.
CROWDED_RANKS = (os.cpu_count() or 1) + 1
crowded = pytest.mark.skipif(CROWDED_RANKS > 5, reason="more ranks than CPUs would be too many here")


@crowded
@pytest.mark.parametrize("op,mode,blk,disagree", list(auto_cases(CROWDED_RANKS)))
def test_crowded_path_choice_is_checked_across_ranks(tmp_path, op, mode, blk, disagree):
    check_disagreement(tmp_path, CROWDED_RANKS, op, mode, blk, disagree)


def logged(mode):
    """The opening of a rank script that reads its own NCCL_DEBUG lines:
    stderr goes to a file per rank; `c` is a communicator created with
    NCCL4PY_HOST_SINGLE_COPY=mode."""
    return f'''
os.environ["NCCL4PY_HOST_SINGLE_COPY"] = "{mode}"
log = open(os.environ["TEST_LOG"] + str(RANK), "w+")
os.dup2(log.fileno(), 2)
c = comm.split(0, RANK)
errors = []
'''


def votes_report(marker):
    """The end of a rank script opened by logged(): reports `errors` and the
    tuner's vote lines that contain `marker`."""
    return f'''
c.destroy()
log.seek(0)
votes = [ln.split("host backend: ", 1)[1] for ln in log.read().splitlines()
         if {marker!r} in ln]
report(errors=errors, votes=votes)
'''


# Rank scripts' arrays at a chosen offset within a page.
PLACED = r'''
import mmap
keep = []

def at(nbytes, offset, dtype):
    """nbytes of fresh memory starting `offset` bytes into a page, as dtype"""
    buf = mmap.mmap(-1, nbytes + offset + 4096)
    keep.append(buf)
    return np.frombuffer(buf, np.uint8)[offset:offset + nbytes].view(dtype)
'''


# Buffers at chosen offsets within their pages.  A single-copy read whose
# destination lies 1 to 63 bytes after its source modulo 4 KiB would be slow
# (host/cma.c): a broadcast's reads and writes then go through a bounce
# buffer, in pieces of 256 KiB, and an all-gather or all-to-all with any
# such read stages instead, which NCCL_DEBUG=INFO reports once per
# communicator.  Every rank's receive buffers start 16 bytes into a page
# and its send buffers at a page, so every read of a block at a multiple of
# 4 KiB is at such a distance; blocks of other sizes put the later blocks at
# other distances.  Calls with both buffers 16 bytes into a page and blocks
# of whole pages come first and must not be reported.
MISALIGNED = logged("1") + PLACED + r'''

def check(name, got, want):
    if not np.array_equal(got, want):
        bad = int(np.flatnonzero(got != want)[0])
        errors.append(f"{name}: first difference at {bad}: {got[bad]} != {want[bad]}")

def said():
    log.seek(0)
    return [ln for ln in log.read().splitlines() if "staged, not single-copy" in ln]

for send_at, blocks in ((16, (8192, 262144, 1048576 + 4096)),
                        (0, (8192, 65540, 262144, 300004, 1048576 + 4096))):
    for blk in blocks:
        m = blk // 4
        x = [((np.arange(N * m, dtype=np.int64) * 7 + k * 1000003) % 65521).astype(np.float32)
             for k in range(N)]
        send = at(N * blk, send_at, np.float32)
        send[:] = x[RANK]
        r = at(N * blk, 16, np.float32)
        c.allgather(send[:m], r)
        check(f"{blk}B allgather", r, np.concatenate([v[:m] for v in x]))
        r = at(N * blk, 16, np.float32)
        c.alltoall(send, r)
        check(f"{blk}B alltoall", r, np.concatenate([v[RANK * m:(RANK + 1) * m] for v in x]))
        r = at(blk, 16, np.float32)
        c.broadcast(send[:m], r, 0)
        check(f"{blk}B broadcast", r, x[0][:m])
    if send_at == 16:
        aligned_said = said()
report(errors=errors[:10], aligned_said=aligned_said, said=said())
'''


@pytest.mark.parametrize("nranks", [2, 3])
def test_single_copy_at_unfavourable_alignments(tmp_path, nranks):
    reps = run_ranks(tmp_path, MISALIGNED, nranks, NCCL_DEBUG="INFO",
                     TEST_LOG=str(tmp_path / "stderr"))
    for rep in reps:
        assert rep["errors"] == [], rep
        assert rep["aligned_said"] == [], rep
        assert len(rep["said"]) == 1 and "ncclAllGather staged" in rep["said"][0], rep


# The single-copy all-reduce (each rank reduces its share of the peers'
# buffers read directly, then reads the peers' shares of the result) must
# give the bits of the staged one: both reduce in rank order.  Random
# values, so that a different order would show; every operator, several
# types, in place and out of place, message sizes that do not divide by
# the rank count, a slot so small that the shares go in many chunks, and
# receive buffers at a different offset within a page on every rank, so
# that reading the peers' results lands at distances of 16-48 bytes.
ALLREDUCE = PLACED + r"""
errors = []
ops = {"sum": nc.SUM, "prod": nc.PROD, "max": nc.MAX, "min": nc.MIN, "avg": nc.AVG}

def inputs(dtype, count, k):
    g = np.random.default_rng(1000 * k + count)
    if np.dtype(dtype).kind == "f":
        return (g.standard_normal(count) * 3).astype(dtype)
    return g.integers(-50, 50, count).astype(dtype)

def call(c, dtype, count, op, inplace, offset):
    x = inputs(dtype, count, RANK)
    r = at(x.nbytes, offset, dtype)
    if inplace:
        r[:] = x
        c.allreduce(r, r, ops[op])
    else:
        c.allreduce(x, r, ops[op])
    return r.copy()

paths = {}
for mode, slot in (("0", None), ("1", None), ("1", "4096")):
    os.environ["NCCL4PY_HOST_SINGLE_COPY"] = mode
    if slot:
        os.environ["NCCL4PY_HOST_SLOT_BYTES"] = slot
    paths[(mode, slot)] = comm.split(0, RANK)
    os.environ.pop("NCCL4PY_HOST_SLOT_BYTES", None)

for dtype in ("float32", "float64", "float16", "int32", "int8"):
    esz = np.dtype(dtype).itemsize
    for count in (4096 // esz + 1, 300007 // esz, 1048576 // esz + 3):
        want = {}
        xs = [inputs(dtype, count, k) for k in range(N)]
        with np.errstate(all="ignore"):
            acc = xs[0].copy()
            for k in range(1, N):
                acc = acc + xs[k]
        want["sum"] = acc
        want["max"] = np.maximum.reduce(xs)
        want["min"] = np.minimum.reduce(xs)
        for op in ops:
            for inplace in (False, True):
                got = {p: call(c, dtype, count, op, inplace, 16 * RANK)
                       for p, c in paths.items()}
                name = f"{dtype} x {count} {op}{' in place' if inplace else ''}"
                base = got[("0", None)]
                for p, r in got.items():
                    if r.tobytes() != base.tobytes():
                        bad = int(np.flatnonzero(r.view(np.uint8) != base.view(np.uint8))[0])
                        errors.append(f"{name} mode {p}: differs from staged at byte {bad}")
                if op in want and dtype != "float16" and base.tobytes() != want[op].tobytes():
                    errors.append(f"{name}: staged result is not NumPy's rank-order {op}")
report(errors=errors[:10])
"""


@pytest.mark.parametrize("nranks", [2, 3])
def test_single_copy_allreduce_matches_staging_bit_for_bit(tmp_path, nranks):
    reps = run_ranks(tmp_path, ALLREDUCE, nranks)
    for rep in reps:
        assert rep["errors"] == [], rep


# With NCCL4PY_HOST_SINGLE_COPY=auto and a CPU per rank, the all-reduce,
# all-gather, all-to-all and broadcast measure both paths in the first nine
# calls of a size class and vote in the tenth (host/policy.c).  Every call must
# be right whichever path it takes, and every rank must take the same path:
# the vote's line (NCCL_DEBUG=INFO) gives the same sums and choice on every
# rank.
TUNED = logged("auto") + r"""
m = (1 << 20) // 4
x = [((np.arange(N * m, dtype=np.int64) * 7 + k * 1000003) % 65521).astype(np.float32)
     for k in range(N)]
for i in range(10):
    r = np.zeros(N * m, np.float32)
    c.allreduce(x[RANK], r, nc.SUM)
    errors += [] if np.array_equal(r, sum(x)) else [f"allreduce call {i}"]
    r = np.zeros(N * m, np.float32)
    c.allgather(x[RANK][:m], r)
    errors += [] if np.array_equal(r, np.concatenate([v[:m] for v in x])) else [f"allgather {i}"]
    r = np.zeros(N * m, np.float32)
    c.alltoall(x[RANK], r)
    want = np.concatenate([v[RANK * m:(RANK + 1) * m] for v in x])
    errors += [] if np.array_equal(r, want) else [f"alltoall {i}"]
    r = np.zeros(m, np.float32)
    c.broadcast(x[RANK][:m], r, 1)
    errors += [] if np.array_equal(r, x[1][:m]) else [f"broadcast {i}"]
""" + votes_report("best time per call")


def test_tuned_collectives_vote_alike_on_every_rank(tmp_path):
    if (os.cpu_count() or 1) < 2:
        pytest.skip("two ranks need two CPUs to be tuned")
    reps = run_ranks(tmp_path, TUNED, 2, NCCL_DEBUG="INFO", TEST_LOG=str(tmp_path / "stderr"))
    assert [rep["errors"] for rep in reps] == [[], []], reps
    votes = reps[0]["votes"]
    assert reps[1]["votes"] == votes, reps
    assert len(votes) == 4, votes
    for name, size, v in zip(("ncclAllReduce", "ncclAllGather", "ncclAlltoAll", "ncclBroadcast"),
                             ("2097152-4194303", "1048576-2097151", "1048576-2097151",
                              "1048576-2097151"), votes):
        # a broadcast's staged root waits for nobody: the slowest rank counts
        how = "of the slowest rank" if name == "ncclBroadcast" else "summed over the ranks"
        got = re.fullmatch(name + " of " + size + r" bytes: (staged|single copy) \(best time "
                           r"per call, " + how + r": staged (\d+) us, single copy "
                           r"(\d+) us; measured again every 256 calls\)", v)
        assert got, v
        staged, single = int(got[2]), int(got[3])
        assert 0 < staged and 0 < single, v
        if staged != single:  # as printed, in whole microseconds
            assert got[1] == ("single copy" if single < staged else "staged"), v


# With more ranks than CPUs, the all-reduce, all-gather and broadcast are
# measured from 4 MiB by the CPU time the ranks spend, and the vote takes
# staging only when it spends at least 5% less (host/policy.c); the all-to-all
# keeps its fixed threshold and is not measured.
TUNED_CROWDED = logged("auto") + r"""
m = (4 << 20) // 4
x = [np.full(N * m, k + 1, np.float32) for k in range(N)]
for i in range(10):
    r = np.zeros(m, np.float32)
    c.allreduce(x[RANK][:m], r, nc.SUM)
    errors += [] if (r == N * (N + 1) / 2).all() else [f"allreduce call {i}"]
    r = np.zeros(N * m, np.float32)
    c.allgather(x[RANK][:m], r)
    errors += [] if (r.reshape(N, m) == np.arange(1, N + 1)[:, None]).all() else [f"allgather {i}"]
    r = np.zeros(m, np.float32)
    c.broadcast(x[RANK][:m], r, N - 1)
    errors += [] if (r == N).all() else [f"broadcast {i}"]
    r = np.zeros(N * 16384, np.float32)
    c.alltoall(x[RANK][:N * 16384], r)
    errors += [] if (r.reshape(N, -1) == np.arange(1, N + 1)[:, None]).all() else [f"alltoall {i}"]
""" + votes_report("per call, summed over the ranks")


@crowded
def test_crowded_ranks_vote_on_cpu_time(tmp_path):
    nranks = CROWDED_RANKS
    reps = run_ranks(tmp_path, TUNED_CROWDED, nranks, NCCL_DEBUG="INFO",
                     TEST_LOG=str(tmp_path / "stderr"))
    assert [rep["errors"] for rep in reps] == [[]] * nranks, reps
    votes = reps[0]["votes"]
    assert all(rep["votes"] == votes for rep in reps), reps
    assert len(votes) == 3, votes
    for name, v in zip(("ncclAllReduce", "ncclAllGather", "ncclBroadcast"), votes):
        got = re.fullmatch(name + r" of 4194304-8388607 bytes: (staged|single copy) \(best CPU "
                           r"time per call, summed over the ranks: staged (\d+) us, single "
                           r"copy (\d+) us; measured again every 256 calls\)", v)
        assert got, v
        staged, single = int(got[2]), int(got[3])
        assert 0 < staged and 0 < single, v
        if abs(staged - 0.95 * single) > 1:  # away from the edge, as printed in whole us
            assert got[1] == ("staged" if staged < 0.95 * single else "single copy"), v
