"""nccl4py_host when a rank dies or does not arrive (tests/torch_faults.py).

A rank killed with SIGKILL in the middle of all-reduces: the others fail
with an NCCLError naming it and the call within seconds, destroy_process_group returns,
the /dev/shm segment is gone.  A rank that sleeps through an all-reduce of a
group with a 3 s timeout: the other fails with NcclTimeoutError naming the
call within the timeout (the watchdog aborts the communicator); the
sleeper's late call fails or completes exactly (rank 0 had contributed).
"""
from __future__ import annotations

import pytest

from torch_ranks import needs_host, needs_torch, run_job

pytestmark = [needs_torch, needs_host]

REMOTE = 6


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("torchfaults")
    results, out = run_job(tmp, "torch_faults.py", 3, ["tcp://127.0.0.1:{port}",
                                                        str(tmp / "init2")], expect_rc=None)
    return results, out


def test_a_rank_that_dies(job):
    results, out = job
    assert sorted(results) == [0, 1], out[-4000:]  # rank 2 was killed
    for r in (0, 1):
        res = results[r]
        err = res["error1"]
        assert err is not None, res
        assert err["type"] == "NCCLError" and err["status"] == REMOTE, err
        assert "rank 2" in err["message"] and "ncclAllReduce" in err["message"], err
        assert res["waited1"] < 15, res
        assert res["teardown1"] < 5, res
        assert not res["segment1_left"], res


def test_a_rank_that_does_not_arrive(job):
    results, out = job
    r0, r1 = results[0], results[1]
    err = r0["error2"]
    assert err is not None and r0["timeout_error2"], r0
    assert "allreduce" in (err["operation"] or ""), err
    assert "rank 1" in err["message"] or "ranks 1" in err["message"], err
    assert 2.5 < r0["waited2"] < 10, r0
    # rank 0 contributed before its watchdog aborted: the late call may complete
    assert r1["error2"] is not None or r1["value2"] == [4.0] * 4, r1
    assert not r0["segment2_left"] and not r1["segment2_left"]


@pytest.mark.parametrize("what", ["all_reduce", "broadcast", "isend/irecv"])
def test_a_wait_with_a_timeout_for_a_late_rank(job, what):
    """Work.wait(timeout=1 s) with the peer 4 s late raises RuntimeError after
    about 1 s, as gloo's does in the same job; the operation goes on: a wait
    without a timeout returns True with the result, the next call works."""
    results, out = job
    r0 = results[0]
    for backend in ("gloo", "ours"):
        res = r0[f"late {backend} {what}"]
        assert res["issue_s"] < 0.9, (backend, res)
        assert isinstance(res["first"], dict) and res["first"]["type"] == "RuntimeError", \
            (backend, res)
        assert 0.9 < res["first_s"] < 3, (backend, res)
    res = r0[f"late ours {what}"]
    assert "timed out" in res["first"]["message"], res
    if what != "isend/irecv":  # (a send's is_completed() runs, so waits for, the queue)
        assert res["completed_after_timeout"] is False, res
    assert res["second"] is True and res["value_ok"] and res["next_ok"], res
    res = results[1][f"late ours {what}"]  # the late rank's own call completed at once
    assert res["first"] is True and res["value_ok"] and res["next_ok"], res
    if what != "isend/irecv":  # gloo's collectives go on too
        res = r0[f"late gloo {what}"]
        assert res["second"] is True and res["value_ok"] and res["next_ok"], res
