"""A communicator in the test process, on the recording stub: the handle
``COMM`` for ``nccl.core.Communicator(COMM)`` and the ``stub`` fixture (the
stub library, reset before and after the test)."""
from __future__ import annotations

import pytest

COMM = 0x7F00_1234_5000


@pytest.fixture
def stub(recording_stub):
    recording_stub.nccl4pyStubReset()
    yield recording_stub
    recording_stub.nccl4pyStubReset()


def calls(stub) -> int:
    """How many library functions the stub has seen."""
    return stub.nccl4pyStubCallCount()


def last_call(stub) -> str:
    """The name of the last library function the stub saw."""
    return stub.nccl4pyStubLastCall().decode().split(" ")[0]
