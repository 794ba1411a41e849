"""Creating a unique id and moving it through environment variables.

The id is the 128 opaque bytes of ``ncclUniqueId``.  It travels between
processes as 256 lower-case hex digits (``NCCL4PY_UNIQUE_ID``).
"""

from __future__ import annotations

import os

UNIQUE_ID_BYTES = 128
UNIQUE_ID_ENV = "NCCL4PY_UNIQUE_ID"

# Test-only hook: with NCCL4PY_RUN_FAKE_ID=1 the launcher hands out 128 random
# bytes instead of asking the library.  Such an id is good for exercising the
# launcher itself, never for creating a communicator.
FAKE_ID_ENV = "NCCL4PY_RUN_FAKE_ID"


def create_unique_id() -> bytes:
    """Return the bytes of a fresh id made by the loaded library (``ncclGetUniqueId``).

    The library is the one :mod:`nccl.bindings` loads, so the backend chosen by
    ``NCCL_LIBRARY`` / ``NCCL4PY_BACKEND`` / ``NCCL4PY_PLATFORM`` applies.  With
    NCCL and RCCL the process that calls this hosts the bootstrap root, so it
    must stay alive until every rank has joined.
    """
    try:
        from nccl import bindings
        get_unique_id = bindings.get_unique_id
    except (ImportError, AttributeError) as exc:
        raise ImportError(
            f"nccl.bindings is not available ({exc}); is the nccl4py extension built?"
        ) from exc
    uid = get_unique_id()
    if isinstance(uid, int):  # bytes(int) would silently give zeros
        raise TypeError(f"nccl.bindings.get_unique_id() returned {uid!r}, expected a UniqueId")
    data = bytes(uid)
    if len(data) != UNIQUE_ID_BYTES:
        raise ValueError(
            f"nccl.bindings.get_unique_id() gave {len(data)} bytes, expected {UNIQUE_ID_BYTES}"
        )
    return data


def launcher_unique_id() -> bytes:
    """The id the launcher gives to its ranks (the fake one only under the test hook)."""
    if os.environ.get(FAKE_ID_ENV) == "1":
        return os.urandom(UNIQUE_ID_BYTES)
    return create_unique_id()


def encode(uid: bytes) -> str:
    """128 bytes -> 256 lower-case hex digits."""
    if len(uid) != UNIQUE_ID_BYTES:
        raise ValueError(f"a unique id has {UNIQUE_ID_BYTES} bytes, got {len(uid)}")
    return bytes(uid).hex()


def decode(text: str, name: str = UNIQUE_ID_ENV) -> bytes:
    """256 hex digits -> 128 bytes; ``ValueError`` naming *name* when malformed."""
    text = text.strip()
    if len(text) != 2 * UNIQUE_ID_BYTES:
        raise ValueError(
            f"{name} must hold {2 * UNIQUE_ID_BYTES} hex digits "
            f"({UNIQUE_ID_BYTES} bytes), got {len(text)} characters"
        )
    try:
        return bytes.fromhex(text)
    except ValueError:
        raise ValueError(f"{name} is not a hex string: {text[:16]!r}...") from None
