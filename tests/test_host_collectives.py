"""Collectives on the host backend, through nccl.bindings, on 1-4 ranks.

Each test runs tests/host_worker.py's suites on the ranks of the nccl.testing
plugin; every rank checks its results against NumPy / ml_dtypes computations
made independently of the library.
"""
from __future__ import annotations

import pytest

import host_worker
import nccl.bindings as b
import nccl.run
from conftest import host_available

pytestmark = pytest.mark.skipif(not host_available(), reason="host backend not built")


@pytest.fixture
def run_suites(check):
    """Runs host_worker suites on a communicator made as its program does."""
    env = nccl.run.environment()
    comm = b.comm_init_rank(env.nranks, env.unique_id, env.rank)
    host_worker.bind(comm, env.rank, env.nranks, check)

    def run(*names: str) -> None:
        for name in names:
            host_worker.SUITES[name]()
        check.assert_ok()

    yield run
    b.comm_destroy(comm)


@pytest.mark.nccl(nranks=[1, 2, 3, 4])
def test_allreduce_every_dtype_and_op(run_suites):
    run_suites("allreduce")


@pytest.mark.nccl(nranks=[1, 2, 3, 4])
def test_reduce_and_reduce_scatter(run_suites):
    run_suites("reduce", "reduce_scatter")


@pytest.mark.nccl(nranks=[1, 2, 3, 4])
def test_data_movement(run_suites):
    run_suites("movement")


@pytest.mark.nccl(nranks=[2, 4])
def test_large_messages(run_suites):
    run_suites("big")


@pytest.mark.nccl(nranks=2)
def test_half_and_8bit_floats_round_to_nearest_even(run_suites):
    run_suites("rounding")


@pytest.mark.nccl(nranks=[1, 2, 3, 4])
def test_groups_p2p_split_shrink_premulsum_rccl(run_suites):
    run_suites("p2p", "comms", "premulsum_device", "rccl")
