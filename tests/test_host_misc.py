"""Host backend: selection, several ranks in one process, bad arguments,
and a rank that dies."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import nccl.bindings as b
from conftest import clean_env, host_available, run_python, shm_path

pytestmark = pytest.mark.skipif(not host_available(), reason="host backend not built")


def host_env(**kw):
    return clean_env(NCCL4PY_BACKEND="host", **kw)


def test_selected_by_env_and_reported():
    p = subprocess.run([sys.executable, "-m", "nccl", "--json"], env=host_env(),
                       capture_output=True, text=True, timeout=60)
    j = json.loads(p.stdout)
    assert j["library"]["family"].startswith("host backend")
    assert j["library"]["path"].endswith("libnccl4py_host.so")
    assert j["library"]["version_code"] >= 22800
    # NCCL_LIBRARY pointing at the file works too
    p2 = run_python("import nccl.bindings as b; print(b.get_library_path())",
                    clean_env(NCCL_LIBRARY=j["library"]["path"]))
    assert p2.stdout.strip() == j["library"]["path"]


@pytest.mark.nccl(nranks=1)
def test_comm_init_all_three_ranks_in_one_process():
    comms = b.comm_init_all(3, [0, 1, 2])
    assert [b.comm_user_rank(c) for c in comms] == [0, 1, 2]
    assert all(b.comm_count(c) == 3 for c in comms)
    ins = [np.arange(10, dtype=np.float32) * (r + 1) for r in range(3)]
    outs = [np.zeros(10, np.float32) for _ in range(3)]
    b.group_start()
    for r, c in enumerate(comms):
        b.all_reduce(ins[r].ctypes.data, outs[r].ctypes.data, 10, int(b.DataType.Float32),
                     int(b.RedOp.Sum), c, 0)
    b.group_end()
    for o in outs:
        assert (o == np.arange(10, dtype=np.float32) * 6).all(), o
    for c in comms:
        b.comm_destroy(c)


@pytest.mark.nccl(nranks=1)
def test_bad_arguments_give_invalid_argument_with_a_message():
    handle = b.comm_init_rank(1, b.get_unique_id(), 0)
    a = np.zeros(4, np.float32)
    cases = {
        "null_comm": lambda: b.all_reduce(a.ctypes.data, a.ctypes.data, 4, 7, 0, 0, 0),
        "bad_dtype": lambda: b.all_reduce(a.ctypes.data, a.ctypes.data, 4, 99, 0, handle, 0),
        "bad_op": lambda: b.all_reduce(a.ctypes.data, a.ctypes.data, 4, 7, 77, handle, 0),
        "bad_root": lambda: b.broadcast(a.ctypes.data, a.ctypes.data, 4, 7, 5, handle, 0),
        "bad_peer": lambda: b.send(a.ctypes.data, 4, 7, 3, handle, 0),
        "null_buf": lambda: b.all_reduce(0, a.ctypes.data, 4, 7, 0, handle, 0),
        "bad_rank": lambda: b.comm_init_rank(2, b.get_unique_id(), 2),
        "bad_nranks": lambda: b.comm_init_rank(0, b.get_unique_id(), 0),
        # messages name the library function, send and recv too
        "send_dtype": lambda: b.send(a.ctypes.data, 4, 99, 0, handle, 0),
        "recv_dtype": lambda: b.recv(a.ctypes.data, 4, 99, 0, handle, 0),
    }
    named = {"send_dtype": "rank 0 of 1: ncclSend: invalid datatype 99",
             "recv_dtype": "rank 0 of 1: ncclRecv: invalid datatype 99"}
    for case, call in cases.items():
        with pytest.raises(b.NCCLError) as err:
            call()
        assert err.value.status in (4, 5), (case, err.value.status, str(err.value))
        assert "[last error: " in str(err.value), (case, str(err.value))
        assert named.get(case, "") in str(err.value), (case, str(err.value))
    b.comm_destroy(handle)


DYING = r"""
import os, signal, sys, time, json
import numpy as np, nccl.bindings as b
rank, uid = int(sys.argv[1]), bytes.fromhex(sys.argv[2])
comm = b.comm_init_rank(3, uid, rank)
a = np.ones(1 << 18, np.float32)
for i in range(1000):
    if rank == 2 and i == 5:
        os.kill(os.getpid(), signal.SIGKILL)
    t0 = time.monotonic()
    try:
        b.all_reduce(a.ctypes.data, a.ctypes.data, a.size, 7, 0, comm, 0)
    except b.NCCLError as e:
        waited = time.monotonic() - t0
        t1 = time.monotonic()
        b.comm_abort(comm)
        print(json.dumps({"status": e.status, "msg": str(e), "waited": waited,
                          "abort": time.monotonic() - t1, "iteration": i}), flush=True)
        sys.exit(0)
