"""GPU checks with the real NCCL (or RCCL) on one GPU (marked ``gpu``).

Run by tests/gpu/run_checks.sh on a machine with an NVIDIA GPU, torch, CuPy,
cuda.core and nvidia-nccl-cu13, or an AMD GPU with ROCm torch and RCCL (torch
exposes both through ``torch.cuda``); skipped everywhere else with the reason.
The test process must run on the real library:
``NCCL4PY_TEST_LIBRARY=/path/to/libnccl.so.2 pytest -m gpu tests/gpu``.
"""
from __future__ import annotations

import time

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the GPU checks use torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no visible GPU"),
]

import nccl.core as nc  # noqa: E402
from nccl import _nccl  # noqa: E402


@pytest.fixture(scope="module")
def comm():
    if _nccl.library_family() not in ("nccl", "rccl"):
        pytest.skip("the test process is not on the real NCCL/RCCL: set NCCL4PY_TEST_LIBRARY "
                    "(tests/gpu/run_checks.sh does)")
    torch.cuda.set_device(0)
    c = nc.Communicator.init(1, 0, nc.get_unique_id())
    yield c
    c.destroy()


def cuda(x, dtype=torch.float32):
    return torch.as_tensor(x, dtype=dtype, device="cuda")


STREAMS = ["default", "created", "current"]


def stream_arg(kind):
    if kind == "default":
        return None
    if kind == "created":
        return torch.cuda.Stream()
    return torch.cuda.current_stream()


def sync(stream):
    if stream is None:
        torch.cuda.synchronize()
    else:
        stream.synchronize()


@pytest.mark.parametrize("kind", STREAMS)
def test_every_collective_on_one_rank(comm, kind):
    s = stream_arg(kind)
    x = cuda(np.arange(8))
    y = torch.zeros_like(x)
    comm.allreduce(x, y, nc.SUM, stream=s)
    sync(s)
    assert torch.equal(y, x)
    for call in (lambda out: comm.broadcast(x, out, 0, stream=s),
                 lambda out: comm.reduce(x, out, nc.MAX, root=0, stream=s),
                 lambda out: comm.allgather(x, out, stream=s),
                 lambda out: comm.reduce_scatter(x, out, nc.SUM, stream=s),
                 lambda out: comm.alltoall(x, out, stream=s),
                 lambda out: comm.gather(x, out, 0, stream=s),
                 lambda out: comm.scatter(x, out, 0, stream=s)):
        out = torch.zeros_like(x)
        call(out)
        sync(s)
        assert torch.equal(out, x)
    out = torch.zeros_like(x)
    with nc.group():
        comm.send(x, 0, stream=s)
        comm.recv(out, 0, stream=s)
    sync(s)
    assert torch.equal(out, x)


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float16"])
def test_small_float_types(comm, dtype):
    tdt = getattr(torch, dtype)
    x = cuda(np.arange(16) / 4, torch.float32).to(tdt)
    y = torch.zeros_like(x)
    comm.allreduce(x, y, nc.SUM)
    torch.cuda.synchronize()
    assert torch.equal(y.float(), x.float())


def test_cupy_buffers(comm):
    cupy = pytest.importorskip("cupy")
    x = cupy.arange(10, dtype=cupy.float64)
    y = cupy.zeros_like(x)
    s = cupy.cuda.Stream()
    comm.allreduce(x, y, nc.SUM, stream=s)
    s.synchronize()
    assert bool((y == x).all())


def test_cuda_core_buffers(comm):
    import nccl  # noqa: F401  (on ROCm this registers the HIP shim as cuda.core)

    core = pytest.importorskip("cuda.core")
    dev = core.Device(0)
    dev.set_current()
    st = dev.create_stream()
    a = dev.allocate(64, stream=st)
    b = dev.allocate(64, stream=st)
    comm.allreduce(a, b, nc.SUM, stream=st)  # int8 views of the bytes
    st.sync()
    a.close()
    b.close()


def test_mem_alloc_register_buffer_and_window(comm):
    buf = nc.mem_alloc(1 << 20)
    h = comm.register_buffer(buf)
    assert h.is_valid and h.size == 1 << 20
    w = comm.register_window(buf)
    assert w is None or w.is_valid
    h.close()
    if w is not None:
        w.close()
    nc.mem_free(buf)


def test_pre_mul_sum_with_a_device_scalar(comm):
    scalar = cuda([3.0])
    op = comm.create_pre_mul_sum(scalar)
    x = cuda(np.arange(8))
    y = torch.zeros_like(x)
    comm.allreduce(x, y, op)
    torch.cuda.synchronize()
    assert torch.equal(y, x * 3)
    op.close()


def test_cuda_graph_capture_and_replay(comm):
    x = cuda(np.ones(32))
    y = torch.zeros_like(x)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm up outside the capture
        comm.allreduce(x, y, nc.SUM, stream=torch.cuda.current_stream())
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        comm.allreduce(x, y, nc.SUM, stream=torch.cuda.current_stream())
    x.fill_(7)
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(y, torch.full_like(y, 7))


def test_non_blocking_init_and_async_error_polling():
    if _nccl.library_family() not in ("nccl", "rccl"):
        pytest.skip("not on the real NCCL/RCCL")
    cfg = nc.NCCLConfig(blocking=False)
    c = nc.Communicator.init(1, 0, nc.get_unique_id(), cfg)
    deadline = time.monotonic() + 60
    from nccl.bindings import Result

    state = c.get_async_error()
    while state == Result.InProgress and time.monotonic() < deadline:
        time.sleep(0.01)
        state = c.get_async_error()
    assert state == Result.Success
    x = cuda(np.ones(4))
    c.allreduce(x, x, nc.SUM)
    torch.cuda.synchronize()
    c.destroy()


def test_split_of_a_one_rank_communicator(comm):
    sub = comm.split(0, 0)
    assert sub.nranks == 1 and sub.rank == 0
    sub.destroy()
    assert not comm.split(None).is_valid


def test_error_paths(comm):
    with pytest.raises(nc.NcclInvalid, match="host \\(CPU\\) buffer"):
        comm.allreduce(np.zeros(4, np.float32), cuda(np.zeros(4)), nc.SUM)
    if torch.cuda.device_count() > 1:
        other = torch.zeros(4, device="cuda:1")
        with pytest.raises(nc.NcclInvalid, match="is on device 1"):
            comm.allreduce(other, other, nc.SUM)
    x = cuda(np.ones(4))
    comm.allreduce(x, x, nc.SUM)  # still usable
    torch.cuda.synchronize()
