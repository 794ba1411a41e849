"""The rank side of tests/test_torch_entry_points.py: nccl4py_host as the CPU
backend of a mixed group, ``init_process_group("cpu:nccl4py_host,cuda:<b>")``.

torch >= 2.14: the group is torch's ProcessGroup with a HostBackend for the
CPU; every check runs its CPU tensors through it.  torch 2.13: creating the
group is refused (UnsupportedError), which is recorded as the result.

Usage: python torch_mixed.py <results dir> <tcp://...> <backend string>
"""
from __future__ import annotations

import json
import os
import sys
import traceback

import torch
import torch.distributed as dist

RESULTS, METHOD, BACKEND_STRING = sys.argv[1:4]
R, N = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
results: dict = {}


def same(got, exp, what):
    assert torch.equal(got, exp), f"{what}: {got} != {exp}"


def checks(pg) -> None:
    from nccl.torch.backend import HostBackend

    backend = pg._get_backend(torch.device("cpu"))
    assert type(pg) is dist.ProcessGroup and isinstance(backend, HostBackend), (pg, backend)
    assert backend.communicator.nranks == N and backend.name() == "nccl4py_host"
    t = torch.arange(4.0) + R
    dist.all_reduce(t)
    same(t, sum(torch.arange(4.0) + r for r in range(N)), "all_reduce")
    t = torch.full((3,), float(R))
    dist.broadcast(t, 1 % N)
    same(t, torch.full((3,), float(1 % N)), "broadcast")
    out = torch.empty(2 * N)
    dist.all_gather_into_tensor(out, torch.full((2,), float(R)))
    same(out, torch.arange(N).float().repeat_interleave(2), "all_gather_into_tensor")
    outs = [torch.empty(2) for _ in range(N)]
    dist.all_gather(outs, torch.full((2,), float(R)))
    same(torch.stack(outs), torch.arange(N).float()[:, None].expand(N, 2), "all_gather")
    rs = torch.empty(2)
    dist.reduce_scatter_tensor(rs, torch.arange(2.0 * N) + R)
    same(rs, N * torch.arange(2.0 * R, 2.0 * R + 2) + sum(range(N)), "reduce_scatter_tensor")
    a2a = torch.empty(N)
    dist.all_to_all_single(a2a, torch.arange(N).float() + 10 * R)
    same(a2a, torch.arange(N).float() * 10 + R, "all_to_all_single")
    big = torch.full((1 << 20,), 1.0)
    work = dist.all_reduce(big, async_op=True)  # 4 MiB: the lane
    work.wait()
    same(big, torch.full((1 << 20,), float(N)), "async all_reduce")
    dist.barrier()
    peer = R ^ 1 if (R ^ 1) < N else R
    mine, got = torch.full((4 << 20,), float(R)), torch.empty(4 << 20)  # 16 MiB
    for q in dist.batch_isend_irecv([dist.P2POp(dist.isend, mine, peer),
                                     dist.P2POp(dist.irecv, got, peer)]):
        q.wait()
    same(got, torch.full((4 << 20,), float(peer)), "batch_isend_irecv")
    got = torch.empty(3)
    nxt, prv = (R + 1) % N, (R - 1) % N
    reqs = [dist.isend(torch.full((3,), float(R)), nxt), dist.irecv(got, prv)]
    for q in reqs:
        q.wait()
    same(got, torch.full((3,), float(prv)), "isend/irecv ring")
    # DDP's reducer reaches the backend from C++: gloo's parameters, bit for bit
    from torch.nn.parallel import DistributedDataParallel as DDP

    gloo = dist.new_group(backend="gloo")
    params = []
    for group in (pg, gloo):
        torch.manual_seed(0)
        model = DDP(torch.nn.Linear(8, 4), process_group=group)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(3):
            opt.zero_grad()
            model(torch.full((2, 8), float(R + step))).sum().backward()
            opt.step()
        params.append([p.detach() for p in model.parameters()])
    for a, b in zip(*params):
        same(a, b, "DDP against gloo")
    return backend.communicator


def main() -> None:
    from nccl.torch.backend import _constructible

    results["python backends"] = _constructible()
    try:
        dist.init_process_group(BACKEND_STRING, init_method=METHOD, rank=R, world_size=N)
    except Exception as e:
        results["init"] = f"{type(e).__name__}: {e}"
    else:
        results["init"] = "ok"
        try:
            comm = checks(dist.group.WORLD)
            results["checks"] = "ok"
        except BaseException:
            comm = None
            results["checks"] = "FAIL\n" + traceback.format_exc()
        dist.destroy_process_group()
        results["destroyed"] = comm is not None and not comm.is_valid
    with open(os.path.join(RESULTS, f"rank{R}.json"), "w") as f:
        json.dump({"rank": R, "results": results}, f)


if __name__ == "__main__":
    main()
