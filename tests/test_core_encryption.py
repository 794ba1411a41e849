"""nccl.core.set_encryption: ncclSetEncryption (NCCL 2.32) with an
EncryptionConfig made from (psk, mode); on the recording stub, the real NCCL
and the host backend (which has no ncclSetEncryption)."""
from __future__ import annotations

import json

import pytest

import nccl.bindings as b
import nccl.core as nc
from conftest import REAL_NCCL, clean_env, run_python
from nccl.core import NcclInvalid, encryption

KEY = "k" * 32


def _recorded(stub) -> b.EncryptionConfig:
    """The EncryptionConfig whose address the stub's last call got."""
    rec = stub.nccl4pyStubLastCall().decode()
    assert rec.startswith("ncclSetEncryption config=encconfig:0x")
    addr = int(rec.split(":")[-1], 16)
    kept = [c for c in encryption._accepted if c.ptr == addr]
    assert len(kept) == 1  # the struct the library got stays alive after the call
    return kept[0]


def test_a_psk_is_psk_mode_and_none_is_plain_text(stub):
    nc.set_encryption(KEY)
    cfg = _recorded(stub)
    assert (cfg.mode, cfg.psk) == (b.EncryptionMode.PSK, KEY)
    nc.set_encryption(KEY.encode(), mode=b.EncryptionMode.PSK)
    assert _recorded(stub).psk == KEY
    nc.set_encryption()
    cfg = _recorded(stub)
    assert (cfg.mode, cfg.psk) == (b.EncryptionMode.NONE, "")
    assert bytes(cfg)[24:32] == bytes(8)  # psk: NULL
    nc.set_encryption(None, mode=0)
    assert _recorded(stub).mode == b.EncryptionMode.NONE


@pytest.mark.parametrize("args,kwargs,message", [
    ((), {"mode": b.EncryptionMode.PSK}, "mode PSK needs a psk"),
    ((KEY,), {"mode": b.EncryptionMode.NONE}, "mode NONE takes no psk"),
    ((KEY,), {"mode": 2}, r"mode must be an EncryptionMode \(NONE = 0, PSK = 1\), got 2"),
    ((KEY,), {"mode": True}, "mode must be an EncryptionMode"),
    ((KEY,), {"mode": "PSK"}, "mode must be an EncryptionMode"),
    ((5,), {}, "psk must be a str or bytes without NUL characters, got int"),
    (("a\0b",), {}, "without NUL"),
    ((b"\xff" * 32,), {}, "psk as bytes must be UTF-8"),
])
def test_bad_arguments_reach_nothing(stub, args, kwargs, message):
    with pytest.raises(NcclInvalid, match=message):
        nc.set_encryption(*args, **kwargs)
    assert stub.nccl4pyStubCallCount() == 0


def test_the_library_s_refusal_is_its_error(stub):
    stub.nccl4pyStubSetResult(4)
    n = len(encryption._accepted)
    with pytest.raises(b.NCCLError) as ei:
        nc.set_encryption(KEY)
    assert ei.value.status == 4 and len(encryption._accepted) == n  # not kept


def test_no_ncclSetEncryption_on_the_host_backend():
    p = run_python(
        "import nccl.core as nc\n"
        "try:\n    nc.set_encryption('" + KEY + "')\n"
        "except NotImplementedError as e:\n    print(type(e).__name__, e)\n",
        clean_env(NCCL4PY_BACKEND="host"), timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("FunctionNotFoundError") and "ncclSetEncryption" in p.stdout


REAL = r"""
import json
import nccl.bindings as b, nccl.core as nc
out = {}
for name, args in (("short", ("short",)), ("psk", ("k" * 32,)), ("none", ())):
    try:
        nc.set_encryption(*args)
        out[name] = "ok"
    except b.NCCLError as e:
        out[name] = str(e)
print(json.dumps(out))
"""


@REAL_NCCL
def test_on_the_real_nccl():
    from nccl import _discovery

    wheels = _discovery._wheel_libraries()
    if not wheels:
        pytest.skip("no nvidia-nccl wheel installed (pip install nvidia-nccl-cu13)")
    p = run_python(REAL, clean_env(NCCL4PY_PLATFORM="cuda", NCCL_LIBRARY=str(wheels[0])),
                   timeout=120)
    if "FunctionNotFoundError" in p.stderr:
        pytest.skip("the wheel's NCCL predates ncclSetEncryption (2.32)")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["psk"] == "ok" and out["none"] == "ok"
    assert out["short"].startswith("InvalidArgument (4)") and "psk" in out["short"]
