"""A communicator from the launcher's environment, whichever launcher it is:

    python -m nccl.run -n 4 examples/01_basic/06_from_env_torchrun.py
    torchrun --nproc-per-node 8 examples/01_basic/06_from_env_torchrun.py
    mpirun -np 8 python examples/01_basic/06_from_env_torchrun.py
    srun -n 8 python examples/01_basic/06_from_env_torchrun.py

Communicator.from_env() reads the rank and size (environment())
and shares one unique id: the launcher's under nccl.run, torch's TCPStore
under torchrun, mpi4py under mpirun/srun.
"""
from __future__ import annotations

import numpy as np

import nccl.core as nccl
from nccl.run import environment
from _common import Arrays, report


def body(comm: nccl.Communicator, xp: Arrays) -> str:
    launcher = environment(exchange_id=False).launcher
    n = comm.nranks
    ranks = xp.zeros(n, "int32")
    comm.allgather(xp.full(1, comm.rank, "int32"), ranks)
    got = xp.numpy(ranks)
    assert np.array_equal(got, np.arange(n)), got
    return f"launched by {launcher}; all-gathered ranks {got.tolist()}"


report("06_from_env_torchrun", body)
