"""Pass each rank's data to its right-hand neighbour in one group.

    python -m nccl.run -n 3 examples/send_recv_ring.py
"""
import numpy as np

import nccl.bindings as b
import nccl.run

env = nccl.run.environment()
comm = b.comm_init_rank(env.nranks, env.unique_id, env.rank)
right, left = (env.rank + 1) % env.nranks, (env.rank - 1) % env.nranks
send = np.arange(8, dtype=np.int64) + 100 * env.rank
recv = np.zeros_like(send)
b.group_start()  # sends and receives in one group never deadlock
b.send(send.ctypes.data, send.size, b.DataType.Int64, right, comm, 0)
b.recv(recv.ctypes.data, recv.size, b.DataType.Int64, left, comm, 0)
b.group_end()
assert (recv == np.arange(8) + 100 * left).all(), recv
print(f"rank {env.rank}: got {recv[:3].tolist()}... from rank {left}", flush=True)
b.comm_destroy(comm)
