"""Messages name what a user wrote: ops by name (``op=sum``) and data types
as the array libraries call them (``float32``, ``float8_e4m3fn``), the one
spelling of the data types' table, in the host backend's errors, the
extension's and nccl.core's refusals and the flight records."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest

from conftest import clean_env, host_available
from gen import dtypes as gen_dtypes
from host_ranks import run_ranks
from nccl import _nccl

DTYPES, _ = gen_dtypes.parse_dtypes()

needs_host = pytest.mark.skipif(not host_available(), reason="host backend not built")


def python_m(*args, env=None, timeout=120):
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True,
                          timeout=timeout, env=env or clean_env())


@needs_host
def test_mismatched_calls_name_ops_and_dtypes_as_users_write_them(tmp_path):
    prog = tmp_path / "mismatch.py"
    prog.write_text(
        "import numpy as np\nimport nccl.core as nc\n"
        "with nc.Communicator.from_env() as comm:\n"
        "    r = comm.rank\n"
        "    x = np.ones(4, np.float32 if r == 0 else np.int32)\n"
        "    try:\n"
        "        comm.allreduce(x, x, nc.SUM if r == 0 else nc.MAX)\n"
        "    except nc.NCCLError as e:\n"
        "        print(e, flush=True)\n"
        "    try:\n"
        "        comm.allreduce(np.ones(2, np.float32), np.empty(2, np.int64), nc.SUM)\n"
        "    except nc.NcclInvalid as e:\n"
        "        print(e, flush=True)\n")
    p = python_m("nccl.run", "-n", "2", "--backend", "host", str(prog))
    out = p.stdout
    assert "this rank called ncclAllReduce(count=4, float32, op=sum) but rank 1 called " \
           "ncclAllReduce(count=4, int32, op=max)" in out, out + p.stderr
    assert "root=" not in out and "op=0" not in out
    assert "Dtype mismatch: sendbuf has dtype float32, recvbuf has dtype int64" in out


# Every path that names a data type, run for each type v (the other type of
# the message is u, the next one): the extension's buffer resolution and call
# checks, the host backend's errors (its only text that names a data type),
# nccl.core's scalar check, and the flight recorder's log line and record.
SPELLING_PROGRAM = """\
import glob, re, nccl.core as nc
from nccl import _nccl

rows, _ = _nccl._dtype_table()
def spec(v, n=4):  # n elements of type v over raw bytes (every type, no ml_dtypes)
    return (np.zeros(8 * n, np.uint8), n, v)
def text(fn):
    try:
        fn()
    except (nc.NcclInvalid, nc.NCCLError) as e:
        return str(e)
    return "no error"
out = {}
for v in range(len(rows)):
    u = (v + 1) % len(rows)
    m = out[v] = {}
    m["dtype mismatch"] = text(lambda: comm.allreduce(spec(v), spec(u), nc.SUM))
    raw = np.zeros(4 * rows[v][1], np.uint8)
    m["count exceeds"] = text(lambda: _nccl.resolve_buffer((raw, 5, v), "b", False))
    if rows[v][1] > 1:
        m["not whole"] = text(lambda: _nccl.resolve_buffer((np.zeros(9, np.uint8), rows[v][2]),
                                                           "b", False))
    m["scalar"] = text(lambda: comm.create_pre_mul_sum(spec(v, 1), datatype=u))
    op = comm.create_pre_mul_sum(spec(v, 1))
    m["premulsum"] = text(lambda: comm.allreduce(spec(u), spec(u), op))
    comm.allreduce(spec(v), spec(v), nc.MAX)
    child = comm.split(0, RANK)  # a mismatch fails its communicator
    m["calls"] = text(lambda: child.allreduce(spec(v if RANK == 0 else u),
                                              spec(v if RANK == 0 else u), nc.SUM))
    child.abort()
comm.dump_trace()
(f,) = glob.glob(os.path.join(os.environ["NCCL4PY_TRACE_DIR"], f"rank{RANK}.json"))
records = [e["dtype"] for e in json.load(open(f))["entries"] if e["redop"] == "max"]
report(messages=out, records=records)
"""


def _other_spellings(name: str, array_name: str) -> set[str]:
    """The spellings of a type that are not its array name: the C enum's, the
    bindings' DataType, nccl.core's NcclDataType, their lower case."""
    return {f"nccl{name}", name, name.upper(), name.lower()} - {array_name}


@needs_host
def test_every_message_names_each_dtype_by_its_array_name(tmp_path):
    """One spelling per data type in every message and record, the table's
    array name (docs/semantics.md), in the C extension, the host backend
    and the Python layer alike."""
    rows, _ = _nccl._dtype_table()
    assert [r[2] for r in rows] == [t.array_name for t in DTYPES]
    log = tmp_path / "trace.log"
    reports = run_ranks(tmp_path, SPELLING_PROGRAM, 2, NCCL4PY_TRACE="1",
                        NCCL4PY_TRACE_FILE=str(log), NCCL4PY_TRACE_DIR=str(tmp_path / "rec"))
    names = [t.array_name for t in DTYPES]
    word = r"(?<![\w.]){}(?![\w])"
    for rep in reports:
        for v, t in enumerate(DTYPES):
            u, uname = DTYPES[(v + 1) % len(DTYPES)], names[(v + 1) % len(DTYPES)]
            m = rep["messages"][str(v)]
            assert set(m) == {"dtype mismatch", "count exceeds", "scalar", "premulsum", "calls",
                              *(("not whole",) if t.size > 1 else ())}
            want = {
                "dtype mismatch": f"Dtype mismatch: sendbuf has dtype {t.array_name}, "
                                  f"recvbuf has dtype {uname}",
                "count exceeds": f"b: count 5 exceeds the buffer's 4 {t.array_name} elements",
                "not whole": f"b: the buffer's 9 bytes are not a whole number of "
                             f"{t.array_name} elements ({t.size} bytes each)",
                "scalar": f"Device buffer datatype {t.array_name} doesn't match requested "
                          f"datatype {uname}",
                "premulsum": f"was created for {t.array_name} but used with {uname}",
                "calls": (f"this rank called ncclAllReduce(count=4, {t.array_name}, op=sum) "
                          f"but rank 1 called ncclAllReduce(count=4, {uname}, op=sum)")
                if rep["rank"] == 0 else
                         (f"this rank called ncclAllReduce(count=4, {uname}, op=sum) "
                          f"but rank 0 called ncclAllReduce(count=4, {t.array_name}, op=sum)"),
            }
            for path, msg in m.items():
                assert want[path] in msg, (t.name, path, msg)
                for other in _other_spellings(t.name, t.array_name) | \
                        _other_spellings(u.name, uname):
                    assert not re.search(word.format(re.escape(other)), msg), (path, other, msg)
        assert rep["records"] == names  # the flight record of the MAX calls
    lines = [line for line in log.read_text().splitlines() if " allreduce count=4 " in line
             and " max " in line]
    for rank in (0, 1):
        mine = [line for line in lines if line.startswith(f"nccl4py trace: rank {rank}/2 ")]
        assert [line.split(" count=4 ", 1)[1].split()[0] for line in mine] == names, mine
