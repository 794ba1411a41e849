"""Messages name what a user wrote: ops by name (``op=sum``) and data types
as the array libraries call them (``float32``, ``float8_e4m3fn``), in the
host backend's mismatch errors, nccl.core's refusals and the flight records."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import clean_env, host_available

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


@needs_host
def test_flight_records_name_dtypes_as_arrays_do(tmp_path):
    """The flight records (and so nccl.trace) use the same dtype names as every
    other message: what NumPy and ml_dtypes call them."""
    pytest.importorskip("ml_dtypes")
    code = ("import json, os, glob, numpy as np, ml_dtypes\n"
            "import nccl.core as nc\n"
            "comm = nc.Communicator.init_all(1)[0]\n"
            "for dt in (np.float32, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn,\n"
            "           ml_dtypes.float8_e5m2):\n"
            "    x = np.ones(4, dt)\n"
            "    comm.allreduce(x, x, nc.MAX)\n"
            "comm.dump_trace()\n"
            "comm.destroy()\n"
            "(f,) = glob.glob(os.path.join(os.environ['NCCL4PY_TRACE_DIR'], '*.json'))\n"
            "print(json.dumps([(e['dtype'], e['redop']) for e in json.load(open(f))['entries']]))\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env=clean_env(NCCL4PY_BACKEND="host", NCCL4PY_TRACE_DIR=str(tmp_path)))
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout.splitlines()[-1]) == [
        ["float32", "max"], ["bfloat16", "max"], ["float8_e4m3fn", "max"], ["float8_e5m2", "max"]]
