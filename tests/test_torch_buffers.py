"""What a torch tensor means beyond its memory (src/buffer.c check_torch):
its lazy negation and conjugation bits and its autograd state.

A tensor with the negative bit (``torch._neg_view(x)``, ``x.conj().imag``)
or the conjugate bit (``x.conj()``) holds its values un-negated or
un-conjugated in memory; NCCL would read and write the raw memory, so such a
tensor is refused on every path: the DLPack C exchange API (torch's default
here), ``__dlpack__`` (a type without the exchange API), explicit specs, and
``nccl.core.interop.torch.resolve_tensor``.  A receive buffer that autograd
tracks is refused (NCCL would write it behind autograd's back); a send
buffer that requires grad is read.
"""
from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest

import nccl.core as nc
from nccl._enums import DataType as DT
from nccl._errors import NcclInvalid
from nccl._nccl import resolve_buffer
from conftest import host_available
from stub_comm import COMM

torch = pytest.importorskip("torch")

NEG = "is a torch tensor with the negative bit set"
CONJ = "is a torch tensor with the conjugate bit set"
GRAD = "requires grad: NCCL would write into it behind autograd's back"


class NoExchange(torch.Tensor):
    """A tensor type that takes the __dlpack__ path (no C exchange API)."""

    __dlpack_c_exchange_api__ = None
    __c_dlpack_exchange_api__ = None


def rb(obj, name="buf", writable=False):
    return resolve_buffer(obj, name, writable)


def neg_tensors():
    base = torch.arange(1.0, 5.0)
    c = torch.tensor([1 + 2j, 3 + 4j], dtype=torch.complex64)
    yield "_neg_view", torch._neg_view(base)
    yield "conj().imag", c.conj().imag
    yield "detached", c.conj().imag.detach()  # not a view, still negated
    yield "sliced", torch._neg_view(base)[1:]
    yield "no exchange API", torch._neg_view(base).as_subclass(NoExchange)
    yield "parameter", torch.nn.Parameter(torch._neg_view(base), requires_grad=False)


@pytest.mark.parametrize("label,t", list(neg_tensors()), ids=lambda x: x if isinstance(x, str) else "")
def test_negative_bit_refused_on_every_path(label, t):
    assert t.is_neg()
    for name, writable in (("sendbuf", False), ("recvbuf", True)):
        with pytest.raises(NcclInvalid, match=f"^{name} {NEG}"):
            rb(t, name, writable)
        with pytest.raises(NcclInvalid, match=f"^{name} {NEG}"):
            rb((t, "uint8"), name, writable)
        with pytest.raises(NcclInvalid, match=f"^{name} {NEG}"):
            rb((t, 1, DT.Float32), name, writable)
    assert rb(t.resolve_neg())[1] == t.numel()


def test_conjugate_bit_refused_in_specs():
    c = torch.tensor([1 + 2j, 3 + 4j], dtype=torch.complex64)
    for t in (c.conj(), c.conj()[1:], c.conj().as_subclass(NoExchange)):
        assert t.is_conj()
        for spec in ((t, "float32"), (t, DT.Float32), (t, 2, "float32"), (t, DT.Uint8)):
            with pytest.raises(NcclInvalid, match=f"^buf {CONJ}"):
                rb(spec)
    # the resolved conjugate (and the complex tensor itself) reinterpret fine
    assert rb((c.conj().resolve_conj(), "float32"))[1:3] == (4, DT.Float32)
    assert rb((c, "float32"))[1:3] == (4, DT.Float32)
    with pytest.raises(NcclInvalid, match="Unsupported data type"):
        rb(c.conj())  # complex: no NCCL type in any case


