"""Shared set-up of the basic examples (not an example itself).

Arrays live where the library wants them: NumPy arrays on nccl4py's host
backend, torch tensors (or CuPy arrays) on the rank's GPU with NCCL/RCCL.

Under mpirun/mpiexec/srun an uncaught exception on one rank aborts the whole
job (MPI_Abort), as ``python -m mpi4py prog.py`` does; otherwise the other
ranks would wait for the failed one for ever (in MPI_Bcast of the unique id,
in communicator creation, or in MPI_Finalize).
"""
from __future__ import annotations

import sys
from typing import Any, Callable

import numpy as np

import nccl.core as nccl
from nccl.run import environment
from nccl import _nccl


def _under_mpi() -> bool:
    if "mpi4py.MPI" in sys.modules:
        return True
    try:
        return environment(exchange_id=False).launcher in ("mpi", "slurm")
    except Exception:  # no launcher, or an incomplete one: not an MPI job
        return False


def abort_job(status: int = 1) -> None:
    """End this rank with *status*; under MPI, end every rank of the job."""
    sys.stdout.flush()
    sys.stderr.flush()
    if _under_mpi():
        try:
            from mpi4py import MPI
        except ImportError:  # pragma: no cover - the launcher needed mpi4py already
            pass
        else:
            MPI.COMM_WORLD.Abort(status)
    sys.exit(status)


def _abort_job_on_uncaught_exception() -> None:
    previous = sys.excepthook

    def hook(kind: type[BaseException], value: BaseException, tb: Any) -> None:
        previous(kind, value, tb)
        abort_job(1)

    sys.excepthook = hook


_abort_job_on_uncaught_exception()


class Arrays:
    """Creates arrays on the communicator's memory and copies them back."""

    def __init__(self, kind: str, device: int) -> None:
        self.kind, self.device = kind, device
        if kind == "torch":
            import torch

            torch.cuda.set_device(device)
            self.torch = torch
        elif kind == "cupy":
            import cupy

            cupy.cuda.Device(device).use()
            self.cupy = cupy

    def asarray(self, data: Any) -> Any:
        """A copy of the NumPy array *data* in the communicator's memory."""
        data = np.ascontiguousarray(data)
        if self.kind == "torch":
            return self.torch.from_numpy(data).to(f"cuda:{self.device}")
        if self.kind == "cupy":
            return self.cupy.asarray(data)
        return data.copy()

    def full(self, n: int, value: float, dtype: str = "float32") -> Any:
        return self.asarray(np.full(n, value, dtype=dtype))

    def zeros(self, n: int, dtype: str = "float32") -> Any:
        return self.asarray(np.zeros(n, dtype=dtype))

    def numpy(self, x: Any) -> Any:
        """A NumPy copy of *x*, after the GPU has finished writing it."""
        if self.kind == "torch":
            self.torch.cuda.synchronize()
            return x.cpu().numpy()
        if self.kind == "cupy":
            self.cupy.cuda.get_current_stream().synchronize()
            return self.cupy.asnumpy(x)
        return np.asarray(x)


def arrays_for_this_rank() -> Arrays:
    """Pick the array library and select this rank's GPU (before any communicator)."""
    local_rank = environment(exchange_id=False).local_rank
    if _nccl.library_family() == "host":
        return Arrays("numpy", 0)
    try:
        import torch

        if torch.cuda.is_available():
            return Arrays("torch", local_rank % torch.cuda.device_count())
    except ImportError:
        pass
    try:
        import cupy
    except ImportError:
        from nccl._discovery import no_gpu_arrays_message

        raise RuntimeError(no_gpu_arrays_message(_nccl.library_family())) from None
    return Arrays("cupy", local_rank % cupy.cuda.runtime.getDeviceCount())


def setup() -> tuple[nccl.Communicator, Arrays]:
    """This rank's arrays and communicator (python -m nccl.run, torchrun, mpirun, srun)."""
    nccl.get_version()  # loads the library, so the platform is known
    xp = arrays_for_this_rank()
    return nccl.Communicator.from_env(), xp


def report(name: str, body: Callable[[nccl.Communicator, Arrays], str]) -> None:
    """Run *body*, print one SUCCESS/FAILED line for this rank and exit with its status."""
    comm, xp = setup()
    rank, nranks = comm.rank, comm.nranks
    try:
        detail = body(comm, xp)
    except Exception as e:  # a failed check or an error: this rank failed
        comm.abort()
        print(f"{name}: rank {rank}/{nranks}: FAILED: {e}", flush=True)
        abort_job(1)
    comm.destroy()
    print(f"{name}: rank {rank}/{nranks}: {detail}: SUCCESS", flush=True)
    sys.exit(0)
