"""Raw byte buffers for the benchmark: NumPy on the host backend, torch or
CuPy on GPUs.  Every collective gets explicit ``(buffer, count, dtype)``
specs over a slice of a uint8 buffer, so all twelve NCCL types work with any
array library (even one without bfloat16 or fp8)."""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["ArrayBackend", "NumpyBackend", "TorchBackend", "CupyBackend", "select"]


class ArrayBackend:
    name = "numpy"
    stream: Any = None

    def alloc(self, nbytes: int) -> Any:
        raise NotImplementedError

    def write(self, raw: Any, offset: int, data: Any) -> None:
        """Copy the host array ``data`` (any dtype) to ``raw[offset:]`` as bytes."""
        raise NotImplementedError

    def read(self, raw: Any, offset: int, nbytes: int) -> Any:
        """A host (NumPy uint8) copy of ``raw[offset:offset+nbytes]``."""
        raise NotImplementedError

    def fill(self, raw: Any, offset: int, nbytes: int, value: int) -> None:
        self.write(raw, offset, np.full(nbytes, value, dtype=np.uint8))

    def sync(self) -> None:
        """Wait until every call issued so far has completed."""

    def describe(self, local_rank: int) -> tuple[int, str, str]:
        """(device number, bus id, device name) of this rank."""
        return 0, "host", "host memory (nccl4py host backend)"


class NumpyBackend(ArrayBackend):
    name = "numpy"

    def alloc(self, nbytes: int) -> Any:
        return np.zeros(max(nbytes, 1), dtype=np.uint8)

    def write(self, raw: Any, offset: int, data: Any) -> None:
        b = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        raw[offset:offset + b.size] = b

    def read(self, raw: Any, offset: int, nbytes: int) -> Any:
        return np.array(raw[offset:offset + nbytes], dtype=np.uint8, copy=True)


class TorchBackend(ArrayBackend):
    name = "torch"

    def __init__(self, local_rank: int) -> None:
        import torch

        self.torch = torch
        self.device = local_rank % max(torch.cuda.device_count(), 1)
        torch.cuda.set_device(self.device)
        self.stream = torch.cuda.current_stream()

    def alloc(self, nbytes: int) -> Any:
        return self.torch.zeros(max(nbytes, 1), dtype=self.torch.uint8, device="cuda")

    def write(self, raw: Any, offset: int, data: Any) -> None:
        b = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        raw[offset:offset + b.size].copy_(self.torch.from_numpy(b.copy()))

    def read(self, raw: Any, offset: int, nbytes: int) -> Any:
        self.sync()
        return raw[offset:offset + nbytes].cpu().numpy()

    def sync(self) -> None:
        self.torch.cuda.synchronize()

    def describe(self, local_rank: int) -> tuple[int, str, str]:
        props = self.torch.cuda.get_device_properties(self.device)
        bus = "?"
        if hasattr(props, "pci_bus_id"):
            bus = (f"{getattr(props, 'pci_domain_id', 0):04x}:{props.pci_bus_id:02x}:"
                   f"{getattr(props, 'pci_device_id', 0):02x}")
        return self.device, bus, str(props.name)


class CupyBackend(ArrayBackend):
    name = "cupy"

    def __init__(self, local_rank: int) -> None:
        import cupy

        self.cp = cupy
        self.device = local_rank % max(cupy.cuda.runtime.getDeviceCount(), 1)
        cupy.cuda.Device(self.device).use()
        self.stream = cupy.cuda.get_current_stream()

    def alloc(self, nbytes: int) -> Any:
        return self.cp.zeros(max(nbytes, 1), dtype=self.cp.uint8)

    def write(self, raw: Any, offset: int, data: Any) -> None:
        b = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        raw[offset:offset + b.size].set(b)

    def read(self, raw: Any, offset: int, nbytes: int) -> Any:
        self.sync()
        return self.cp.asnumpy(raw[offset:offset + nbytes])

    def sync(self) -> None:
        self.cp.cuda.get_current_stream().synchronize()

    def describe(self, local_rank: int) -> tuple[int, str, str]:
        props = self.cp.cuda.runtime.getDeviceProperties(self.device)
        name = props.get("name", b"?")
        bus = f"{props.get('pciDomainID', 0):04x}:{props.get('pciBusID', 0):02x}:" \
              f"{props.get('pciDeviceID', 0):02x}"
        return self.device, bus, name.decode() if isinstance(name, bytes) else str(name)


def select(family: str, local_rank: int, prefer: str = "auto") -> ArrayBackend:
    """NumPy on the host backend; on GPUs torch when it sees a GPU, else CuPy."""
    if family == "host" and prefer in ("auto", "numpy"):
        return NumpyBackend()
    if prefer in ("auto", "torch"):
        try:
            import torch

            if torch.cuda.is_available():
                return TorchBackend(local_rank)
        except ImportError:
            pass
        if prefer == "torch":
            raise RuntimeError("--array torch: torch with a visible GPU is needed")
    if prefer in ("auto", "cupy"):
        try:
            return CupyBackend(local_rank)
        except ImportError:
            if prefer == "cupy":
                raise RuntimeError("--array cupy: CuPy is not installed") from None
    if prefer == "numpy" or family == "host":
        return NumpyBackend()
    from nccl._discovery import no_gpu_arrays_message

    raise RuntimeError(no_gpu_arrays_message(family))
