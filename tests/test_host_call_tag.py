"""Host backend: the caller's tag of a collective (nccl4pyHostSetCallTag,
host/calltag.c), compared across ranks like the type."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

import nccl.bindings as b
from conftest import host_available

pytestmark = [pytest.mark.skipif(not host_available(), reason="host backend not built"),
              pytest.mark.nccl(nranks=1)]

FLOAT32, SUM = 7, 0


def _set_tag():
    fn = ctypes.CDLL(b.get_library_path()).nccl4pyHostSetCallTag
    fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_char_p], ctypes.c_int
    return fn


def _all_reduce_both(comms, tags, before_end=None):
    """One all-reduce on each of the two ranks (one group), each submitted
    under its tag; the tags are cleared again before the group ends."""
    set_tag = _set_tag()
    bufs = [np.ones(8, np.float32) for _ in comms]
    b.group_start()
    try:
        for c, t, x in zip(comms, tags, bufs):
            assert set_tag(c.handle, t) == 0
            b.all_reduce(x.ctypes.data, x.ctypes.data, 8, FLOAT32, SUM, c, 0)
            assert set_tag(c.handle, None) == 0
    finally:
        b.group_end()
    return bufs


def _text(comms) -> str:
    return " ".join(b.get_last_error(c) for c in comms)


@pytest.mark.parametrize("tags", [(b"torch.int16", b"torch.uint16"), (b"torch.int16", None)])
def test_different_tags_are_a_mismatch_naming_both(tags):
    comms = b.comm_init_all(2, [0, 1])
    with pytest.raises(b.NCCLError) as err:
        _all_reduce_both(comms, tags)
    assert err.value.status == 5, str(err.value)  # ncclInvalidUsage
    text = _text(comms)
    assert "mismatched collective calls" in text, text
    assert "float32, op=sum) for torch.int16" in text, text
    if tags[1] is not None:
        assert "for torch.uint16" in text, text
    for c in comms:
        b.comm_abort(c)


def test_equal_tags_and_no_tags_pass_and_a_tag_is_taken_when_the_call_is_submitted():
    comms = b.comm_init_all(2, [0, 1])
    out = _all_reduce_both(comms, (b"torch.int16", b"torch.int16"))
    assert all((x == 2).all() for x in out)
    out = _all_reduce_both(comms, (None, None))  # cleared: untagged again
    assert all((x == 2).all() for x in out)
    # tags longer than 31 bytes are cut: these compare equal
    out = _all_reduce_both(comms, (b"x" * 31 + b"a", b"x" * 31 + b"b"))
    assert all((x == 2).all() for x in out)
    for c in comms:
        b.comm_destroy(c)


def test_a_bad_communicator_is_refused():
    assert _set_tag()(None, b"torch.int16") != 0