def test_receive_buffers_autograd_tracks_are_refused():
    leaf = torch.zeros(4, requires_grad=True)
    nonleaf = leaf * 2
    param = torch.nn.Parameter(torch.zeros(4))
    for t in (leaf, nonleaf, param, leaf[1:], leaf.as_subclass(NoExchange)):
        assert t.requires_grad
        with pytest.raises(NcclInvalid, match=f"^recvbuf {GRAD}"):
            rb(t, "recvbuf", True)
        with pytest.raises(NcclInvalid, match=f"^recvbuf {GRAD}"):
            rb((t, "uint8"), "recvbuf", True)
        with torch.no_grad():  # grad mode does not change what the tensor is
            with pytest.raises(NcclInvalid, match=f"^recvbuf {GRAD}"):
                rb(t, "recvbuf", True)
    # writing the memory on purpose: the detached alias
    assert rb(leaf.detach(), "recvbuf", True)[0] == leaf.data_ptr()
    assert rb(torch.nn.Parameter(torch.zeros(4), requires_grad=False), "r", True)[1] == 4


def test_send_buffers_that_require_grad_are_read():
    leaf = torch.arange(4.0, requires_grad=True)
    nonleaf = leaf * 2
    for t in (leaf, nonleaf, torch.nn.Parameter(torch.ones(4))):
        assert rb(t, "sendbuf") == (t.data_ptr(), 4, DT.Float32, 1, 0, False)
    # also through __dlpack__, which torch refuses for such a tensor: its
    # detached alias (the same memory) is exported
    sub = leaf.as_subclass(NoExchange)
    assert sub.requires_grad
    assert rb(sub, "sendbuf")[:2] == (leaf.data_ptr(), 4)
    assert leaf.grad is None and leaf.requires_grad and leaf._version == 0


def test_the_communicator_refuses_before_the_library_is_called(stub):
    comm = nc.Communicator(COMM)
    x = torch.arange(1.0, 5.0)
    y = torch.zeros(4)
    comm.allreduce(x, y, nc.SUM)  # the communicator's size and rank are known now
    calls = stub.nccl4pyStubCallCount()
    with pytest.raises(NcclInvalid, match=f"^sendbuf {NEG}"):
        comm.allreduce(torch._neg_view(x), y, nc.SUM)
    with pytest.raises(NcclInvalid, match=f"^recvbuf {NEG}"):
        comm.allreduce(x, torch._neg_view(y), nc.SUM)
    n = torch._neg_view(y)
    with pytest.raises(NcclInvalid, match=f"^sendbuf {NEG}"):
        comm.allreduce(n, n, nc.SUM)  # in place: asked once, refused
    with pytest.raises(NcclInvalid, match=f"^recvbuf {NEG}"):
        comm.broadcast(n, n, 0)  # the receive buffer is resolved first here
    g = torch.zeros(4, requires_grad=True)
    with pytest.raises(NcclInvalid, match=f"^recvbuf {GRAD}"):
        comm.allreduce(x, g, nc.SUM)
    with pytest.raises(NcclInvalid, match=f"^recvbuf {GRAD}"):
        comm.allreduce(g, g, nc.SUM)  # in place: written too
    with pytest.raises(NcclInvalid, match=f"^recvbuf {GRAD}"):
        comm.broadcast(x, g, 0)
    assert stub.nccl4pyStubCallCount() == calls
    comm.allreduce(g, y, nc.SUM)  # read only
    assert stub.nccl4pyStubCallCount() == calls + 1
    assert g._version == 0


def test_refusals_leak_nothing():
    t = torch._neg_view(torch.ones(4))
    g = torch.zeros(4, requires_grad=True)
    before = (sys.getrefcount(t), sys.getrefcount(g))
    for _ in range(2000):
        for obj, writable in ((t, False), (g, True), ((t, "uint8"), False)):
            with pytest.raises(NcclInvalid):
                rb(obj, "b", writable)
    del obj
    assert (sys.getrefcount(t), sys.getrefcount(g)) == before


