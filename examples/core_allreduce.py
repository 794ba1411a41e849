"""All-reduce NumPy arrays with the Pythonic API.

    python -m nccl.run -n 4 examples/core_allreduce.py
"""
import numpy as np

import nccl.core as nccl

with nccl.Communicator.from_env() as comm:  # destroyed on exit, aborted on error
    x = np.full(1 << 16, comm.rank + 1, dtype=np.float32)
    y = np.empty_like(x)
    comm.allreduce(x, y, nccl.SUM)
    comm.allreduce(x, x, nccl.MAX)  # in place
    n = comm.nranks
    assert (y == n * (n + 1) / 2).all() and (x == n).all()
    print(f"{comm!r}: sum {y[0]:g}, max {x[0]:g}", flush=True)
