"""Bad input gives a Python exception naming the parameter, never a crash
and never a call into the library with a garbled value."""
from __future__ import annotations

import pytest

import nccl.bindings as b
from stub_comm import calls


GOOD = (1, 2, 3, 7, 0, 4, 5)


@pytest.mark.parametrize("pos,value,exc", [
    (0, None, TypeError),          # None where a pointer is expected
    (0, 1.5, TypeError),
    (0, "0x10", TypeError),
    (0, 2**64, OverflowError),     # does not fit a pointer
    (0, -(2**63) - 1, OverflowError),
    (2, -1, OverflowError),        # negative count
    (2, 2**64, OverflowError),
    (2, 3.0, TypeError),
    (3, 2**31, OverflowError),     # datatype is a C int
    (4, -(2**31) - 1, OverflowError),
    (5, None, TypeError),
    (6, [], TypeError),
])
def test_all_reduce_rejects(stub, pos, value, exc):
    args = list(GOOD)
    args[pos] = value
    with pytest.raises(exc) as ei:
        b.all_reduce(*args)
    assert calls(stub) == 0
    names = ["sendbuff", "recvbuff", "count", "datatype", "op", "comm", "stream"]
    assert names[pos] in str(ei.value)


def test_argument_count_and_keywords(stub):
    with pytest.raises(TypeError, match="at most 7"):
        b.all_reduce(*GOOD, 8)
    with pytest.raises(TypeError, match="missing required argument 'stream'"):
        b.all_reduce(*GOOD[:6])
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        b.all_reduce(*GOOD, bogus=1)
    with pytest.raises(TypeError, match="multiple values"):
        b.all_reduce(*GOOD, count=3)
    assert calls(stub) == 0


def test_index_objects_are_accepted(stub):
    import numpy as np

    b.all_reduce(np.int64(1), np.uint64(2**63), np.int32(3), np.int8(7), 0, 4, 5)
    assert calls(stub) == 1


def test_unique_id_arguments(stub):
    with pytest.raises(ValueError):
        b.comm_init_rank(2, b"short", 0)
    with pytest.raises(ValueError):
        b.comm_init_rank(2, bytes(129), 0)
    with pytest.raises(TypeError):
        b.comm_init_rank(2, None, 0)
    with pytest.raises(ValueError):
        b.comm_init_rank(2, 0, 0)  # null address
    with pytest.raises(ValueError, match="writable"):
        b.get_unique_id(bytes(128))
    assert calls(stub) == 0


def test_out_parameter_must_be_non_null(stub):
    with pytest.raises(ValueError, match="PointerBox"):
        b.comm_init_rank(0, 2, bytes(128), 0)
    with pytest.raises(ValueError):
        b.comm_split(1, 0, 0, 0, 0)
    assert calls(stub) == 0


def test_struct_arguments(stub):
    with pytest.raises(TypeError, match="Config"):
        b.comm_init_rank_config(2, bytes(128), 0, b.SimInfo())
    with pytest.raises(TypeError):
        b.comm_init_rank_config(2, bytes(128), 0, "config")
    with pytest.raises(TypeError):
        b.dev_comm_destroy(1, None)
    assert calls(stub) == 0


def test_arrays(stub):
    with pytest.raises(TypeError):
        b.comm_init_all(2, [1, "x"])
    with pytest.raises(OverflowError):
        b.comm_init_all(2, [1, 2**40])
    with pytest.raises(ValueError):
        b.comm_init_all(-1)
    with pytest.raises(TypeError):
        b.comm_shrink(1, object(), 1, None, 0)
    from nccl.bindings import rocm_extensions as rx

    with pytest.raises(OverflowError):
        rx.all_to_all_v(0, [-1], [0], 0, [1], [0], 7, 0, 0)
    with pytest.raises(TypeError):
        rx.all_to_all_v(0, None, [0], 0, [1], [0], 7, 0, 0)
    with pytest.raises(ValueError, match="same length"):
        rx.all_to_all_v(0, [1, 2], [0], 0, [1], [0], 7, 0, 0)
    assert calls(stub) == 0


def test_check_status():
    assert b.check_status(0) is None
    assert b.check_status(7) is None
    with pytest.raises(b.NCCLError) as ei:
        b.check_status(8)
    assert ei.value.status == 8 and str(ei.value).startswith("Timeout (8):")
    with pytest.raises(b.NCCLError) as ei:
        b.check_status(1234)
    assert str(ei.value).startswith("UnknownResult (1234):")


def test_error_pickles_without_library():
    import pickle

    e = b.NCCLError(6, "RemoteError (6): peer gone")
    f = pickle.loads(pickle.dumps(e))
    assert type(f) is b.NCCLError and f.status == 6 and str(f) == str(e)
    assert b.NCCLError(8).result == b.Result.Timeout