def test_interop_resolve_tensor():
    from nccl.core.interop.torch import resolve_tensor

    x = torch.arange(4.0)
    assert resolve_tensor(x) == (x.data_ptr(), 4, nc.NcclDataType.FLOAT32, None)
    for bad, match in ((torch._neg_view(x), "negative bit"),
                       (torch.ones(2, dtype=torch.complex64).conj().imag, "negative bit"),
                       (torch.zeros(4, 4)[:, ::2], "not contiguous"),
                       (torch.zeros(4, 4).t(), "not contiguous")):
        with pytest.raises(NcclInvalid, match=match):
            resolve_tensor(bad)
    g = torch.zeros(4, requires_grad=True)
    assert resolve_tensor(g)[1] == 4  # read
    with pytest.raises(NcclInvalid, match="requires grad"):
        resolve_tensor(g, writable=True)
    assert resolve_tensor(torch.zeros(1, 4).t())[1] == 4  # size-1 dims: any stride


def test_interop_resolve_tensor_is_the_c_resolver():
    """nccl.core.interop.torch resolves through nccl.core's own (C) resolver:
    the same answer, and the same refusals (a meta tensor has no memory: it
    is no address 0)."""
    from nccl import _nccl
    from nccl.core.interop.torch import resolve_tensor

    for t in (torch.arange(6.0).reshape(2, 3), torch.zeros(3, dtype=torch.bool),
              torch.tensor(2, dtype=torch.int64), torch.zeros(0, 4).t()):
        ptr, count, dtype = _nccl.resolve_buffer(t, "the tensor")[:3]
        assert resolve_tensor(t) == (ptr, count, nc.NcclDataType(dtype), None)
    meta = torch.empty(4, device="meta")
    with pytest.raises(Exception) as c_error:
        _nccl.resolve_buffer(meta, "the tensor")
    with pytest.raises(type(c_error.value), match="meta"):
        resolve_tensor(meta)


@pytest.mark.xfail(strict=True, reason="torch keeps no record that a tensor's memory is "
                   "read-only (torch.frombuffer of bytes, torch.from_numpy of a read-only "
                   "array: torch warns once and writes such memory itself)")
def test_torch_tensors_of_immutable_memory():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        t = torch.frombuffer(b"abcd", dtype=torch.uint8)
    with pytest.raises(NcclInvalid, match="read-only"):
        rb(t, "recvbuf", True)


def test_immutable_memory_refused_before_torch_wraps_it():
    """What *is* recorded is refused: the read-only NumPy array and bytes
    themselves, and torch's own immutable storages (which raise on access)."""
    ro = np.zeros(4, np.float32)
    ro.setflags(write=False)
    with pytest.raises(NcclInvalid, match="^recvbuf is read-only"):
        rb(ro, "recvbuf", True)
    with pytest.raises(NcclInvalid, match="^recvbuf is read-only"):
        rb(b"abcd", "recvbuf", True)
    t = torch.zeros(4)
    torch._C._set_throw_on_mutable_data_ptr(t)
    with pytest.raises(RuntimeError, match="Cannot access data pointer"):
        rb(t, "recvbuf", True)


@pytest.mark.skipif(not host_available(), reason="host backend not built")
@pytest.mark.nccl(nranks=[2])
def test_send_with_grad_on_the_host_backend(comm, check):
    import torch as th

    rank = comm.rank
    w = th.full((4,), float(rank + 1), requires_grad=True)
    out = th.zeros(4)
    comm.allreduce(w, out, nc.SUM)
    check.check("allreduce of a tensor that requires grad", out.numpy(),
                np.full(4, 3.0, np.float32), nc.NcclDataType.FLOAT32)
    neg = th._neg_view(th.full((4,), float(rank + 1)))
    check.expect_invalid("a negated view", lambda: comm.allreduce(neg, out, nc.SUM), NEG)
    comm.allreduce(neg.resolve_neg(), out, nc.SUM)
    check.check("allreduce of the resolved negation", out.numpy(),
                np.full(4, -3.0, np.float32), nc.NcclDataType.FLOAT32)
    check.assert_ok()
