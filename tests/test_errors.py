"""One exception family: every error nccl4py raises on its own account is a
``nccl.core.Nccl4pyError``; upstream's names and bases are kept; the classes
have a public module path (tracebacks, pickle); docs/api.md's example runs."""
from __future__ import annotations

import pickle
import re
import subprocess
import sys

import numpy as np
import pytest

import nccl.bindings as b
import nccl.core as nc
from conftest import ROOT, clean_env, host_available, run_python

FAMILY = ["Nccl4pyError", "NCCLError", "NcclTimeoutError", "NcclInvalid", "NotSupportedError",
          "FunctionNotFoundError"]


def test_one_root_and_upstreams_bases():
    for name in FAMILY:
        cls = getattr(nc, name)
        assert name in nc.__all__
        assert issubclass(cls, nc.Nccl4pyError) and issubclass(cls, Exception)
        assert cls.__module__ == "nccl.core" and f"<class 'nccl.core.{name}'>" == repr(cls)
    # upstream 0.6.0: NCCLError(Exception) in nccl.bindings, NcclInvalid(Exception) in nccl.core
    assert b.NCCLError is nc.NCCLError and nc.typing.NcclInvalid is nc.NcclInvalid
    assert issubclass(nc.NcclTimeoutError, nc.NCCLError)
    assert not issubclass(nc.NcclInvalid, nc.NCCLError)  # usage errors are not library errors
    assert issubclass(nc.NotSupportedError, RuntimeError)
    assert issubclass(nc.FunctionNotFoundError, NotImplementedError)
    assert b.NotSupportedError is nc.NotSupportedError
    assert b.FunctionNotFoundError is nc.FunctionNotFoundError


def test_the_gpu_runtime_error_is_in_the_family_and_still_a_runtime_error():
    """The GPU runtime layer's error (nccl._runtime, the cuda.core shim) is a
    Nccl4pyError, keeps RuntimeError as a base for existing ``except`` clauses,
    is the very class the C core raises, and pickles with its fields."""
    from nccl import _nccl, _runtime

    cls = _runtime.GpuRuntimeError
    assert cls is _nccl.GpuRuntimeError
    assert issubclass(cls, nc.Nccl4pyError) and issubclass(cls, RuntimeError)
    assert repr(cls) == "<class 'nccl._runtime.GpuRuntimeError'>"  # its public path
    exc = cls("hipSetDevice failed: hipErrorInvalidDevice (101): invalid device ordinal")
    exc.status, exc.function = 101, "hipSetDevice"
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is cls and str(back) == str(exc)
    assert (back.status, back.function) == (101, "hipSetDevice")
    assert cls("no runtime").status is None
    text = (ROOT / "docs" / "api.md").read_text()
    tree = re.search(r"```text\n(.*?)```", text.split("### Errors", 1)[1], re.S).group(1)
    assert "GpuRuntimeError" in tree


def test_they_pickle_through_the_public_module():
    for exc in (nc.NCCLError(4), nc.NcclInvalid("bad"), nc.NotSupportedError("none"),
                nc.FunctionNotFoundError("ncclX"),
                nc.NcclTimeoutError(8, "late", operation="allreduce", seq=3, waited=1.5)):
        data = pickle.dumps(exc)
        assert b"nccl.core" in data and b"nccl._errors" not in data
        back = pickle.loads(data)
        assert type(back) is type(exc) and str(back) == str(exc)
    assert pickle.loads(pickle.dumps(nc.NcclTimeoutError(8, "x", "allreduce", 3, 1.5))).seq == 3


@pytest.mark.skipif(not host_available(), reason="host backend not built")
def test_every_kind_is_caught_by_the_root():
    comm = nc.Communicator.init_all(1)[0]
    try:
        with pytest.raises(nc.Nccl4pyError, match="Dtype mismatch"):
            comm.allreduce(np.ones(4, np.float32), np.empty(4, np.int32), nc.SUM)
        with pytest.raises(nc.Nccl4pyError) as info:  # the library's own refusal
            b.check_status(int(b.Result.InvalidArgument))
        assert type(info.value) is nc.NCCLError
    finally:
        comm.destroy()
    code = ("import nccl.core as nc\n"
            "try:\n    nc.get_unique_id()\n"
            "except nc.Nccl4pyError as e:\n    print(type(e).__name__, isinstance(e, RuntimeError))\n")
    p = run_python(code, clean_env(NCCL_LIBRARY="/nonexistent/libnccl.so.2"))
    assert p.returncode == 0 and p.stdout.split() == ["NotSupportedError", "True"], p.stderr


def test_tracebacks_print_the_public_name(tmp_path):
    prog = tmp_path / "bad.py"
    prog.write_text("import nccl.core as nc\nnc.NcclDataType('int16')\n")
    p = subprocess.run([sys.executable, str(prog)], capture_output=True, text=True, timeout=60,
                       env=clean_env())
    assert p.returncode == 1
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("nccl.core.NcclInvalid: "), p.stderr
    assert "nccl._errors" not in p.stderr


@pytest.mark.skipif(not host_available(), reason="host backend not built")
def test_the_example_of_api_md_runs():
    text = (ROOT / "docs" / "api.md").read_text()
    section = text.split("### Errors", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, re.S)
    tree = re.search(r"```text\n(.*?)```", section, re.S).group(1)
    for name in FAMILY:  # the hierarchy shown is the one defined
        assert name in tree
    p = run_python(code, clean_env(NCCL4PY_BACKEND="host"))
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("invalid: Dtype mismatch: sendbuf has dtype "), p.stdout
