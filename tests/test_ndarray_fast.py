"""The numpy.ndarray fast path of buffer resolution (src/ndarray_fast.h,
src/ndarray_fast.c, nccl/_ndarray_check.py): an array of exactly NumPy's
type is read from its own fields once a check against the buffer protocol
has passed, and its answer is the general path's in every case, errors
included (the general path answers all the cases the fast one leaves)."""
from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from nccl import _nccl
from nccl._enums import DataType as DT
from conftest import clean_env, host_available, run_python

FOREIGN = ">" if sys.byteorder == "little" else "<"
as_strided = np.lib.stride_tricks.as_strided


def hostile() -> dict:
    """name -> array: every layout, dtype and flag the paths treat apart."""
    base = np.arange(24, dtype=np.float32)
    m = base.reshape(4, 6)
    ro = np.arange(8, dtype=np.float32)
    ro.setflags(write=False)
    raw = bytearray(33)
    bcast = np.broadcast_arrays(np.ones((1, 8), np.float32), np.ones(8, np.float32))[1]
    arrays = {
        "float32": base, "2d": m, "3d": base.reshape(2, 3, 4), "transposed": m.T,
        "fortran": np.asfortranarray(m), "negative_strides": base[::-1],
        "negative_2d": m[::-1, ::-1], "step": base[::3], "columns": m[:, :3],
        "offset": base[5:], "size1_dims": base.reshape(1, 24, 1), "column_1": m[:, 1:2],
        "row_1": m[1:2], "zero_size": base[:0], "zero_size_2d": m[:0],
        "zero_size_transposed": m.T[:0], "zero_size_huge": np.ndarray((0, 1 << 40), np.float32),
        "zero_stride": as_strided(base[:1], shape=(8,), strides=(0,)),
        "huge_zero_stride": as_strided(base[:1], shape=(1 << 40, 1 << 20), strides=(0, 0)),
        "0d": np.zeros((), np.float32), "0d_int64": np.array(7, np.int64),
        "read_only": ro, "read_only_reversed": ro[::-1],
        "broadcast_warn_on_write": bcast,
        "unaligned": np.ndarray((8,), np.float32, buffer=raw, offset=1),
        "from_bytes": np.frombuffer(bytes(32), np.float32),
        "structured": np.zeros(3, dtype=[("a", np.float32), ("b", np.int8)]),
        "structured_1": np.zeros(3, dtype=[("a", np.float32)]),
        "void": np.zeros(3, dtype=np.dtype((np.void, 4))),
        "subarray_dtype": np.zeros(3, dtype=np.dtype((np.float32, (2,)))),
        "metadata": np.zeros(3, dtype=np.dtype(np.float32, metadata={"u": 1})),
        "explicit_native": np.zeros(3, dtype=np.dtype("f4").newbyteorder("<" if FOREIGN == ">"
                                                                          else ">")),
        "subclass_matrix": m.view(np.matrix),  # (np.asmatrix warns)
        "subclass_recarray": np.zeros(3, dtype=[("a", "f4")]).view(np.recarray),
        "subclass_own": base.view(type("Sub", (np.ndarray,), {})),
    }
    for code in np.typecodes["All"]:
        dt = np.dtype(code + ("8[s]" if code in "Mm" else "4" if code in "SUV" else ""))
        arrays[f"dtype_{dt.str}"] = np.zeros(5, dt)
        arrays[f"dtype_{dt.newbyteorder(FOREIGN).str}_foreign"] = np.zeros(
            5, dt.newbyteorder(FOREIGN))
    try:
        import ml_dtypes
    except ImportError:
        pass
    else:  # user-defined dtypes: type numbers of 256 and up
        for name in USER_DTYPES:
            arrays.update(user_hostile(np.dtype(getattr(ml_dtypes, name)), name))
    return arrays


USER_DTYPES = {"bfloat16": DT.Bfloat16, "float8_e4m3fn": DT.Float8e4m3,
               "float8_e5m2": DT.Float8e5m2}


