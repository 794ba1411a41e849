"""Leak check over 10**5 mixed calls against the recording stub.

tests/test_refcounts.py and tests/test_core_calls.py measure each call on
its own (tracemalloc, 20 000 calls); here 100 000 calls cycle through
low-level and nccl.core calls, successful and failing (argument errors,
buffer errors and library error statuses), and the number of live objects,
tracemalloc's total and the process RSS must not grow past a fixed bound.
"""
from __future__ import annotations

import gc
import os
import tracemalloc

import numpy as np

import nccl.bindings as b
import nccl.core as nc
from nccl._nccl import resolve_buffer, resolve_stream

N = 100_000


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_mixed_calls_do_not_grow(stub):
    comm = nc.Communicator(0x7F00_0000_1000)
    x = np.arange(64, dtype=np.float32)
    y = np.zeros(64, np.float32)
    small = np.zeros(1, np.float32)
    uid = bytes(128)

    def expect(exc, fn, *a, **k):
        try:
            fn(*a, **k)
        except exc:
            return
        raise AssertionError(f"{fn} did not raise {exc}")

    def lib_error():
        stub.nccl4pyStubSetResult(4)
        try:
            expect(b.NCCLError, b.all_reduce, 1, 2, 3, 7, 0, 4, 5)
            expect(b.NCCLError, comm.allreduce, x, y, nc.SUM)
        finally:
            stub.nccl4pyStubSetResult(0)

    calls = [
        lambda: b.all_reduce(x.ctypes.data, y.ctypes.data, 64, 7, 0, 4, 5),
        lambda: b.comm_init_rank(2, uid, 0),
        lambda: b.get_unique_id(),
        lambda: b.comm_count(1),
        lambda: b.group_simulate_end(),
        lambda: comm.allreduce(x, y, nc.SUM),
        lambda: comm.broadcast(x, y, root=0),
        lambda: comm.allreduce((x, 8, nc.FLOAT32), y, nc.MAX),
        lambda: resolve_buffer(x, "x", True),
        lambda: resolve_stream(None),
        lambda: expect(TypeError, b.all_reduce, None, 2, 3, 7, 0, 4, 5),
        lambda: expect(OverflowError, b.all_reduce, 2**70, 2, 3, 7, 0, 4, 5),
        lambda: expect(ValueError, b.comm_init_rank, 2, b"short", 0),
        lambda: expect(nc.NcclInvalid, comm.allreduce, x, small, nc.SUM),
        lambda: expect(TypeError, comm.allreduce, object(), y, nc.SUM),
        lambda: expect(nc.NcclInvalid, comm.allreduce, x, np.zeros(128)[::2], nc.SUM),
        lib_error,
    ]
    k = len(calls)

    def run(n):
        for i in range(n):
            calls[i % k]()

    run(5 * k * 100)  # warm-up: caches, interned strings, freelists
    gc.collect()
    objs0, rss0 = len(gc.get_objects()), rss_bytes()
    tracemalloc.start()
    try:
        t0 = tracemalloc.get_traced_memory()[0]
        run(N)
        gc.collect()
        traced = tracemalloc.get_traced_memory()[0] - t0
    finally:
        tracemalloc.stop()
    objs, rss = len(gc.get_objects()) - objs0, rss_bytes() - rss0
    print(f"\nleaks: {N} calls: objects {objs:+d}, tracemalloc {traced:+d} B, RSS {rss:+d} B")
    assert objs < 50, objs
    assert traced < 64 * 1024, traced
    if "libasan" not in os.environ.get("LD_PRELOAD", ""):  # ASan's quarantine holds freed memory
        assert rss < 8 * 1024 * 1024, rss
