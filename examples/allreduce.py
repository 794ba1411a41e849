"""Sum a NumPy array across ranks with the low-level bindings.

    python -m nccl.run -n 4 examples/allreduce.py

With no GPU the launcher picks the host backend, so this runs anywhere.
"""
import numpy as np

import nccl.bindings as b
import nccl.run

env = nccl.run.environment()
comm = b.comm_init_rank(env.nranks, env.unique_id, env.rank)
x = np.full(1 << 20, env.rank + 1, dtype=np.float32)
y = np.empty_like(x)
b.all_reduce(x.ctypes.data, y.ctypes.data, x.size, b.DataType.Float32, b.RedOp.Sum, comm, 0)
expected = env.nranks * (env.nranks + 1) / 2
assert (y == expected).all(), y[:4]
print(f"rank {env.rank}/{env.nranks}: allreduce of {x.nbytes >> 20} MiB gives {y[0]:g} "
      f"everywhere (expected {expected:g}) on {b.get_library_path()}", flush=True)
b.comm_destroy(comm)