print(json.dumps({"status": 0}))
"""


def test_a_killed_rank_becomes_an_error_on_the_survivors():
    env = host_env(NCCL4PY_HOST_TIMEOUT="5")
    uid = run_python("import nccl.bindings as b; print(bytes(b.get_unique_id()).hex())", env)
    assert uid.returncode == 0, uid.stderr
    hexid = uid.stdout.strip()
    procs = [subprocess.Popen([sys.executable, "-c", DYING, str(r), hexid], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(3)]
    t0 = time.monotonic()
    outs = [p.communicate(timeout=60) for p in procs]
    elapsed = time.monotonic() - t0
    assert procs[2].returncode == -signal.SIGKILL
    for r in (0, 1):
        assert procs[r].returncode == 0, outs[r][1]
        res = json.loads(outs[r][0].strip().splitlines()[-1])
        assert res["status"] in (6, 8), res  # RemoteError or Timeout
        assert res["waited"] < 5 + 3, res
        assert res["abort"] < 2, res
        assert "[last error: " in res["msg"]
    assert elapsed < 30
    time.sleep(0.2)
    # this job's segment (its only communicator's); other tests running at the
    # same time have segments of their own in /dev/shm while they join
    assert not os.path.exists(shm_path(hexid))


def _collectives(send, recv, comm):
    """(the library function, a call of it on 2 ranks) of every collective."""
    return [
        ("ncclAllReduce", lambda: b.all_reduce(send, recv, 8, 7, 0, comm, 0)),
        ("ncclBroadcast", lambda: b.broadcast(send, recv, 8, 7, 0, comm, 0)),
        ("ncclReduce", lambda: b.reduce(send, recv, 8, 7, 0, 0, comm, 0)),
        ("ncclAllGather", lambda: b.all_gather(send, recv, 4, 7, comm, 0)),
        ("ncclReduceScatter", lambda: b.reduce_scatter(send, recv, 4, 7, 0, comm, 0)),
        ("ncclAlltoAll", lambda: b.allto_all(send, recv, 4, 7, comm, 0)),
        ("ncclGather", lambda: b.gather(send, recv, 4, 7, 0, comm, 0)),
        ("ncclScatter", lambda: b.scatter(send, recv, 4, 7, 0, comm, 0)),
        ("ncclAllReduceWithBias",
         lambda: b.all_reduce_with_bias(send, recv, 8, 7, 0, comm, 0, send)),
        ("ncclAllToAllv",
         lambda: b.all_to_all_v(send, [4, 4], [0, 4], recv, [4, 4], [0, 4], 7, comm, 0)),
    ]


@pytest.mark.nccl(nranks=1)
@pytest.mark.parametrize("index", range(10))
def test_mismatched_collectives_are_named_by_their_library_function(index):
    """A collective that another rank does not match is named by its library
    function in the message."""
    bufs = [(np.ones(16, np.float32), np.zeros(16, np.float32)) for _ in range(2)]
    comms = b.comm_init_all(2, [0, 1])
    mine, call = _collectives(bufs[0][0].ctypes.data, bufs[0][1].ctypes.data, comms[0])[index]
    # the other rank runs one that waits for every rank (so it sees the mismatch)
    theirs, other = _collectives(bufs[1][0].ctypes.data, bufs[1][1].ctypes.data,
                                 comms[1])[5 if index == 0 else 0]
    with pytest.raises(b.NCCLError) as err:
        b.group_start()
        call()
        other()
        b.group_end()
    assert err.value.status == 5, str(err.value)
    text = " ".join(b.get_last_error(c) for c in comms)
    assert "mismatched collective calls: this rank called " in text
    assert set(re.findall(r"called (\w+)\(count=", text)) == {mine, theirs}, text
    for c in comms:
        b.comm_abort(c)


@pytest.mark.nccl(nranks=1)
@pytest.mark.parametrize("pair", ["own-roots", "broadcast-vs-reduce", "gather-vs-scatter"])
def test_a_mismatch_no_rank_waited_on_fails_the_next_collective(pair):
    """Calls in which every rank waits for nobody (each rank the root of its
    own broadcast; a broadcast's root against a reduce's sender) cannot be
    compared when they run; the next collective that compares the ranks
    finds that their sequences differ, instead of going on silently."""
    bufs = [(np.ones(16, np.float32), np.zeros(16, np.float32)) for _ in range(2)]
    comms = b.comm_init_all(2, [0, 1])
    sp = [(s.ctypes.data, r.ctypes.data) for s, r in bufs]
    first = {
        "own-roots": (lambda: b.broadcast(*sp[0], 8, 7, 0, comms[0], 0),
                      lambda: b.broadcast(*sp[1], 8, 7, 1, comms[1], 0)),
        "broadcast-vs-reduce": (lambda: b.broadcast(*sp[0], 8, 7, 0, comms[0], 0),
                                lambda: b.reduce(*sp[1], 8, 7, 0, 0, comms[1], 0)),
        "gather-vs-scatter": (lambda: b.scatter(*sp[0], 4, 7, 0, comms[0], 0),
                              lambda: b.gather(*sp[1], 4, 7, 0, comms[1], 0)),
    }[pair]
    b.group_start()
    first[0]()
    first[1]()
    b.group_end()
    with pytest.raises(b.NCCLError) as err:
        b.group_start()
        for k in range(2):
            b.all_reduce(*sp[k], 8, 7, 0, comms[k], 0)
        b.group_end()
    assert err.value.status == 5, str(err.value)  # ncclInvalidUsage
    text = " ".join(b.get_last_error(c) for c in comms)
    assert "an earlier collective of the communicator differed" in text, text
    for c in comms:
        b.comm_abort(c)


@pytest.mark.nccl(nranks=1)
def test_matching_rooted_collectives_leave_the_next_collective_alone():
    """The same rooted calls on both ranks, with the ranks running ahead of
    each other, compare equal afterwards."""
    bufs = [(np.ones(16, np.float32), np.zeros(16, np.float32)) for _ in range(2)]
    comms = b.comm_init_all(2, [0, 1])
    sp = [(s.ctypes.data, r.ctypes.data) for s, r in bufs]
    b.group_start()
    for k in range(2):
        for root in (0, 1, 0):
            b.broadcast(*sp[k], 8, 7, root, comms[k], 0)
            b.reduce(*sp[k], 8, 7, 0, root, comms[k], 0)
        b.all_reduce(*sp[k], 8, 7, 0, comms[k], 0)
    b.group_end()
    for c in comms:
        b.comm_destroy(c)
