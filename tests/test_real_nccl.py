"""CPU-side behaviour of the real NCCL library (nvidia-nccl-cu12/cu13 wheel
or a toolkit's libnccl.so.2).  There is no GPU here: the library loads,
reports its version, makes unique ids and error strings, and fails
communicator creation with its own message."""
from __future__ import annotations

import json

import pytest

from conftest import REAL_NCCL, clean_env, run_python

pytestmark = REAL_NCCL

PROBE = r"""
import ctypes, json, os, warnings
import nccl.bindings as b
from nccl import _discovery, _nccl
out = {}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    path = b.get_library_path()
out["warnings"] = [str(w.message) for w in caught]
out["abi"] = _nccl.ABI_VERSION
out["path"] = path
lib = ctypes.CDLL(path)
v = ctypes.c_int()
lib.ncclGetVersion(ctypes.byref(v))
out["own_version"] = v.value
out["version"] = b.get_version()
u1, u2 = b.get_unique_id(), b.get_unique_id()
out["uids_differ"] = bytes(u1) != bytes(u2)
out["uid_len"] = len(bytes(u1))
lib.ncclGetErrorString.restype = ctypes.c_char_p
out["strings"] = {r.name: b.get_error_string(int(r)) for r in b.Result}
out["own_strings"] = {r.name: lib.ncclGetErrorString(int(r)).decode() for r in b.Result}
try:
    b.comm_init_rank(1, u1, 0)
    out["init"] = "no error"
except b.NCCLError as e:
    out["init"] = [e.status, str(e)]
box = b.PointerBox()
try:
    out["init03"] = b.comm_init_rank(box.address, 1, u1, 0)
except b.NCCLError as e:
    out["init03"] = [e.status, str(e)]
print(json.dumps(out))
"""


def _real_nccl_env():
    from nccl import _discovery

    env = clean_env(NCCL4PY_PLATFORM="cuda")
    wheels = _discovery._wheel_libraries()
    if not wheels:
        pytest.skip("no nvidia-nccl wheel installed (pip install nvidia-nccl-cu13)")
    return env, wheels[0]


@pytest.fixture(scope="module")
def probe():
    env, wheel = _real_nccl_env()
    p = run_python(PROBE, env, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1]), wheel


def test_loads_the_wheel(probe):
    out, wheel = probe
    assert out["path"] == wheel


def test_version_is_the_library_s_own(probe):
    out, _ = probe
    assert out["version"] == out["own_version"] >= 22800


def test_a_release_newer_than_the_tables_is_reported_once(probe):
    """The installed release draws no warning when the tables know it, and one
    naming both versions when it is newer (then teach the tables:
    docs/contributing.md, "Teaching a new NCCL release")."""
    out, _ = probe
    v, k = out["own_version"], out["abi"]
    if v > k:
        assert len(out["warnings"]) == 1
        assert f"NCCL {v // 10000}.{v // 100 % 100}.{v % 100}" in out["warnings"][0]
        assert f"NCCL {k // 10000}.{k // 100 % 100}.{k % 100}" in out["warnings"][0]
    else:
        assert out["warnings"] == []


def test_unique_ids_differ(probe):
    out, _ = probe
    assert out["uids_differ"] and out["uid_len"] == 128


def test_every_result_has_the_library_s_string(probe):
    out, _ = probe
    assert out["strings"] == out["own_strings"]
    for name, s in out["strings"].items():
        assert s, name


def test_comm_init_fails_with_the_library_s_message(probe):
    out, _ = probe
    for key in ("init", "init03"):
        status, msg = out[key]
        assert status not in (0, 7)
        import nccl.bindings as b

        rname = b.Result(status).name
        # "<Name> (<value>): <ncclGetErrorString>" then the library's last-error text
        assert msg.startswith(f"{rname} ({status}): {out['own_strings'][rname]}"), msg
        assert "[last error: " in msg


LL_A2A = r"""
import ctypes, json
import nccl.bindings as b
lib = ctypes.CDLL(b.get_library_path())
cases = [(1, 1), (1, 8), (100, 4), (1000, 16), (4096, 3), (0, 8)]
print(json.dumps({"version": b.get_version(),
                  "ours": [b.ll_a2a_calc_slots(n, s) for n, s in cases],
                  "keywords": b.ll_a2a_calc_slots(max_elt_size=16, max_elts=1000),
                  "own": [lib.ncclLLA2ACalcSlots(n, s) for n, s in cases]}))
"""


def test_ll_a2a_calc_slots_is_the_library_s_own():
    env, _ = _real_nccl_env()
    p = run_python(LL_A2A, env, timeout=120)
    if p.returncode != 0 and "FunctionNotFoundError" in p.stderr:
        pytest.skip("the wheel's NCCL predates ncclLLA2ACalcSlots (2.28.3)")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["ours"] == out["own"] and out["keywords"] == out["own"][3]
    assert out["own"][3] >= 1000  # a buffer for 1000 elements has at least as many slots
