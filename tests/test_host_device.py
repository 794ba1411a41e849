"""Communicator.device on the host backend (a CPUDevice standing in for
cuda.core's Device) and Communicator.init_all() without an argument, as
code written for one process driving all local GPUs uses them."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

import nccl.core as nc
from conftest import host_available
from nccl.core.cuda import CudaDeviceContext, get_cuda_device, get_cuda_stream, get_device_id

pytestmark = pytest.mark.skipif(not host_available(), reason="host backend not built")


def allreduce_all(comms, stream_of):
    """NCCL's one-thread, several-devices pattern: one call per device in a group."""
    data = [np.full(16, c.rank + 1, np.float32) for c in comms]
    with nc.group():
        for c, d in zip(comms, data):
            c.device.set_current()
            c.allreduce(d, d, nc.SUM, stream=stream_of(c))
    for c in comms:
        c.device.sync()
    n = len(comms)
    assert all((d == n * (n + 1) / 2).all() for d in data), data


@pytest.mark.nccl(nranks=1)
def test_init_all_devices_have_distinct_ids():
    comms = nc.Communicator.init_all(3)
    try:
        assert [c.device.device_id for c in comms] == [0, 1, 2]
        assert [c.cuda_dev for c in comms] == [0, 1, 2]
        assert [int(c.device) for c in comms] == [0, 1, 2]
        assert len({c.device for c in comms}) == 3 and comms[1].device == nc.CPUDevice(1)
    finally:
        for c in comms:
            c.destroy()


@pytest.mark.nccl(nranks=1)
def test_init_all_with_a_device_list_reports_those_ids():
    comms = nc.Communicator.init_all([4, 7])
    try:
        assert [c.device.device_id for c in comms] == [4, 7]
        assert [get_device_id(c.device) for c in comms] == [4, 7]
    finally:
        for c in comms:
            c.destroy()


@pytest.mark.nccl(nranks=2)
def test_init_reports_device_zero(comm):
    assert comm.device == nc.CPUDevice(0) and comm.device.device_id == 0


@pytest.mark.nccl(nranks=1)
@pytest.mark.parametrize("stream_of", [
    lambda c: None,
    lambda c: c.device.default_stream,
    lambda c: c.device.create_stream(),
    lambda c: get_cuda_stream(None, c.device),
], ids=["none", "default_stream", "create_stream", "get_cuda_stream"])
def test_what_gpu_code_calls_on_the_device_works(stream_of):
    comms = nc.Communicator.init_all(3)
    try:
        allreduce_all(comms, stream_of)
    finally:
        for c in comms:
            c.destroy()


@pytest.mark.nccl(nranks=1)
def test_device_members():
    (comm,) = nc.Communicator.init_all(1)
    try:
        dev = comm.device
        assert dev.set_current() is None and dev.sync() is None
        assert "host" in dev.name and "host backend" in repr(dev)
        s = dev.create_stream()
        assert s.handle == 0 and s.__cuda_stream__() == (0, 0) and s.device is dev
        assert s.sync() is None and s.close() is None
        buf = dev.allocate(64)
        assert isinstance(buf, nc.HostBuffer) and buf.memoryview().nbytes == 64
        buf.close()
        with CudaDeviceContext(dev):
            pass
        assert get_cuda_device(dev) is dev
        assert pickle.loads(pickle.dumps(dev)) == dev
        with pytest.raises(TypeError, match="no GPU streams"):
            dev.create_stream(object())
        with pytest.raises(TypeError, match="no CUDA contexts"):
            dev.set_current(object())
    finally:
        comm.destroy()


@pytest.mark.parametrize("name", ["compute_capability", "arch", "uuid", "pci_bus_id",
                                  "properties", "context", "create_event", "memory_resource"])
def test_gpu_only_members_say_so(name):
    dev = nc.CPUDevice(2)
    with pytest.raises(AttributeError, match=f"CPUDevice.{name} is not available on the host"):
        getattr(dev, name)
    assert not hasattr(dev, name)
    with pytest.raises(AttributeError, match="no attribute 'no_such_member'"):
        dev.no_such_member


@pytest.mark.nccl(nranks=1)
@pytest.mark.parametrize("value, count", [(None, 2), ("1", 1), ("3", 3)])
def test_init_all_without_argument_uses_the_host_device_count(monkeypatch, value, count):
    if value is None:
        monkeypatch.delenv("NCCL4PY_HOST_DEVICES", raising=False)
    else:
        monkeypatch.setenv("NCCL4PY_HOST_DEVICES", value)
    comms = nc.Communicator.init_all()
    try:
        assert [(c.rank, c.nranks, c.device.device_id) for c in comms] == \
            [(r, count, r) for r in range(count)]
        allreduce_all(comms, lambda c: None)
    finally:
        for c in comms:
            c.destroy()


@pytest.mark.nccl(nranks=1)
@pytest.mark.parametrize("value", ["0", "1025", "-1", "abc", "0x10", " 3", "3 ", "1e2", "٣",
                                   "99999999999999999999"])
def test_a_bad_host_device_count_is_refused(monkeypatch, value):
    monkeypatch.setenv("NCCL4PY_HOST_DEVICES", value)
    with pytest.raises(ValueError, match=r"NCCL4PY_HOST_DEVICES=.* is invalid: expected a "
                                         r"decimal integer from 1 to 1024"):
        nc.Communicator.init_all()
