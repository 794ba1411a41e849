"""Written only against nccl4py 0.3 names, with NumPy arrays; the unique id
travels by mpi4py's bcast (pickling).

    NCCL4PY_BACKEND=host mpiexec -n 4 python -m mpi4py examples/mpi/upstream_03_allreduce.py

(`python -m mpi4py` aborts the whole job when a rank raises, so the other
ranks never wait for it.)
"""
import numpy as np
from mpi4py import MPI

import nccl.core as nccl

mpi = MPI.COMM_WORLD
rank, nranks = mpi.Get_rank(), mpi.Get_size()
uid = mpi.bcast(nccl.get_unique_id() if rank == 0 else None, root=0)
comm = nccl.Communicator.init(nranks=nranks, rank=rank, unique_id=uid)

send = np.arange(1024, dtype=np.float32) * (rank + 1)
recv = np.zeros_like(send)
comm.allreduce(send, recv, nccl.SUM, stream=None)
assert np.allclose(recv, np.arange(1024, dtype=np.float32) * nranks * (nranks + 1) / 2)

gathered = np.zeros(nranks * 4, dtype=np.int64)
comm.allgather(np.full(4, rank, dtype=np.int64), gathered)
assert (gathered.reshape(nranks, 4) == np.arange(nranks)[:, None]).all()

with nccl.group():
    out = np.zeros(8, np.int32)
    comm.send(np.full(8, rank, np.int32), (rank + 1) % nranks)
    comm.recv(out, (rank - 1) % nranks)
assert (out == (rank - 1) % nranks).all()

print(f"rank {rank}: {nccl.get_version().nccl_version} ok", flush=True)
comm.destroy()