def user_hostile(dt: np.dtype, name: str) -> dict:
    """The layouts and flags of `hostile` for a user-defined dtype."""
    m = np.zeros((3, 4), dt)
    ro = np.zeros(6, dt)
    ro.setflags(write=False)
    raw = bytearray(8 * dt.itemsize + 1)
    return {
        name: np.zeros(4, dt), name + "_foreign": np.zeros(4, dt.newbyteorder(FOREIGN)),
        name + "_2d": m, name + "_transposed": m.T, name + "_reversed": m[0, ::-1],
        name + "_offset": m.reshape(-1)[3:], name + "_0d": np.zeros((), dt),
        name + "_zero_size": m[:0], name + "_read_only": ro,
        name + "_broadcast": np.broadcast_arrays(np.zeros((2, 4), dt), np.zeros(4, dt))[1],
        name + "_unaligned": np.ndarray((8,), dt, buffer=raw, offset=1),
        name + "_subclass": m.view(type("Sub", (np.ndarray,), {})),
    }


ARRAYS = hostile()


def outcome(obj, **kw):
    try:
        return ("ok", _nccl.resolve_buffer(obj, **kw))
    except Exception as e:  # noqa: BLE001 - the outcome is compared, whatever it is
        return (type(e), str(e))


def test_the_fast_path_is_on_for_this_numpy():
    _nccl.resolve_buffer(np.zeros(2, np.float32))  # classified: the check ran
    info = _nccl._ndarray_fast_info()
    assert info["on"] and info["tried"] and info["off"] == "", info
    # every NCCL dtype NumPy has a built-in type for was learned
    learned = set(info["dtypes"].values())
    assert {DT.Int8, DT.Uint8, DT.Int32, DT.Uint32, DT.Int64, DT.Uint64, DT.Float16,
            DT.Float32, DT.Float64} <= learned, info
    assert info["dtypes"][np.dtype(np.float32).num] == DT.Float32
    assert info["dtypes"][np.dtype(np.bool_).num] == DT.Uint8  # bool as uint8


@pytest.mark.parametrize("name", sorted(ARRAYS))
@pytest.mark.parametrize("writable", [False, True])
def test_fast_and_general_path_agree(name, writable):
    a = ARRAYS[name]
    for label, obj in (("array", a), ("count", (a, 0)), ("dtype", (a, DT.Uint8)),
                       ("count_dtype", (a, 0, DT.Int8))):
        fast = outcome(obj, name="recvbuf", writable=writable)
        general = outcome(obj, name="recvbuf", writable=writable, general=True)
        assert fast == general, (name, label)


@pytest.mark.parametrize("name", sorted(USER_DTYPES))
def test_user_defined_dtypes_are_learned_from_the_general_path(name):
    """ml_dtypes' types have type numbers of 256 and up, which the check does
    not know: the first array of one that the general path resolves teaches
    the fast path its dtype (else each call pays for a refused buffer export
    and an __array_interface__ dict), and from then on the fast path's answer
    is the general path's for every layout and flag."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    dt = np.dtype(getattr(ml_dtypes, name))
    a = np.arange(6).astype(dt)
    assert _nccl.resolve_buffer(a)[:3] == (a.ctypes.data, 6, USER_DTYPES[name])
    info = _nccl._ndarray_fast_info()
    assert info["on"] and info["dtypes"].get(dt.num) == USER_DTYPES[name], info
    assert dt.num >= 256
    for label, v in user_hostile(dt, name).items():
        for writable in (False, True):
            fast = outcome(v, name="recvbuf", writable=writable)
            general = outcome(v, name="recvbuf", writable=writable, general=True)
            assert fast == general, (label, writable)
    if dt.itemsize > 1:  # byte-swapped bfloat16 is still refused (typestr '>V2' wins)
        with pytest.raises(Exception, match="byte order"):
            _nccl.resolve_buffer(np.zeros(4, dt.newbyteorder(FOREIGN)))


def test_the_fast_answer_is_the_arrays_memory():
    for name in ("float32", "2d", "offset", "0d", "unaligned", "size1_dims", "metadata"):
        a = ARRAYS[name]
        ptr, count, dtype, dev, dev_id, ro = _nccl.resolve_buffer(a)
        assert (ptr, count, dev, dev_id, ro) == (a.ctypes.data, a.size, 1, 0, False), name
    assert _nccl.resolve_buffer(ARRAYS["read_only"])[5] is True
    assert _nccl.resolve_buffer(ARRAYS["broadcast_warn_on_write"])[5] is True


def test_the_fast_path_keeps_the_array_alive_like_the_buffer_protocol():
    a = np.arange(8, dtype=np.float32)
    before = sys.getrefcount(a)
    _nccl.resolve_buffer(a)
    assert sys.getrefcount(a) == before  # released after the call


# A type whose fields the layout reads are not what the object says it holds:
# the check turns the fast path off, and every array then takes the general path.
OFF = r"""
import json, numpy as np
from nccl import _nccl
class Lying(np.ndarray):
    @property
    def dtype(self):
        return np.dtype(np.float64)
