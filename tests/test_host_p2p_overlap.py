"""Sends and receives of one group whose buffers overlap, on 3 and 4 host-backend ranks.

As in NCCL, a send carries what its buffer held when the group's sends and
receives started, and a receive writes its buffer: nccl-tests' in-place
sendrecv (each rank sends its buffer to the next rank and receives from the
previous one into the same buffer) and every other overlap of a send's
source with a receive's destination must give exact results, whatever the
sizes of the messages and of the rings.  Every rank builds every rank's
buffers from a seed and checks what the group left against NumPy.  Overlaps
without a defined result (two receives into the same bytes, a send and a
receive on different communicators of one group) are refused.

The cases run on sub-communicators made with each setting of
NCCL4PY_HOST_SINGLE_COPY and with the default rings (1 MiB at 3 and 4
ranks: multi-MiB messages wait for their receivers) and 4 KiB rings (small
messages wrap around and wait too).
"""
from __future__ import annotations

import functools
import os
import time

import numpy as np
import pytest

import nccl.core as nc
from conftest import host_available

pytestmark = pytest.mark.skipif(not host_available(), reason="host backend not built")

KIB, MIB = 1 << 10, 1 << 20
#: (environment of the sub-communicator, message sizes in bytes, shifts in bytes)
SETTINGS = [
    ({"NCCL4PY_HOST_SINGLE_COPY": sc, "NCCL4PY_HOST_RING_BYTES": ring}, sizes, shifts)
    for sc in ("0", "1")
    for ring, sizes, shifts in (
        ("", (1, 4 * KIB + 1, MIB + 3, 3 * MIB + 1), (1, 64 * KIB + 5)),
        ("4096", (1, 100, 4 * KIB + 1, 64 * KIB + 7), (1, 5000)),
    )
]
INVALID_USAGE = 5


@functools.lru_cache(maxsize=64)
def original(rank: int, nbytes: int, salt: int) -> np.ndarray:
    """Rank `rank`'s buffer of a case before the group (read-only: copy it)."""
    rng = np.random.default_rng([rank, nbytes, salt])
    a = rng.integers(0, 256, nbytes, dtype=np.uint8)
    a.setflags(write=False)
    return a


