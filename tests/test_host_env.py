"""The host backend's environment variables: every one is validated when a
communicator is created, a bad value is an NCCLError(InvalidArgument) naming
the variable and its accepted range (never a hang or a crash), and
host/README.md documents each with its range."""
from __future__ import annotations

import json
import re

import pytest

from conftest import ROOT, clean_env, host_available, run_python

pytestmark = pytest.mark.skipif(not host_available(), reason="host backend not built")

INVALID_ARGUMENT = 4

# One rank, then a large all-reduce: a slot size that wrapped to 0 would loop
# for ever in the chunked path, a huge one would fault.
PROG = r"""
import json
import numpy as np
import nccl.core as nc
from nccl.bindings import NCCLError
try:
    comm = nc.Communicator.init(1, 0, nc.get_unique_id())
    x = np.ones(1 << 18, np.float32)
    comm.allreduce(x, x, nc.SUM)
    comm.destroy()
    print(json.dumps({"ok": bool((x == 1).all())}))
except NCCLError as e:
    print(json.dumps({"status": e.status, "msg": str(e)}))
"""


def run_with(var: str, value: str) -> dict:
    p = run_python(PROG, clean_env(NCCL4PY_BACKEND="host", **{var: value}), timeout=60)
    assert p.returncode == 0, (var, value, p.returncode, p.stderr[-2000:])
    return json.loads(p.stdout.strip().splitlines()[-1])


BAD = [
    ("NCCL4PY_HOST_SLOT_BYTES", "-5"),
    ("NCCL4PY_HOST_SLOT_BYTES", "0x8000000000000000"),
    ("NCCL4PY_HOST_SLOT_BYTES", "1"),
    ("NCCL4PY_HOST_RING_BYTES", "1"),
    ("NCCL4PY_HOST_SLOT_BYTES", "12abc"),
    ("NCCL4PY_HOST_SLOT_BYTES", "99999999999999999999999"),
    ("NCCL4PY_HOST_RING_BYTES", "0x8000000000000000"),
    ("NCCL4PY_HOST_RING_BYTES", "-1"),
    ("NCCL4PY_HOST_RING_BYTES", "1.5M"),
    ("NCCL4PY_HOST_TIMEOUT", "-1"),
    ("NCCL4PY_HOST_TIMEOUT", "nan"),
    ("NCCL4PY_HOST_TIMEOUT", "inf"),
    ("NCCL4PY_HOST_TIMEOUT", "5s"),
    ("NCCL4PY_HOST_TIMEOUT", "1e400"),
    ("NCCL4PY_HOST_WAIT_REPORT", "-3"),
    ("NCCL4PY_HOST_WAIT_REPORT", "ten"),
    ("NCCL4PY_HOST_SINGLE_COPY", "2"),
    ("NCCL4PY_HOST_SINGLE_COPY", "yes"),
    ("NCCL4PY_HOST_SINGLE_COPY", "autox"),
    # seconds are decimal: no hexadecimal (floats), exponents, signs or words
    ("NCCL4PY_HOST_TIMEOUT", "0x10"),
    ("NCCL4PY_HOST_WAIT_REPORT", "0x10"),
    ("NCCL4PY_HOST_TIMEOUT", "0x1p4"),
    ("NCCL4PY_HOST_TIMEOUT", "1e2"),
    ("NCCL4PY_HOST_TIMEOUT", "+5"),
    ("NCCL4PY_HOST_WAIT_REPORT", "-0"),
    ("NCCL4PY_HOST_TIMEOUT", "infinity"),
    ("NCCL4PY_HOST_TIMEOUT", "."),
    ("NCCL4PY_HOST_TIMEOUT", "2,5"),
    # one 0x prefix, then hexadecimal digits only
    ("NCCL4PY_HOST_SLOT_BYTES", "0x0x10000"),
    ("NCCL4PY_HOST_RING_BYTES", "0X"),
    ("NCCL4PY_HOST_SLOT_BYTES", "65536.0"),
]


@pytest.mark.parametrize("var,value", BAD)
def test_bad_value_is_a_clear_invalid_argument(var, value):
    out = run_with(var, value)
    assert out.get("status") == INVALID_ARGUMENT, out
    msg = out["msg"]
    assert f"{var}={value}" in msg, msg
    assert re.search(r"from \S+ to \S+|0, 1 or auto", msg), msg  # the accepted values


GOOD = [
    ("NCCL4PY_HOST_SLOT_BYTES", "4096"),
    ("NCCL4PY_HOST_SLOT_BYTES", "64K"),
    ("NCCL4PY_HOST_SLOT_BYTES", "0x10000"),
    ("NCCL4PY_HOST_SLOT_BYTES", ""),
    ("NCCL4PY_HOST_SLOT_BYTES", "0"),  # sized automatically, as when unset
    ("NCCL4PY_HOST_RING_BYTES", "0"),
    ("NCCL4PY_HOST_RING_BYTES", "1M"),
    ("NCCL4PY_HOST_TIMEOUT", "0"),
    ("NCCL4PY_HOST_TIMEOUT", " 2.5 "),
    ("NCCL4PY_HOST_TIMEOUT", "30."),
    ("NCCL4PY_HOST_WAIT_REPORT", ".5"),
    ("NCCL4PY_HOST_WAIT_REPORT", "0031536000"),
    ("NCCL4PY_HOST_RING_BYTES", "0X4000"),
    ("NCCL4PY_HOST_WAIT_REPORT", "0"),
    ("NCCL4PY_HOST_SINGLE_COPY", "0"),
    ("NCCL4PY_HOST_SINGLE_COPY", " 1 "),
    ("NCCL4PY_HOST_SINGLE_COPY", "AUTO"),
]


@pytest.mark.parametrize("var,value", GOOD)
def test_good_value_is_accepted(var, value):
    assert run_with(var, value) == {"ok": True}


def test_every_variable_is_documented_with_its_range():
    """Each NCCL4PY_HOST_* name the backend's sources mention has a row in
    host/README.md's table, with a range."""
    names = set()
    for src in (ROOT / "host").glob("*.c"):
        if not src.name.startswith("test_"):
            names |= set(re.findall(r'"(NCCL4PY_HOST_[A-Z_]+)"', src.read_text()))
    assert {"NCCL4PY_HOST_TIMEOUT", "NCCL4PY_HOST_SLOT_BYTES",
            "NCCL4PY_HOST_RING_BYTES", "NCCL4PY_HOST_WAIT_REPORT"} <= names
    readme = (ROOT / "host" / "README.md").read_text()
    rows = {m.group(1): m.group(0) for m in
            re.finditer(r"^\| `(NCCL[A-Z0-9_]+)` \|.*$", readme, re.M)}
    for name in names | {"NCCL_DEBUG"}:
        assert name in rows, f"{name} has no row in host/README.md"
        assert re.search(r"\d.*(\.\.|to|–).*\d|VERSION", rows[name]), rows[name]