samples = {samples}
on = _nccl._ndarray_register({tp}, samples)
a = np.arange(8, dtype=np.float32)
print(json.dumps([on, _nccl._ndarray_fast_info(), _nccl.resolve_buffer(a)[:3], a.ctypes.data]))
"""


@pytest.mark.parametrize("tp, samples, why", [
    ("Lying", "[np.zeros(3, np.float32).view(Lying)]", "does not read a sample's dtype"),
    ("bytearray", "[]", "smaller than the layout"),
    ("np.ndarray", "[]", "no float32 sample"),
    ("np.ndarray", "[np.zeros(3, np.float32).view(Lying)]", "a sample is not of the type"),
])
def test_a_failed_check_leaves_the_general_path(tp, samples, why):
    p = run_python(OFF.format(tp=tp, samples=samples), clean_env())
    assert p.returncode == 0, p.stderr[-2000:]
    on, info, (ptr, count, dtype), data = json.loads(p.stdout.splitlines()[-1])
    assert not on and not info["on"] and why in info["off"], info
    assert (ptr, count, dtype) == (data, 8, DT.Float32)


def test_numpy_is_never_imported_by_the_check():
    p = run_python("import sys, nccl._nccl as m, nccl._ndarray_check as c\n"
                   "m.resolve_buffer(bytearray(4))\n"
                   "print(c.samples(bytearray), 'numpy' in sys.modules)", clean_env())
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.split() == ["[]", "False"]


@pytest.mark.parametrize("first", ["nccl._nccl", "nccl._ndarray_check"])
def test_the_check_is_registered_whichever_module_is_imported_first(first):
    # the module's init imports nccl._ndarray_check, which registers its
    # register() (_register): the first classification calls it, imports nothing
    p = run_python(f"import sys, {first}, numpy as np\n"
                   "from nccl import _nccl\n"
                   "before = set(sys.modules)\n"
                   "_nccl.resolve_buffer(np.zeros(2, np.float32))\n"
                   "print(_nccl._ndarray_fast_info()['on'], "
                   "sorted(m for m in set(sys.modules) - before if m.startswith('nccl')))",
                   clean_env())
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.split() == ["True", "[]"]


@pytest.mark.skipif(not host_available(), reason="host backend not built")
def test_collectives_on_fast_path_arrays():
    p = run_python(r"""
import numpy as np, nccl.core as nc
from nccl._errors import NcclInvalid
comm = nc.Communicator.init(1, 0, nc.get_unique_id())
x = np.arange(8, dtype=np.float32); y = np.zeros_like(x)
comm.allreduce(x, y, nc.SUM); assert (y == x).all()
comm.allreduce(x, x, nc.SUM); assert (x == np.arange(8)).all()  # in place, one rank
msgs = []
for s, r in ((x[:6], x[2:]), (x, x.T[::-1]), (x, np.zeros(8, np.float64)),
             (x, np.zeros(8, np.float32)[::2]), (x, np.zeros(8, '>f4')),
             (x, np.frombuffer(bytes(32), np.float32))):
    try:
        comm.allreduce(s, r, nc.SUM)
    except NcclInvalid as e:
        msgs.append(str(e).split(':')[0].split(' (')[0])
print(msgs)
with nc.group():
    a = np.ones(4, np.float32); b = np.zeros(4, np.float32)
    comm.allreduce(a, b, nc.SUM)
    del a  # kept alive by the group until its end
assert (b == 1).all()
from nccl import _nccl
assert _nccl._ndarray_fast_info()["on"]
comm.destroy()
""", clean_env(NCCL4PY_BACKEND="host"))
    assert p.returncode == 0, p.stderr[-3000:]
    msgs = eval(p.stdout.splitlines()[-1])  # noqa: S307 - our own subprocess's list
    layout = "recvbuf is not contiguous in row-major"
    assert msgs == ["sendbuf and recvbuf overlap", layout, "Dtype mismatch", layout,
                    "recvbuf has non-native byte order", "recvbuf is read-only"], msgs
