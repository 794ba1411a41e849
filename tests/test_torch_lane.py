"""nccl.torch's lane (the thread of a group's asynchronous collectives) on
its own: order, errors, futures, draining from its own thread."""
from __future__ import annotations

import threading

import pytest

from torch_ranks import needs_torch

pytestmark = needs_torch


@pytest.fixture
def lane():
    from nccl.torch.lane import Lane

    lane = Lane("test lane")
    yield lane
    lane.close()


def test_jobs_run_in_order_and_complete_their_futures(lane):
    done = []
    gate = threading.Event()
    works = [lane.submit(lambda i=i: (gate.wait(), done.append(i)), [i]) for i in range(5)]
    assert lane.busy == 5 and not works[0].is_completed()
    gate.set()
    lane.drain()
    assert done == [0, 1, 2, 3, 4] and lane.busy == 0
    for i, w in enumerate(works):
        assert w.is_completed() and w.is_success() and w.wait() is True
        assert w.get_future().value() == [i] and w.result() == [i]


def test_an_error_stays_with_its_work_and_the_lane_goes_on(lane):
    def boom():
        raise ValueError("the library said no")

    bad = lane.submit(boom, [])
    good = lane.submit(lambda: None, ["ok"])
    with pytest.raises(ValueError, match="the library said no"):
        bad.wait()
    assert not bad.is_success() and isinstance(bad.exception(), ValueError)
    with pytest.raises(ValueError):
        bad.get_future().wait()
    assert good.wait() and good.get_future().value() == ["ok"]


def test_a_callback_on_the_lane_may_drain_and_submit(lane):
    """A future's callback runs on the lane's thread: draining there returns
    at once instead of waiting for itself.  (The job waits until the callback
    is attached: a future that is already complete runs it on the caller.)"""
    seen = []
    gate = threading.Event()

    def callback(fut):
        assert lane.here()
        lane.drain()
        seen.append(fut.value())
        return 7

    w = lane.submit(gate.wait, ["x"])
    chained = w.get_future().then(callback)
    gate.set()
    assert chained.wait() == 7 and seen == [["x"]]
    assert not lane.here()


def test_close_runs_what_is_queued():
    from nccl.torch.lane import Lane

    lane = Lane("closing")
    ran = []
    lane.submit(lambda: ran.append(1), [])
    lane.close()
    assert ran == [1] and not lane._thread.is_alive()
