"""Fuzzing nccl.bindings with hypothesis, against the recording stub.

1. Every function of the API table (python names from ``_api_table()``) is
   called with arbitrary Python objects and extreme integers, in every arity:
   only Python exceptions may come out, never a crash.
2. The simple entries (all parameters plain values) are called with arbitrary
   integers of every size: when a call succeeds, the stub's record holds the
   values passed (pointers mod 2**64), so no garbled value reaches the C ABI;
   when it fails, it fails with TypeError / OverflowError / ValueError.

Bounded for the default run; ``NCCL4PY_FUZZ_EXAMPLES=N`` raises the number
of examples per test for a longer local run (tests/README.md).
"""
from __future__ import annotations

import enum
import os

from gen import api as gen_api
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nccl._nccl as _nccl
import nccl.bindings as b
from nccl.bindings import rocm_extensions as rx

EXAMPLES = int(os.environ.get("NCCL4PY_FUZZ_EXAMPLES", "0")) or None
TABLE = gen_api.parse_table()
BY_SYMBOL = {e.symbols[0]: e for e in TABLE}
FUZZ = settings(max_examples=EXAMPLES or 70, deadline=None, derandomize=EXAMPLES is None,
                suppress_health_check=list(HealthCheck), database=None)

# Parameters whose int value the bindings or the stub dereference as an
# address (by design: "an address given as an int").  Ints there are
# replaced by the address of a zeroed scratch area, or by 0 where the length
# read comes from another, fuzzed argument.
FIXED_DEREF = {"uid", "cuid_ptr", "uid_ptr", "config", "collconfig", "props", "siminfo",
               "devreqs", "devcomm_out", "cdevcomm", "team", "teamv", "multimem"}
VAR_DEREF = {"uid_array", "sigdesc", "int_array", "cint_array"}
SCRATCH = np.zeros(1 << 16, np.uint8)
SCRATCH_ADDR = SCRATCH.ctypes.data


class Boom(Exception):
    """Raised by the hostile objects below."""


class RaisingIndex:
    def __index__(self):
        raise Boom("__index__")


class HugeIndex:
    def __index__(self):
        return 2**200


class NegIndex:
    def __index__(self):
        return -(2**70)


class BadIndexType:
    def __index__(self):  # returns a non-int: Python raises TypeError
        return "x"


class RaisingGetattr:
    def __getattr__(self, name):
        raise Boom(name)


class RaisingBuffer:
    def __buffer__(self, flags):
        raise Boom("__buffer__")


class RaisingLen(list):
    def __len__(self):
        raise Boom("__len__")


class Color(enum.IntEnum):
    RED = 7


EXTREME_INTS = [0, 1, -1, 2, 7, 2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**32 - 1, 2**32,
                2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64 - 1, 2**64, -(2**64), 2**200,
                -(2**200)]
ints = st.one_of(st.sampled_from(EXTREME_INTS), st.integers(),
                 st.integers(min_value=-(2**65), max_value=2**65))


def _structs():
    out = []
    for name in ("UniqueId", "Config", "SimInfo", "CommProperties", "WaitSignalDesc",
                 "DevCommRequirements", "DevComm", "PointerBox"):
        cls = getattr(b, name, None)
        if cls is not None:
            try:
                out.append(cls())
            except Exception:  # noqa: BLE001 - a struct that needs arguments
                pass
    return out


ATOMS = [None, True, False, 0.0, float("nan"), float("inf"), -1.5, 1e300, "", "x" * 300,
         b"", b"\x00" * 128, b"\xff" * 127, bytearray(128), bytearray(1 << 12),
         memoryview(b"abc"), memoryview(bytearray(256)), [], (), {}, [1, 2, 3], [1, "x"],
         [2**70], (0, 0), [None], {"a": 1}, set(), object(), object, type, Color.RED,
         b.DataType.Float32, b.RedOp.Sum, np.int64(5), np.uint64(2**64 - 1), np.float32(1),
         np.zeros(4, np.int32), np.zeros((2, 2)), np.zeros(4)[::2], complex(1, 2),
         RaisingIndex(), HugeIndex(), NegIndex(), BadIndexType(), RaisingGetattr(),
         RaisingBuffer(), RaisingLen([1, 2]), [bytes(128)] * 3, [bytes(127)], [b.UniqueId()]
         ] + _structs()
atoms = st.integers(0, len(ATOMS) - 1).map(ATOMS.__getitem__)  # (some are unhashable)
values = st.one_of(ints, atoms, st.lists(ints, max_size=4), st.lists(atoms, max_size=3), st.text(max_size=8),
                   st.binary(max_size=300))

ALLOWED = (TypeError, ValueError, OverflowError, b.NCCLError, NotImplementedError, Boom,
           BufferError, MemoryError)


def function(pyname):
    return getattr(b, pyname, None) or getattr(rx, pyname)


def forms(entry):
    """Parameter kinds of each calling convention: 0.3 (all C parameters) and
    0.2 (the out-parameters returned, so not passed)."""
    full = [p.kind for p in entry.params]
    returned = [k for k in full if not (k.startswith("out_") or k in ("uid_ptr", "siminfo",
                                                                        "props", "devcomm_out"))]
    return [full, returned]


def deref_positions(entry, nargs):
    fixed, var = set(), set()
    for f in forms(entry):
        for i, k in enumerate(f[:nargs]):
            if k in FIXED_DEREF:
                fixed.add(i)
            elif k in VAR_DEREF:
                var.add(i)
    return fixed, var


