"""No reference or memory leaks per call, on success and error paths
(measured with tracemalloc over many calls against the recording stub)."""
from __future__ import annotations


import pytest

import nccl.bindings as b
from conftest import memory_growth, swallowing
from nccl.bindings import rocm_extensions as rx


UID = bytes(128)
CFG = b.Config()
DESCS = [b.WaitSignalDesc(), b.WaitSignalDesc()]
CALLS = {
    "all_reduce": lambda: b.all_reduce(1, 2, 3, 7, 0, 4, 5),
    "all_reduce_kw": lambda: b.all_reduce(1, 2, 3, 7, 0, comm=4, stream=5),
    "get_unique_id": lambda: b.get_unique_id(),
    "comm_init_rank_02": lambda: b.comm_init_rank(2, UID, 0),
    "comm_init_rank_config": lambda: b.comm_init_rank_config(2, UID, 0, CFG),
    "comm_init_rank_scalable": lambda: b.comm_init_rank_scalable(2, 0, 2, [UID, UID], None),
    "comm_init_all": lambda: b.comm_init_all(3, [0, 1, 2]),
    "comm_shrink": lambda: b.comm_shrink(1, [1, 2], 2, None, 0),
    "comm_query_properties": lambda: b.comm_query_properties(1),
    "group_simulate_end": lambda: b.group_simulate_end(),
    "wait_signal": lambda: b.wait_signal(2, DESCS, 1, 2),
    "get_error_string": lambda: b.get_error_string(3),
    "all_to_all_v": lambda: rx.all_to_all_v(1, [1, 2], [0, 1], 2, [1, 2], [0, 1], 7, 0, 0),
    "config_field": lambda: setattr(CFG, "comm_name", "x"),
    "bad_type": swallowing(lambda: b.all_reduce(None, 2, 3, 7, 0, 4, 5), TypeError),
    "bad_array": swallowing(lambda: b.comm_init_all(2, [1, "x"]), TypeError),
    "bad_uid": swallowing(lambda: b.comm_init_rank(2, b"x", 0), ValueError),
    "bad_kw": swallowing(lambda: b.all_reduce(1, 2, 3, 7, 0, 4, bogus=5), TypeError),
    "seq_mismatch": swallowing(lambda: rx.all_to_all_v(1, [1], [0, 1], 2, [1], [0], 7, 0, 0),
                            ValueError),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_nomemory_growth(recording_stub, name):
    recording_stub.nccl4pyStubReset()
    assert memory_growth(CALLS[name]) < 16 * 1024


def test_error_status_path_does_not_leak(recording_stub):
    recording_stub.nccl4pyStubSetResult(4)
    try:
        assert memory_growth(swallowing(lambda: b.all_reduce(1, 2, 3, 7, 0, 4, 5), b.NCCLError),
                       n=5000) < 16 * 1024
    finally:
        recording_stub.nccl4pyStubReset()
