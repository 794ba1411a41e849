"""A DLPack tensor nccl4py refuses is still deleted exactly once, and the
caller sees the refusal: also when the producer's deleter is Python code
(a ctypes callback), which must never run with an exception pending
(src/buffer.c runs every deleter with the pending exception set aside).
Producers: tests/producers.c (C deleters that count their calls) and
tests/dlpack_producers.py's PyDeleterProducer (Python-level deleters)."""
from __future__ import annotations

import numpy as np
import pytest

import nccl.core as nc
from nccl._enums import DataType as DT
from nccl._errors import NcclInvalid
from nccl._nccl import resolve_buffer
from dlpack_producers import CPU, CUDA, Deleters, Producer, PyDeleterProducer, py_exchange_class
from stub_comm import COMM

REFUSALS = [
    (dict(flags=1), True, "^recvbuf is read-only"),
    (dict(code=5, bits=64), False, "^recvbuf: Unsupported data type|Unsupported data type for"),
    (dict(shape=(2, 2), strides=(1, 2)), False, "is not contiguous in row-major"),
    (dict(major=2), False, "DLPack version 2.1 is not supported"),
]


def resolve_refused(obj, writable, match, spec=None):
    with pytest.raises(NcclInvalid, match=match):
        resolve_buffer(obj if spec is None else (obj, *spec), "recvbuf", writable)


@pytest.mark.parametrize("kw,writable,match", REFUSALS)
def test_python_deleter_runs_once_on_refusal(kw, writable, match):
    p = PyDeleterProducer(**kw)
    resolve_refused(p, writable, match)
    assert p.calls == 1
    assert p.pending == [False]


# legacy capsules carry no version and no read-only flag
@pytest.mark.parametrize("kw,writable,match",
                         [r for r in REFUSALS if "major" not in r[0] and "flags" not in r[0]])
def test_python_deleter_legacy_capsule(kw, writable, match):
    p = PyDeleterProducer(versioned=False, **kw)
    resolve_refused(p, writable, match)
    assert (p.calls, p.pending) == (1, [False])


def test_python_deleter_refused_by_an_explicit_spec():
    p = PyDeleterProducer(shape=(4,))
    resolve_refused(p, False, "count 5 exceeds", spec=(5,))
    assert (p.calls, p.pending) == (1, [False])
    p = PyDeleterProducer(shape=(3,))
    resolve_refused(p, False, "not a whole number of float64", spec=("float64",))
    assert (p.calls, p.pending) == (1, [False])


def test_python_deleter_after_success_and_through_the_exchange_api():
    p = PyDeleterProducer()
    assert resolve_buffer(p, "x", True)[1:3] == (4, DT.Float32)
    assert (p.calls, p.pending) == (1, [False])
    cls = py_exchange_class()
    ok = cls()
    assert resolve_buffer(ok, "x", True)[1:3] == (4, DT.Float32)
    assert (ok.producer.calls, ok.producer.pending) == (1, [False])
    for kw, writable, match in REFUSALS:
        o = cls(**kw)
        resolve_refused(o, writable, match)
        assert (o.producer.calls, o.producer.pending) == (1, [False]), kw


def test_refusal_at_the_communicator_level(stub):
    """A buffer on the wrong device is refused after it was resolved: its
    deleter runs at the release, with the NcclInvalid pending."""
    comm = nc.Communicator(COMM)
    y = np.zeros(4, np.float32)
    gpu = PyDeleterProducer(device=(CUDA, 0))
    with pytest.raises(NcclInvalid, match="sendbuf is in GPU memory"):
        comm.allreduce(gpu, y, nc.SUM)
    assert (gpu.calls, gpu.pending) == (1, [False])
    ok = PyDeleterProducer()
    gpu = PyDeleterProducer(device=(CUDA, 0))
    with pytest.raises(NcclInvalid, match="recvbuf is in GPU memory"):
        comm.allreduce(ok, gpu, nc.SUM)
    assert (ok.calls, ok.pending, gpu.calls, gpu.pending) == (1, [False], 1, [False])
    a = PyDeleterProducer(shape=(4,))
    b = PyDeleterProducer(shape=(2,))
    with pytest.raises(NcclInvalid, match="recvbuf must have at least 4"):
        comm.allreduce(a, b, nc.SUM)
    assert (a.calls, a.pending, b.calls, b.pending) == (1, [False], 1, [False])


def test_c_deleters_still_run_once(lib):
    d = Deleters(lib)
    for kw, writable, match in REFUSALS:
        resolve_refused(Producer(lib, device=(CPU, 0), **kw), writable, match)
    assert d.calls == len(REFUSALS)
