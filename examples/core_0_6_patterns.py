"""nccl4py 0.6 patterns: a per-call config, the communicator's properties,
teams and the library's parameters.

    python -m nccl.run -n 4 examples/core_0_6_patterns.py
"""
import numpy as np

import nccl.core as nccl

with nccl.Communicator.from_env() as comm:
    n, r = comm.nranks, comm.rank
    x = np.full(1 << 12, r + 1, dtype=np.float32)
    y = np.empty_like(x)
    # Tuning for this one call (the host backend checks it and ignores the tuning).
    comm.allreduce(x, y, nccl.SUM, config=nccl.NCCLCollConfig(min_ctas=1, max_ctas=4))
    assert (y == n * (n + 1) / 2).all()
    props = comm.properties  # a frozen dataclass
    assert (props.rank, props.n_ranks) == (r, n)
    world = comm.team_world  # NCCLTeam(n_ranks, rank, stride)
    assert (world.n_ranks, world.rank) == (n, r)
    right = comm.team_rank_to_world(world, (world.rank + 1) % world.n_ranks)
    assert right == (r + 1) % n
    params = dict(nccl.params)  # the library's parameters, as text
    print(f"rank {r}/{n}: sum {y[0]:g} with a per-call config; {world}; right neighbour "
          f"{right}; {len(params)} library parameters", flush=True)
