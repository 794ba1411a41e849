"""RCCL extensions at the high level on the host backend, 2 and 4 ranks:
``Communicator.allreduce_with_bias`` and ``Communicator.alltoallv``
(tests/rocm_ext_worker.py; uneven counts, NumPy reference, validation)."""
from __future__ import annotations

import pytest

from test_core_multirank import pytestmark, run_worker  # noqa: F401  (skip if no host backend)


@pytest.mark.parametrize("nranks", [2, 4])
def test_allreduce_with_bias(nranks):
    run_worker("rocm_ext_worker.py", nranks, "bias")


@pytest.mark.parametrize("nranks", [2, 4])
def test_alltoallv_uneven(nranks):
    run_worker("rocm_ext_worker.py", nranks, "alltoallv")


@pytest.mark.parametrize("nranks", [2, 4])
def test_argument_validation(nranks):
    run_worker("rocm_ext_worker.py", nranks, "validation")
