"""nccl.core's C hot path against the recording stub: what reaches the C
ABI, and no reference or memory leaks over many calls."""
from __future__ import annotations

import sys

import numpy as np
import pytest

import nccl.core as nc
from conftest import memory_growth
from stub_comm import COMM


def record(stub) -> dict:
    parts = stub.nccl4pyStubLastCall().decode().split(" ")
    return {"fn": parts[0], **dict(p.split("=", 1) for p in parts[1:])}


class CudaStream:
    def __cuda_stream__(self):
        return (0, 0xABC0)


def test_allreduce_reaches_the_abi(stub):
    comm = nc.Communicator(COMM)
    x = np.arange(10, dtype=np.float32)
    y = np.zeros(10, np.float32)
    comm.allreduce(x, y, nc.MAX, stream=CudaStream())
    r = record(stub)
    assert r == {"fn": "ncclAllReduce", "sendbuff": f"cptr:{x.ctypes.data:#x}",
                 "recvbuff": f"ptr:{y.ctypes.data:#x}", "count": "size:10", "datatype": "dtype:7",
                 "op": "redop:2", "comm": f"comm:{COMM:#x}", "stream": f"stream:{0xABC0:#x}"}
    comm.allreduce(x, x, nc.SUM, 0x55)  # 0.2: stream positional
    r = record(stub)
    assert r["sendbuff"][5:] == r["recvbuff"][4:] and r["stream"] == "stream:0x55"



def test_the_config_path_imports_nothing(stub, monkeypatch):
    """config= reaches the materializer nccl.core.coll_config registered at
    import: C imports no nccl.* module on a call path (PyImport_ImportModule
    would go through builtins.__import__)."""
    import builtins

    comm = nc.Communicator(COMM)
    x = np.arange(4, dtype=np.float32)
    cfg = nc.NCCLCollConfig(vendor_options=[nc.VendorOption(1, 2, int_value=3)])  # made per call
    comm.allreduce(x, x, nc.MAX)  # the library loaded (its discovery is imported once)
    imported = []
    real = builtins.__import__

    def recording(name, *args, **kwargs):
        imported.append(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", recording)
    comm.allreduce(x, x, nc.MAX, config=cfg)
    comm.allreduce(x, x, nc.MAX, config=nc.NCCLCollConfig(min_ctas=2))
    monkeypatch.undo()
    assert record(stub)["fn"] == "ncclAllReduceConfig"
    assert [n for n in imported if n.startswith("nccl")] == []
    with pytest.raises(TypeError, match="config must be an NCCLCollConfig or None, not str"):
        comm.allreduce(x, x, nc.MAX, config="no")

def test_config_none_is_the_plain_call_in_every_spelling(stub):
    comm = nc.Communicator(COMM)
    x = np.arange(10, dtype=np.float32)
    y = np.zeros(10, np.float32)
    comm.allreduce(x, y, nc.MAX)
    plain = record(stub)
    built = "".join(["con", "fig"])  # not the interned name of a call site
    for call in (lambda: comm.allreduce(x, y, nc.MAX, config=None),
                 lambda: comm.allreduce(x, y, nc.MAX, **{built: None}),
                 lambda: comm.allreduce(x, y, nc.MAX, config=None, stream=None),
                 lambda: comm.allreduce(x, y, op=nc.MAX, config=None)):
        stub.nccl4pyStubReset()
        call()
        assert record(stub) == plain
    comm.allreduce(x, y, nc.MAX, config=nc.NCCLCollConfig())
    assert record(stub)["fn"] == "ncclAllReduceConfig"
    with pytest.raises(TypeError, match="multiple values"):
        comm.allreduce(x, y, nc.MAX, op=nc.SUM, config=None)
    with pytest.raises(TypeError, match="config"):
        comm.send(x, 1, config=None)  # send has no config=


def test_dtypes_and_specs_reach_the_abi(stub):
    import ml_dtypes

    comm = nc.Communicator(COMM)
    for arr, code in ((np.zeros(3, np.bool_), 1), (np.zeros(3, np.int64), 4),
                      (np.zeros(3, ml_dtypes.bfloat16), 9), (np.zeros(3, ml_dtypes.float8_e5m2), 11)):
        comm.allreduce(arr, arr, nc.SUM)
        assert record(stub)["datatype"] == f"dtype:{code}"
    raw = np.zeros(64, np.uint8)
    comm.allreduce((raw, 5, nc.FLOAT64), (raw, 5, "float64"), nc.SUM)
    r = record(stub)
    assert r["count"] == "size:5" and r["datatype"] == "dtype:8"


def test_custom_op_and_rooted_calls(stub):
    comm = nc.Communicator(COMM)
    op = comm.create_pre_mul_sum(2.0)
    x = np.zeros(4, np.float64)
    comm.reduce(x, x, op, root=3)
    r = record(stub)
    assert r["fn"] == "ncclReduce" and r["root"] == "int:3" and r["op"] == f"redop:{op.op}"
    comm.reduce(x, None, nc.SUM, root=0)  # not the root: recvbuf unused
    assert record(stub)["recvbuff"] == "ptr:0x0"
    comm.close_all_resources()
    assert record(stub)["fn"] == "ncclRedOpDestroy"


def test_no_leaks_over_many_calls(stub):
    comm = nc.Communicator(COMM)
    x = np.arange(10, dtype=np.float32)
    y = np.zeros(10, np.float32)
    refs = (sys.getrefcount(x), sys.getrefcount(y), sys.getrefcount(comm))
    for _ in range(100_000):
        comm.allreduce(x, y, nc.SUM)
    assert (sys.getrefcount(x), sys.getrefcount(y), sys.getrefcount(comm)) == refs
    assert memory_growth(lambda: comm.allreduce(x, y, nc.SUM)) < 16 * 1024

    def error_path():
        try:
            comm.allreduce(x, np.zeros(1, np.float32), nc.SUM)
        except nc.NcclInvalid:
            pass
    assert memory_growth(error_path) < 16 * 1024
    assert (sys.getrefcount(x), sys.getrefcount(y)) == refs[:2]


def test_library_errors_surface_as_ncclerror(stub):
    from nccl import bindings as b

    comm = nc.Communicator(COMM)
    x = np.zeros(4, np.float32)
    stub.nccl4pyStubSetResult(6)
    with pytest.raises(b.NCCLError) as ei:
        comm.allreduce(x, x, nc.SUM)
    assert ei.value.status == 6
