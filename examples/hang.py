"""A hang, caught by the watchdog and diagnosed from the flight records.

    NCCL4PY_TRACE_DIR=hang-trace python -m nccl.run -n 3 examples/hang.py
    python -m nccl.trace hang-trace

With more than one rank, the last rank "forgets" the fifth all-reduce.  The
others would wait for ever; with a watchdog timeout of 3 s they raise
NcclTimeoutError instead (or, on the host backend, NCCLError naming the rank
whose watchdog aborted the call first), and every rank leaves its record in
NCCL4PY_TRACE_DIR (see docs/debugging-hangs.md).
"""
import time

import numpy as np

import nccl.core as nccl

comm = nccl.Communicator.from_env(timeout=3.0)
rank, nranks = comm.rank, comm.nranks  # an aborted communicator answers nothing
x = np.ones(1024, dtype=np.float32)
for step in range(5):
    if step == 4 and nranks > 1 and rank == nranks - 1:
        time.sleep(5)  # the bug: this rank skips the last all-reduce
        print(f"rank {rank}: skipped allreduce #5", flush=True)
        break
    try:
        comm.allreduce(x, x, nccl.SUM)
    except nccl.NcclTimeoutError as e:  # this rank's watchdog aborted the call
        print(f"rank {rank}: {type(e).__name__}: {e.operation} #{e.seq} after "
              f"{e.waited:.1f} s", flush=True)
        break
    except nccl.NCCLError as e:  # another rank's watchdog aborted it first
        print(f"rank {rank}: {type(e).__name__}: allreduce #{step + 1}: {e}", flush=True)
        break
else:
    print(f"rank {rank}: all five all-reduces done", flush=True)
comm.abort()  # a communicator that timed out cannot be destroyed cleanly: abort
