"""A communicator in the test process, on the recording stub: the handle
``COMM`` for ``nccl.core.Communicator(COMM)``, and what the stub (the ``stub``
fixture of conftest.py) has seen."""
from __future__ import annotations

COMM = 0x7F00_1234_5000


def calls(stub) -> int:
    """How many library functions the stub has seen."""
    return stub.nccl4pyStubCallCount()


def last_call(stub) -> str:
    """The name of the last library function the stub saw."""
    return stub.nccl4pyStubLastCall().decode().split(" ")[0]
