"""nccl.core.UniqueId: its bytes, its in-place NumPy view (the one mpi4py's
``Bcast([uid.as_ndarray, MPI.BYTE], root=0)`` writes into), equality and
pickling.  The multi-rank broadcast itself runs under mpiexec in
test_host_mpi.py (examples/mpi/upstream_06_bcast_unique_id.py)."""
from __future__ import annotations

import ctypes
import gc
import pickle

import numpy as np
import pytest

import nccl.bindings as b
import nccl.core as nc

DATA = bytes(range(7, 135))


def test_writing_through_the_view_changes_the_id():
    uid = nc.get_unique_id(empty=True)
    view = uid.as_ndarray
    assert isinstance(view, np.recarray) and view.shape == (1,)
    assert view.dtype == b.unique_id_dtype and view.flags.writeable
    np.asarray(view).view(np.uint8)[:] = np.frombuffer(DATA, np.uint8)
    assert bytes(uid) == uid.as_bytes == DATA
    assert ctypes.string_at(uid.ptr, len(DATA)) == DATA  # what the library is given
    assert uid == nc.UniqueId.from_bytes(DATA)
    assert pickle.loads(pickle.dumps(uid)) == uid
    assert bytes(view["internal"][0].view(np.uint8)) == DATA


def test_a_buffer_consumer_fills_the_id_in_place():
    """What mpi4py does with the view: take a writable buffer and write it."""
    uid = nc.get_unique_id(empty=True)
    ctypes.memmove((ctypes.c_char * len(DATA)).from_buffer(uid.as_ndarray), DATA, len(DATA))
    assert bytes(uid) == DATA
    src = nc.UniqueId.from_bytes(DATA)
    dst = nc.get_unique_id(empty=True)
    memoryview(dst.as_ndarray).cast("B")[:] = memoryview(src.as_ndarray).cast("B")
    assert dst == src and bytes(dst) == DATA


def test_the_view_shows_the_id_and_later_changes():
    uid = nc.UniqueId.from_bytes(DATA)
    view = uid.as_ndarray
    assert view.tobytes() == DATA
    uid.as_ndarray[0]["internal"][:] = 0
    assert view.tobytes() == bytes(128) and bytes(uid) == bytes(128)


def test_the_view_keeps_the_storage_alive():
    view = nc.UniqueId.from_bytes(DATA).as_ndarray  # the id is gone after this line
    gc.collect()
    filler = [bytes([i]) * 128 for i in range(256)]  # reuse any freed memory
    assert view.tobytes() == DATA and len(filler) == 256
    np.asarray(view).view(np.uint8)[:] = 1  # still the id's storage, still writable
    assert view.tobytes() == b"\x01" * 128


def test_a_library_made_id_is_viewed_in_place():
    uid = nc.get_unique_id()
    assert uid.as_ndarray.tobytes() == bytes(uid)
    np.asarray(uid.as_ndarray).view(np.uint8)[:4] = 0
    assert bytes(uid)[:4] == bytes(4)


def test_ids_compare_by_bytes_and_are_not_hashable():
    a, c = nc.UniqueId.from_bytes(DATA), nc.UniqueId.from_bytes(DATA)
    assert a == c and a != nc.get_unique_id(empty=True) and a != DATA
    with pytest.raises(TypeError, match="unhashable"):
        hash(a)
    assert {bytes(a): 1}[bytes(c)] == 1