def sub_communicator(comm: nc.Communicator, env: dict[str, str]) -> nc.Communicator:
    """A communicator over every rank, created with `env` set (the variables are
    read at creation)."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return comm.split(0, comm.rank)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def grouped(calls) -> None:
    nc.group_start()
    try:
        for call in calls:
            call()
    finally:
        nc.group_end()


def run_cases(sub: nc.Communicator, sizes, shifts, check, label: str) -> None:
    me, n = sub.rank, sub.nranks
    right, left = (me + 1) % n, (me - 1) % n
    for size in sizes:
        tag = f"{label} {size} B"
        # nccl-tests' in-place sendrecv, the send issued first and last
        for recv_first in (False, True):
            buf = original(me, size, 1).copy()
            calls = [lambda: sub.send(buf, right), lambda: sub.recv(buf, left)]
            grouped(calls[::-1] if recv_first else calls)
            check.check(f"{tag}: in-place ring{' recv first' if recv_first else ''}",
                        buf, original(left, size, 1), None)
        for d in shifts:
            # the destination shifted against the source, both ways
            buf = original(me, size + d, 2).copy()
            grouped([lambda: sub.send(buf[:size], right), lambda: sub.recv(buf[d:], left)])
            exp = np.concatenate([original(me, size + d, 2)[:d], original(left, size + d, 2)[:size]])
            check.check(f"{tag}: receive {d} B above the send", buf, exp, None)
            buf = original(me, size + d, 3).copy()
            grouped([lambda: sub.recv(buf[:size], left), lambda: sub.send(buf[d:], right)])
            exp = np.concatenate([original(left, size + d, 3)[d:], original(me, size + d, 3)[size:]])
            check.check(f"{tag}: receive {d} B below the send", buf, exp, None)
            # to itself: memmove
            buf = original(me, size + d, 4).copy()
            grouped([lambda: sub.send(buf[:size], me), lambda: sub.recv(buf[d:], me)])
            exp = original(me, size + d, 4).copy()
            exp[d:] = exp[:size].copy()
            check.check(f"{tag}: self-send {d} B up", buf, exp, None)
            buf = original(me, size + d, 5).copy()
            grouped([lambda: sub.recv(buf[:size], me), lambda: sub.send(buf[d:], me)])
            exp = original(me, size + d, 5).copy()
            exp[:size] = exp[d:].copy()
            check.check(f"{tag}: self-send {d} B down", buf, exp, None)
        # all-to-all in place through sends and receives, self included
        buf = original(me, n * size, 6).copy()
        calls = []
        for p in range(n):
            block = buf[p * size:(p + 1) * size]
            calls += [lambda b=block, p=p: sub.send(b, p), lambda b=block, p=p: sub.recv(b, p)]
        grouped(calls)
        exp = np.concatenate([original(p, n * size, 6)[me * size:(me + 1) * size]
                              for p in range(n)])
        check.check(f"{tag}: in-place all-to-all", buf, exp, None)
        # two sends overlapping each other and a receive between them
        h, q = size // 2, size // 4
        buf = original(me, 2 * size, 7).copy()
        out = np.zeros(size, np.uint8)
        grouped([lambda: sub.recv(buf[q:q + size], left), lambda: sub.recv(out, right),
                 lambda: sub.send(buf[:size], right), lambda: sub.send(buf[h:h + size], left)])
        exp = original(me, 2 * size, 7).copy()
        exp[q:q + size] = original(left, 2 * size, 7)[:size]
        check.check(f"{tag}: receive across two sends", buf, exp, None)
        check.check(f"{tag}: receive across two sends (the other)", out,
                    original(right, 2 * size, 7)[h:h + size], None)
        # two messages to each peer, the halves swapped (matched in order)
        buf = original(me, 2 * size, 8).copy()
        grouped([lambda: sub.send(buf[:size], right), lambda: sub.send(buf[size:], right),
                 lambda: sub.recv(buf[size:], left), lambda: sub.recv(buf[:size], left)])
        exp = original(left, 2 * size, 8)
        check.check(f"{tag}: halves swapped", buf, np.concatenate([exp[size:], exp[:size]]), None)


@pytest.mark.nccl(nranks=[3, 4])
def test_overlapping_sends_and_receives_are_exact(comm, check):
    for env, sizes, shifts in SETTINGS:
        sub = sub_communicator(comm, env)
        try:
            run_cases(sub, sizes, shifts, check,
                      " ".join(f"{k[13:]}={v or 'default'}" for k, v in env.items()))
        finally:
            sub.destroy()
    check.assert_ok()


def random_group(rng, n: int):
    """Messages (src, dst, bytes) among n ranks, with their offsets in the
    sender's and in the receiver's buffer: sources anywhere (overlapping each
    other and the destinations), destinations apart; and each rank's buffer size."""
    msgs = [(int(rng.integers(n)), int(rng.integers(n)),
             int(rng.choice([1, 7, 100, 4097, 5000, 70001, 300000])))
            for _ in range(int(rng.integers(1, 3 * n + 1)))]
    dst_off, size = {}, []
    for r in range(n):
        incoming = [i for i, m in enumerate(msgs) if m[1] == r]
        rng.shuffle(incoming)
        pos = int(rng.integers(64))
        for i in incoming:
            dst_off[i] = pos
            pos += msgs[i][2] + int(rng.integers(64))
        longest = max([m[2] for m in msgs if m[0] == r], default=0)
        size.append(max(pos, longest) + int(rng.integers(64)))
    src_off = {i: int(rng.integers(size[m[0]] - m[2] + 1)) for i, m in enumerate(msgs)}
    return msgs, src_off, dst_off, size


