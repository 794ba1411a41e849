"""The rank side of tests/test_torch_faults.py: a rank that dies, a rank
that does not arrive.

Phase 1, 3 ranks (tcp://): after a few all-reduces rank 2 kills itself with
SIGKILL while the others keep reducing; they must fail with an NCCLError
naming it, and destroy_process_group must return and remove the segment.
Phase 2, ranks 0 and 1 (file://, timeout 3 s): rank 1 sleeps through an
all-reduce; rank 0 must fail with NcclTimeoutError within the timeout; rank
1's late all-reduce either fails or completes with rank 0's contribution
(which rank 0 made before it was aborted).  Results in <results dir>/rank<R>.json.

Usage: python torch_faults.py <results dir> <tcp://...> <file for phase 2>
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


phase1()
if R < 2:
    phase2()
with open(os.path.join(sys.argv[1], f"rank{R}.json"), "w") as f:
    json.dump(out, f)
