"""Written against nccl4py 0.2 conventions (stream positional, NCCL_SPLIT_NOCOLOR,
NcclDataType from a NumPy dtype, group_simulate_end, bindings returning handles).

    NCCL4PY_BACKEND=host mpiexec -n 4 python -m mpi4py examples/mpi/seed_02_conventions.py

(`python -m mpi4py` aborts the whole job when a rank raises, so the other
ranks never wait for it.)
"""
import numpy as np
from mpi4py import MPI

import nccl.bindings as b
from nccl.core import (FLOAT32, NCCL_SPLIT_NOCOLOR, Communicator, GroupSimInfo, NcclDataType,
                       SUM, get_unique_id, group_simulate_end, group_start)

mpi = MPI.COMM_WORLD
rank, nranks = mpi.Get_rank(), mpi.Get_size()
uid = mpi.bcast(get_unique_id() if rank == 0 else None, root=0)
comm = Communicator.init(nranks, rank, uid)

assert NcclDataType(np.dtype(np.float32)) == FLOAT32
x = np.ones(16, np.float32)
comm.allreduce(x, x, SUM, 0)  # stream positional, as 0.2 allowed
assert (x == nranks).all()

sub = comm.split(NCCL_SPLIT_NOCOLOR if rank == 0 else 0, rank)
assert (rank == 0) == (not sub.is_valid)
if sub.is_valid:
    sub.destroy()

group_start()
info = group_simulate_end(GroupSimInfo())
assert info.estimated_time >= 0

# the low-level 0.2 convention: the handle is returned
raw = b.comm_split(comm.ptr, 0, rank, 0)
assert b.comm_count(raw) == nranks
b.comm_destroy(raw)
print(f"rank {rank}: ok", flush=True)
comm.destroy()
