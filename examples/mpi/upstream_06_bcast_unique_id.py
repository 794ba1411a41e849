"""The bootstrap of NVIDIA's nccl4py 0.6 tests and of nvmath-python: every
rank makes an empty id, and mpi4py's buffer broadcast (uppercase ``Bcast``)
writes rank 0's id into the others' ``as_ndarray`` views in place.

    NCCL4PY_BACKEND=host mpiexec -n 4 python -m mpi4py examples/mpi/upstream_06_bcast_unique_id.py
"""
import numpy as np
from mpi4py import MPI

import nccl.core as nccl

mpi = MPI.COMM_WORLD
rank, nranks = mpi.Get_rank(), mpi.Get_size()
unique_id = nccl.get_unique_id(empty=rank != 0)
mpi.Bcast([unique_id.as_ndarray, MPI.BYTE], root=0)
ids = mpi.allgather(bytes(unique_id))
assert ids == [ids[0]] * nranks and ids[0] != bytes(128), "the ranks hold different ids"
comm = nccl.Communicator.init(nranks=nranks, rank=rank, unique_id=unique_id)

data = np.full(1000, rank + 1, dtype=np.float32)
comm.allreduce(data, data, nccl.SUM)
assert (data == nranks * (nranks + 1) / 2).all()

root_data = np.arange(64, dtype=np.int32) if rank == 0 else np.zeros(64, np.int32)
comm.broadcast(root_data, root_data, root=0)
assert (root_data == np.arange(64)).all()

print(f"rank {rank}: device {comm.device.device_id} ok", flush=True)
comm.destroy()
