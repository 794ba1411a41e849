"""Host backend: NCCL's parameter API over the NCCL4PY_HOST_* variables."""
from __future__ import annotations

import json
import struct
import subprocess
import sys

import pytest

from conftest import clean_env
from host_ctypes import PRELUDE
from test_host_collectives import host_available

pytestmark = pytest.mark.skipif(not host_available(), reason="host backend not built")


PARAMS = PRELUDE + r"""
keys = c.POINTER(c.c_char_p)()
nkeys = c.c_int()
assert lib.ncclParamGetAllParameterKeys(c.byref(keys), c.byref(nkeys)) == 0
out = {"keys": [keys[i].decode() for i in range(nkeys.value)], "params": {}}

def get(key):
    v, ln = c.c_char_p(b"x"), c.c_int(-5)
    rc = lib.ncclParamGetParameter(key.encode(), c.byref(v), c.byref(ln))
    return [rc, v.value.decode() if v.value is not None else None, ln.value]

types = {"I8": c.c_int8, "I16": c.c_int16, "I32": c.c_int32, "I64": c.c_int64,
         "U8": c.c_uint8, "U16": c.c_uint16, "U32": c.c_uint32, "U64": c.c_uint64}
for key in out["keys"]:
    h = P()
    assert lib.ncclParamBind(c.byref(h), key.encode()) == 0 and h.value
    typed = {}
    for suffix, ct in types.items():
        o = ct(0)
        rc = getattr(lib, "ncclParamGet" + suffix)(h, c.byref(o))
        typed[suffix] = [rc, o.value]
    s = c.c_char_p()
    raw = (c.c_char * 16)()
    ln = c.c_int(-5)
    rc_raw = lib.ncclParamGet(h, raw, 16, c.byref(ln))
    short = c.c_int(-5)
    rc_short = lib.ncclParamGet(h, raw, 4, c.byref(short))
    out["params"][key] = {
        "get": get(key), "typed": typed, "str": lib.ncclParamGetStr(h, c.byref(s)),
        "raw": [rc_raw, ln.value, bytes(raw)[:max(ln.value, 0)].hex()],
        "raw_short": [rc_short, short.value],
    }
h = P(1234)
out["bind_unknown"] = [lib.ncclParamBind(c.byref(h), b"NCCL_NO_SUCH_PARAM"), h.value]
out["get_unknown"] = get("NCCL_NO_SUCH_PARAM")
out["foreign_handle"] = lib.ncclParamGetU64(P(id(out)), c.byref(c.c_uint64()))
sys.stdout.write(json.dumps(out) + "\n")
sys.stdout.flush()
lib.ncclParamDumpAll()
"""

HOST_PARAMS = ["NCCL4PY_HOST_TIMEOUT", "NCCL4PY_HOST_WAIT_REPORT", "NCCL4PY_HOST_SLOT_BYTES",
               "NCCL4PY_HOST_RING_BYTES", "NCCL4PY_HOST_SINGLE_COPY"]


def run_params(**env):
    base = {k: None for k in HOST_PARAMS}
    base.update(env)
    p = subprocess.run([sys.executable, "-c", PARAMS], env=clean_env(**base),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    first, dump = p.stdout.split("\n", 1)
    return json.loads(first), dump


def dump_blocks(dump: str) -> dict[str, list[str]]:
    lines = dump.splitlines()
    assert lines[0] == "=== ncclParam Registry Dump ==="
    blocks, cur = {}, None
    for line in lines[1:]:
        if line and not line.startswith(" "):
            cur = line.split(" ", 1)[0]
            blocks[cur] = [line]
        elif line:
            blocks[cur].append(line)
    return blocks


def test_params_list_the_backend_parameters_with_type_value_and_source():
    res, dump = run_params(NCCL4PY_HOST_TIMEOUT="2.5", NCCL4PY_HOST_SLOT_BYTES="64K")
    assert res["keys"] == HOST_PARAMS
    P = res["params"]
    # values: the environment's, else the default
    assert P["NCCL4PY_HOST_TIMEOUT"]["get"] == [0, "2.5", 3]
    assert P["NCCL4PY_HOST_WAIT_REPORT"]["get"] == [0, "10", 2]
    assert P["NCCL4PY_HOST_SLOT_BYTES"]["get"] == [0, "65536", 5]
    assert P["NCCL4PY_HOST_RING_BYTES"]["get"] == [0, "0", 1]
    # types: sizes are uint64_t, seconds double; other typed getters are refused
    for key, want in (("NCCL4PY_HOST_SLOT_BYTES", 65536), ("NCCL4PY_HOST_RING_BYTES", 0)):
        typed = P[key]["typed"]
        assert typed.pop("U64") == [0, want]
        assert all(rc == 4 for rc, _ in typed.values()), typed
        assert P[key]["raw"] == [0, 8, want.to_bytes(8, "little").hex()]
    for key, want in (("NCCL4PY_HOST_TIMEOUT", 2.5), ("NCCL4PY_HOST_WAIT_REPORT", 10.0)):
        assert all(rc == 4 for rc, _ in P[key]["typed"].values()), P[key]["typed"]
        assert P[key]["raw"] == [0, 8, struct.pack("<d", want).hex()]
    for key in HOST_PARAMS:
        assert P[key]["str"] == 4            # no string parameters
        assert P[key]["raw_short"] == [4, 0]  # maxLen below the value's size
    # unknown keys and handles
    assert res["bind_unknown"] == [4, None]
    assert res["get_unknown"] == [4, None, 0]
    assert res["foreign_handle"] == 4
    # the dump: type, value, source, default, accepted values
    blocks = dump_blocks(dump)
    assert list(blocks) == HOST_PARAMS
    t = blocks["NCCL4PY_HOST_TIMEOUT"]
    assert t[0].startswith("NCCL4PY_HOST_TIMEOUT (double) Seconds without progress")
    assert t[1] == "    Current value=2.5 set_by=EnvPlugin default=300"
    assert t[2].startswith("    Accepted value: a decimal number of seconds from 0 to 31536000")
    assert blocks["NCCL4PY_HOST_WAIT_REPORT"][1] == \
        "    Current value=10 set_by=Default default=10"
    s = blocks["NCCL4PY_HOST_SLOT_BYTES"]
    assert s[0].startswith("NCCL4PY_HOST_SLOT_BYTES (uint64_t) ")
    assert s[1] == "    Current value=65536 set_by=EnvPlugin default=0"
    assert blocks["NCCL4PY_HOST_RING_BYTES"][1] == "    Current value=0 set_by=Default default=0"


def test_params_refuse_a_value_a_communicator_would_refuse():
    res, dump = run_params(NCCL4PY_HOST_RING_BYTES="12", NCCL4PY_HOST_TIMEOUT="soon")
    for key in ("NCCL4PY_HOST_RING_BYTES", "NCCL4PY_HOST_TIMEOUT"):
        assert res["params"][key]["get"] == [4, None, 0], res["params"][key]
        assert res["params"][key]["raw"][:2] == [4, 0]
    assert res["params"]["NCCL4PY_HOST_RING_BYTES"]["typed"]["U64"][0] == 4
    assert res["params"]["NCCL4PY_HOST_WAIT_REPORT"]["get"] == [0, "10", 2]
    line = dump_blocks(dump)["NCCL4PY_HOST_RING_BYTES"][1]
    assert line.startswith("    Current value=<invalid: ") and "NCCL4PY_HOST_RING_BYTES=12" in line
    assert "set_by=EnvPlugin" in line
