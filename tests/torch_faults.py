"""The rank side of tests/test_torch_faults.py: a rank that dies, a rank
that does not arrive.

Phase 1, 3 ranks (tcp://): after a few all-reduces rank 2 kills itself with
SIGKILL while the others keep reducing; they must fail with an NCCLError
naming it, and destroy_process_group must return and remove the segment.
Phase 2, ranks 0 and 1 (file://, timeout 3 s): rank 1 sleeps through an
all-reduce; rank 0 must fail with NcclTimeoutError within the timeout; rank
1's late all-reduce either fails or completes with rank 0's contribution
(which rank 0 made before it was aborted).  Results in <results dir>/rank<R>.json.

Phase 3, ranks 0 and 1 (file://): rank 1 arrives 4 s late at an async
all-reduce, a broadcast and a send; rank 0's Work.wait(timeout=1 s) must
raise RuntimeError after about 1 s, as gloo's (a gloo group of the same job
does the same), and the operation goes on: a wait without a timeout returns
True with the result, and the group's next call works (gloo's collectives
go on too; gloo's receive does not: its timeout closes the connection).

Usage: python torch_faults.py <results dir> <tcp://...> <file for phases 2, 3>
"""
from __future__ import annotations

import json
import os
import signal
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

import nccl.torch  # noqa: F401
from nccl._errors import NCCLError, NcclTimeoutError

R, N = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
out: dict = {"rank": R}
GLOO = None


def error(e: BaseException) -> dict:
    return {"type": type(e).__name__, "status": getattr(e, "status", None), "message": str(e),
            "operation": getattr(e, "operation", None)}


def phase1() -> None:
    dist.init_process_group("nccl4py_host", init_method=sys.argv[2], rank=R, world_size=N,
                            timeout=timedelta(seconds=60))
    out["uid1"] = dist.group.WORLD._uid.hex()
    t = torch.ones(1 << 14)
    for _ in range(5):
        dist.all_reduce(t)
    if R == N - 1:
        os.kill(os.getpid(), signal.SIGKILL)
    t0 = time.monotonic()
    try:
        for _ in range(100000):
            dist.all_reduce(t)
        out["error1"] = None
    except NCCLError as e:
        out["error1"] = error(e)
    out["waited1"] = time.monotonic() - t0
    t0 = time.monotonic()
    dist.destroy_process_group()
    out["teardown1"] = time.monotonic() - t0
    out["segment1_left"] = os.path.exists("/dev/shm/nccl4py-" + out["uid1"][16:48])


def phase2() -> None:
    dist.init_process_group("nccl4py_host", init_method=f"file://{sys.argv[3]}", rank=R,
                            world_size=2, timeout=timedelta(seconds=3))
    out["uid2"] = dist.group.WORLD._uid.hex()
    t = torch.ones(4)
    dist.all_reduce(t)
    t0 = time.monotonic()
    try:
        if R == 1:
            time.sleep(6)
        dist.all_reduce(t)
        out["error2"] = None
        out["value2"] = t.tolist()
    except NCCLError as e:
        out["error2"] = error(e)
        out["timeout_error2"] = isinstance(e, NcclTimeoutError)
    out["waited2"] = time.monotonic() - t0
    dist.destroy_process_group()
    out["segment2_left"] = os.path.exists("/dev/shm/nccl4py-" + out["uid2"][16:48])


def _late_wait(name: str, g, issue, goes_on: bool = True) -> None:
    """Rank 1 arrives 4 s late at issue(g); rank 0 waits with a 1 s timeout,
    then (goes_on) without one; then the group's next all-reduce."""
    dist.barrier(group=GLOO)
    if R == 1:
        time.sleep(4)
    t0 = time.monotonic()
    res: dict = {}
    out[f"late {name}"] = res
    try:
        w, check = issue(g)
        res["issue_s"] = time.monotonic() - t0
        res["first"] = w.wait(timeout=timedelta(seconds=1))
    except Exception as e:
        res["first"] = error(e)
    res["first_s"] = time.monotonic() - t0
    if not goes_on:
        return
    res["completed_after_timeout"] = w.is_completed()
    res["second"] = w.wait()
    res["value_ok"] = check()
    t = torch.ones(4)
    dist.all_reduce(t, group=g)
    res["next_ok"] = t.tolist() == [2.0] * 4


def _all_reduce(g):
    t = torch.full((4,), float(R + 1))
    return dist.all_reduce(t, group=g, async_op=True), lambda: t.tolist() == [3.0] * 4


def _broadcast(g):
    t = torch.full((4,), float(R))
    return dist.broadcast(t, 1, group=g, async_op=True), lambda: t.tolist() == [1.0] * 4


def _p2p(g):
    t = torch.full((4,), float(R))
    if R == 0:
        return dist.irecv(t, 1, group=g), lambda: t.tolist() == [1.0] * 4
    return dist.isend(t, 0, group=g), lambda: True


def phase3() -> None:
    """Work.wait(timeout=...) with a peer 4 s late, as gloo's."""
    global GLOO
    dist.init_process_group("nccl4py_host", init_method=f"file://{sys.argv[3]}3", rank=R,
                            world_size=2, timeout=timedelta(seconds=60))
    GLOO = dist.new_group(backend="gloo")
    for what, issue in (("all_reduce", _all_reduce), ("broadcast", _broadcast)):
        _late_wait(f"gloo {what}", GLOO, issue)
        _late_wait(f"ours {what}", None, issue)
    _late_wait("ours isend/irecv", None, _p2p)
    # gloo closes the pair when a receive's wait times out: its group is done
    _late_wait("gloo isend/irecv", GLOO, _p2p, goes_on=False)
    dist.destroy_process_group()


phase1()
if R < 2:
    phase2()
    phase3()
with open(os.path.join(sys.argv[1], f"rank{R}.json"), "w") as f:
    json.dump(out, f)
