"""GPU check of the watchdog with the real NCCL (or RCCL) on one GPU (marked
``gpu``; run by tests/gpu/run_checks.sh).  A spin kernel holds the stream, so
an all-reduce queued behind it does not complete: the watchdog must see its
event pending, abort the communicator and make the next call raise
NcclTimeoutError; a call that completes must be recorded as done."""
from __future__ import annotations

import json
import time

import pytest

torch = pytest.importorskip("torch", reason="the GPU checks use torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no visible GPU"),
]

import nccl.core as nc  # noqa: E402
from nccl import _nccl  # noqa: E402


def make_comm(timeout):
    if _nccl.library_family() not in ("nccl", "rccl"):
        pytest.skip("the test process is not on the real NCCL/RCCL: set NCCL4PY_TEST_LIBRARY "
                    "(tests/gpu/run_checks.sh does)")
    torch.cuda.set_device(0)
    return nc.Communicator.init(1, 0, nc.get_unique_id(), timeout=timeout)


def test_completed_call_is_recorded_done(tmp_path):
    comm = make_comm(5.0)
    x = torch.ones(1024, device="cuda")
    s = torch.cuda.Stream()
    comm.allreduce(x, x, nc.SUM, stream=s)
    s.synchronize()
    time.sleep(0.5)  # the watchdog's next look finds the event complete
    rec = json.loads(open(comm.dump_trace(str(tmp_path / "r.json"))).read())
    (e,) = rec["entries"]
    assert (e["op"], e["state"], e["count"], e["dtype"]) == ("allreduce", "done", 1024, "float32")
    assert int(e["stream"], 16) == s.cuda_stream and e["end"] >= e["enqueue"]
    comm.destroy()


def test_call_behind_a_busy_stream_times_out(tmp_path):
    comm = make_comm(1.0)
    x = torch.ones(1024, device="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(int(20e9))  # ~10 s or more of spinning on the stream
    comm.allreduce(x, x, nc.SUM, stream=s)  # enqueued behind it: returns at once
    time.sleep(3.0)
    with pytest.raises(nc.NcclTimeoutError) as info:
        comm.allreduce(x, x, nc.SUM, stream=s)
    assert (info.value.operation, info.value.seq) == ("allreduce", 1)
    assert info.value.waited >= 1.0
    comm.abort()  # only forgets it: the watchdog aborted it
    s.synchronize()
