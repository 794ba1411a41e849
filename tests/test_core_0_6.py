"""nccl4py 0.6's nccl.core on the host backend: config= on every collective,
teams and parameters, on 2 and 4 ranks (results checked, not only names)."""
from __future__ import annotations

import numpy as np
import pytest

import nccl.core as nc
from nccl import bindings


def _calls(comm, cfg):
    """(name, run(config) -> result array or None) of the eight collectives."""
    n, r = comm.nranks, comm.rank
    x = np.arange(8, dtype=np.float32) + r
    big = np.arange(8 * n, dtype=np.float32) * (r + 1)

    def allreduce(config):
        y = np.zeros(8, np.float32)
        comm.allreduce(x, y, nc.SUM, config=config)
        return y

    def reduce(config):
        y = np.zeros(8, np.float32)
        comm.reduce(x, y if r == n - 1 else None, nc.MAX, root=n - 1, config=config)
        return y if r == n - 1 else None

    def reduce_scatter(config):
        y = np.zeros(8, np.float32)
        comm.reduce_scatter(big, y, nc.SUM, config=config)
        return y

    def broadcast(config):
        y = x.copy() if r == 1 else np.zeros(8, np.float32)
        comm.broadcast(y, y, root=1, config=config)
        return y

    def allgather(config):
        y = np.zeros(8 * n, np.float32)
        comm.allgather(x, y, config=config)
        return y

    def gather(config):
        y = np.zeros(8 * n, np.float32)
        comm.gather(x, y if r == 0 else None, root=0, config=config)
        return y if r == 0 else None

    def alltoall(config):
        y = np.zeros(8 * n, np.float32)
        comm.alltoall(big, y, config=config)
        return y

    def scatter(config):
        y = np.zeros(8, np.float32)
        comm.scatter(big if r == 0 else None, y, root=0, config=config)
        return y

    return [allreduce, reduce, reduce_scatter, broadcast, allgather, gather, alltoall, scatter]


@pytest.mark.nccl(nranks=[2, 4])
def test_every_collective_with_config_gives_the_plain_result(comm):
    tuned = nc.NCCLCollConfig(min_ctas=1, max_ctas=4, cta_policy=nc.CTAPolicy.EFFICIENCY,
                              alg_selection="ring", user_profiler_tag=7)
    for run in _calls(comm, tuned):
        plain = run(None)
        for config in (tuned, nc.NCCLCollConfig(), bindings.CollConfig()):
            got = run(config)
            if plain is None:
                assert got is None
            else:
                np.testing.assert_array_equal(got, plain, err_msg=f"{run.__name__} {config}")


@pytest.mark.nccl(nranks=[2, 4])
def test_a_config_the_library_refuses_is_its_error_on_every_rank(comm):
    # the library checks the config (CTAPolicy outside its range) before anything
    # moves: every rank gets the library's error, none waits for the others
    x = np.ones(8, np.float32)
    with pytest.raises(bindings.NCCLError):
        comm.allreduce(x, x, nc.SUM, config=nc.NCCLCollConfig(cta_policy=99))
    assert (x == 1).all()
    comm.allreduce(x, x, nc.SUM)  # the communicator is fine
    assert (x == comm.nranks).all()


@pytest.mark.nccl(nranks=2)
def test_config_must_be_a_config(comm):
    x = np.ones(8, np.float32)
    for bad in (5, "ring", {"min_ctas": 1}):
        with pytest.raises(TypeError, match="NCCLCollConfig"):
            comm.allreduce(x, x, nc.SUM, config=bad)
    with pytest.raises(TypeError):
        comm.send(x, 1 - comm.rank, config=nc.NCCLCollConfig())  # no config= on send
    with pytest.raises(TypeError):
        comm.allreduce(x, x, nc.SUM, None, nc.NCCLCollConfig())  # config= is keyword-only


@pytest.mark.nccl(nranks=[2, 4])
def test_teams_and_rank_translation(comm):
    n, r = comm.nranks, comm.rank
    world = comm.team_world
    assert world == nc.NCCLTeam(n, r, 1)
    assert comm.team_lsa == world  # one machine: every rank is load/store accessible
    assert comm.team_rail == nc.NCCLTeam(1, 0, n)
    assert [comm.team_rank_to_world(world, i) for i in range(n)] == list(range(n))
    assert [comm.team_rank_to_lsa(world, i) for i in range(n)] == list(range(n))
    assert comm.team_rank_to_world(world, n) == -1  # not a member


@pytest.mark.nccl(nranks=2)
def test_params_list_the_backends_own_parameters(comm):
    keys = list(nc.params)
    assert keys and all(k.startswith("NCCL4PY_HOST_") for k in keys), keys
    assert "NCCL4PY_HOST_TIMEOUT" in nc.params
    assert nc.params["NCCL4PY_HOST_TIMEOUT"]
    with pytest.raises(KeyError):
        nc.params["NO_SUCH_PARAMETER"]


@pytest.mark.nccl(nranks=2)
def test_a_changed_config_is_used_as_changed(comm):
    # the struct made from a config is kept for the next call: a field set
    # afterwards must reach the library all the same
    x = np.ones(8, np.float32)
    cfg = nc.NCCLCollConfig(cta_policy=nc.CTAPolicy.EFFICIENCY)
    comm.allreduce(x, x, nc.SUM, config=cfg)
    cfg.cta_policy = 99  # the library refuses this one
    with pytest.raises(bindings.NCCLError):
        comm.allreduce(x, x, nc.SUM, config=cfg)
    cfg.cta_policy = None
    comm.allreduce(x, x, nc.SUM, config=cfg)
    assert (x == 4).all()