def _is_address_like(v):
    if isinstance(v, (int, np.integer)):
        return True
    try:
        memoryview(v)
        return False
    except Exception:  # noqa: BLE001
        pass
    return hasattr(type(v), "__index__")


def tame(entry, args):
    fixed, var = deref_positions(entry, len(args))
    out = list(args)
    for i, v in enumerate(out):
        if _is_address_like(v):
            if i in var:
                out[i] = 0
            elif i in fixed:
                out[i] = SCRATCH_ADDR
    return out


PYNAMES = [row[2] for row in _nccl._api_table()]
COUNTS = {"calls": 0, "ok": 0, "errors": 0}


@pytest.fixture
def stub(stub):
    stub.nccl4pyStubSetWriteOutputs(0)  # fuzzed out-addresses are never written
    return stub


def test_every_table_entry_is_fuzzed():
    assert len(PYNAMES) == len(TABLE) and set(PYNAMES) == {e.pyname for e in TABLE}
    for name in PYNAMES:
        assert callable(function(name)), name


@pytest.mark.parametrize("pyname", PYNAMES)
def test_arbitrary_objects_only_raise_python_exceptions(stub, pyname):
    entry = next(e for e in TABLE if e.pyname == pyname)
    fn = function(pyname)
    n = len(entry.params)

    @FUZZ
    @given(args=st.lists(values, min_size=0, max_size=n + 1),
           kw=st.dictionaries(st.sampled_from(["comm", "stream", "count", "bogus", "config",
                                               "datatype", "unique_id"]), values, max_size=2),
           result=st.sampled_from([0, 0, 0, 4, 7]))
    def run(args, kw, result):
        stub.nccl4pyStubSetResult(result)
        args = tame(entry, args)
        if kw:
            kw = {k: (0 if _is_address_like(v) else v) for k, v in kw.items()}
        COUNTS["calls"] += 1
        try:
            fn(*args, **kw)
            COUNTS["ok"] += 1
        except ALLOWED:
            COUNTS["errors"] += 1

    run()


ADDRESS_KINDS = {k for k, v in gen_api.KINDS.items() if v.cast == "(void **)"}
# caller storage the library writes: 0 is refused
NONZERO_KINDS = {k for k, v in gen_api.KINDS.items() if v.conv == "n4p_arg_storage"}


def _expect(kind, v):
    if kind in ADDRESS_KINDS:
        return f"{kind}:{int(v) % 2**64:#x}"
    return f"{kind}:{int(v)}"


VALID = {**{k: (-(2**63), 2**64 - 1) for k in ADDRESS_KINDS},
         "size": (0, 2**64 - 1), "int": (-(2**31), 2**31 - 1),
         "uint": (0, 2**32 - 1), "dtype": (-(2**31), 2**31 - 1), "redop": (-(2**31), 2**31 - 1),
         "residence": (-(2**31), 2**31 - 1), "memstat": (-(2**31), 2**31 - 1),
         "result": (-(2**31), 2**31 - 1), "cftmode": (-(2**31), 2**31 - 1)}
SIMPLE = [e for e in TABLE if e.simple and e.params]


@pytest.mark.parametrize("entry", SIMPLE, ids=[e.pyname for e in SIMPLE])
def test_simple_entries_pass_exact_values(stub, entry):
    fn = function(entry.pyname)
    kinds = [p.kind for p in entry.params]

    @FUZZ
    @given(args=st.tuples(*[st.one_of(ints, st.sampled_from([Color.RED, True, np.int64(-3)]))
                            for _ in kinds]))
    def run(args):
        COUNTS["calls"] += 1
        stub.nccl4pyStubReset()
        stub.nccl4pyStubSetWriteOutputs(0)
        try:
            fn(*args)
        except (OverflowError, ValueError, TypeError):
            COUNTS["errors"] += 1
            # an error is only right when some value is out of its C range
            assert any((k in VALID and not VALID[k][0] <= int(v) <= VALID[k][1])
                       or (k in NONZERO_KINDS and int(v) == 0)
                       for k, v in zip(kinds, args)), (entry.pyname, args)
            assert stub.nccl4pyStubCallCount() == 0
            return
        except b.NCCLError:  # enum value the library refused: not reached here
            raise
        COUNTS["ok"] += 1
        rec = stub.nccl4pyStubLastCall().decode().split(" ")
        assert rec[0] == entry.symbols[0]
        got = dict(part.split("=", 1) for part in rec[1:])
        for p, v in zip(entry.params, args):
            if p.kind in VALID:
                assert VALID[p.kind][0] <= int(v) <= VALID[p.kind][1], (p.name, v)
            assert got[p.name] == _expect(p.kind, v), (entry.pyname, p.name, v, got)

    run()


def test_report_case_counts():
    """The fuzzed calls reached both outcomes: values the library got, and
    values refused with a Python exception before any call."""
    if not COUNTS["calls"]:
        pytest.skip("no fuzz test of this module ran in this session")
    print(f"fuzz bindings: {COUNTS['calls']} calls, {COUNTS['ok']} succeeded, "
          f"{COUNTS['errors']} raised Python exceptions")  # shown if the test fails
    assert COUNTS["ok"] > 0 and COUNTS["errors"] > 0, COUNTS