@pytest.mark.nccl(nranks=[3, 4])
def test_random_overlapping_groups_are_exact(comm, check):
    """Groups of sends and receives at random offsets of one buffer per rank,
    issued in a random order (the messages between two ranks in order)."""
    me, n = comm.rank, comm.nranks
    rng = np.random.default_rng(20240 + n)  # the same plan on every rank
    for ring in ("", "4096"):
        sub = sub_communicator(comm, {"NCCL4PY_HOST_RING_BYTES": ring})
        try:
            for g in range(40):
                msgs, src_off, dst_off, size = random_group(rng, n)
                buf = original(me, size[me], 100 + g).copy()
                mine = [(i, "send", m[1]) for i, m in enumerate(msgs) if m[0] == me]
                mine += [(i, "recv", m[0]) for i, m in enumerate(msgs) if m[1] == me]
                shuffle = np.random.default_rng([n, me, g, len(ring)])  # this rank's own
                order = [mine[k] for k in shuffle.permutation(len(mine))]
                # keep each (direction, peer)'s messages in their order
                for key in {(d, p) for _, d, p in mine}:
                    slots = [k for k, (_, d, p) in enumerate(order) if (d, p) == key]
                    for k, op in zip(slots, sorted(order[k] for k in slots)):
                        order[k] = op
                calls = []
                for i, d, p in order:
                    length = msgs[i][2]
                    off = src_off[i] if d == "send" else dst_off[i]
                    view = buf[off:off + length]
                    calls.append((lambda v=view, p=p: sub.send(v, p)) if d == "send"
                                 else (lambda v=view, p=p: sub.recv(v, p)))
                grouped(calls)
                exp = original(me, size[me], 100 + g).copy()
                for i, m in enumerate(msgs):
                    if m[1] == me:
                        src = original(m[0], size[m[0]], 100 + g)
                        exp[dst_off[i]:dst_off[i] + m[2]] = src[src_off[i]:src_off[i] + m[2]]
                check.check(f"ring={ring or 'default'} group {g}: {msgs}", buf, exp, None)
        finally:
            sub.destroy()
    check.assert_ok()


def refused(check, name: str, calls, fragment: str, untouched: list[np.ndarray]) -> None:
    """The group fails with ncclInvalidUsage naming the overlap, before it writes."""
    before = [a.copy() for a in untouched]
    check.cases += 1
    try:
        grouped(calls)
    except nc.NCCLError as e:
        if e.status != INVALID_USAGE or fragment not in str(e):
            check.failures.append(f"{name}: {e.status}: {e}")
    else:
        check.failures.append(f"{name}: the group was not refused")
    for a, b in zip(untouched, before):
        check.check(f"{name}: buffer untouched", a, b, None)


@pytest.mark.nccl(nranks=3)
def test_overlaps_without_a_defined_result_are_refused(comm, check):
    me, n = comm.rank, comm.nranks
    right, left = (me + 1) % n, (me - 1) % n
    size = 3 * KIB
    mine = original(me, size, 9)
    # two receives into overlapping bytes: which one wins would depend on timing
    sub = comm.split(0, me)
    buf = np.zeros(2 * size, np.uint8)
    refused(check, "two receives", [lambda: sub.send(mine, right), lambda: sub.send(mine, left),
                                    lambda: sub.recv(buf[:size], left),
                                    lambda: sub.recv(buf[size - 1:2 * size - 1], right)],
            "write overlapping memory", [buf])
    sub.abort()
    # a send and a receive of one buffer on two communicators of one group
    a, b = comm.split(0, me), comm.split(0, me)
    buf = mine.copy()
    other = np.zeros(size, np.uint8)
    refused(check, "two communicators", [lambda: a.send(buf, right), lambda: b.recv(buf, left),
                                         lambda: b.send(mine, right), lambda: a.recv(other, left)],
            "another communicator of the same group", [buf, other])
    a.abort()
    b.abort()
    # only rank 0 makes the mistake: the others fail at once instead of waiting for it
    sub = comm.split(0, me)
    buf = np.zeros(2 * size, np.uint8)
    t0 = time.monotonic()
    if me == 0:
        refused(check, "refused on rank 0", [
            lambda: sub.send(mine, right), lambda: sub.send(mine, left),
            lambda: sub.recv(buf[:size], left), lambda: sub.recv(buf[1:size + 1], right)],
            "write overlapping memory", [buf])
    else:
        check.cases += 1
        try:
            grouped([lambda: sub.send(mine, right), lambda: sub.send(mine, left),
                     lambda: sub.recv(buf[:size], left), lambda: sub.recv(buf[size:], right)])
        except nc.NCCLError as e:
            if e.status != INVALID_USAGE or "rank 0 reported an error" not in str(e):
                check.failures.append(f"peer of the refused group: {e.status}: {e}")
        else:
            check.failures.append("peer of the refused group: no error")
        if time.monotonic() - t0 > 20:
            check.failures.append(f"peer of the refused group waited {time.monotonic() - t0:.1f} s")
    sub.abort()
    # the parent communicator is untouched
    total = np.zeros(4, np.int32)
    comm.allreduce(np.full(4, me + 1, np.int32), total, nc.SUM)
    check.check("parent after the refusals", total, np.full(4, n * (n + 1) // 2, np.int32), None)
    check.assert_ok()
