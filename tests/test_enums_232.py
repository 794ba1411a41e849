"""Enumerations of NCCL 2.31/2.32 and the vendor-dependent GIN type values."""
from __future__ import annotations

import pytest

from nccl import bindings as b
from nccl import core
from nccl.core.enums import decode_gin_type


def test_low_level_values_match_nccl_2_32():
    assert {m.name: m.value for m in b.HostCftMode} == {
        "Default": -2**31, "Enable": 1, "Disable": 2, "Fallback": 3}
    assert {m.name: m.value for m in b.NvlsHostMode} == {
        "Default": -2**31, "Enable": 0, "DisableTransport": 1, "DisableSymmetricMultimem": 2,
        "Disable": 2**31 - 1}
    assert [(m.name, m.value) for m in b.CftTeamMode] == [
        ("FLAT", 0), ("HIER_MULTIMEM", 1), ("HIER_LSA", 2)]
    # NONE = 0 is a member (list() of an IntFlag leaves zero-valued members out)
    assert {n: int(m) for n, m in b.CftCap.__members__.items()} == {
        "NONE": 0, "CFT": 1, "MULTIMEM": 2}
    assert (b.CftCap.CFT | b.CftCap.MULTIMEM) == 3
    assert [(m.name, m.value) for m in b.EncryptionMode] == [("NONE", 0), ("PSK", 1)]
    assert [(m.name, m.value) for m in b.GinSignalOp] == [("Inc", 0), ("Add", 1)]
    assert b.GinConnectionType.CUSTOM_STRIDE == 3
    assert b.GinConnectionType.CUSTOM_ARRAY == 4  # NCCL 2.32.6
    assert b.GinType.EFA_GDA == 5 and b.GinType.GIN_MAX_TYPES == 6
    assert b.RedOpDummy.NumOps_dummy == 5 and b.RedOp_dummy is b.RedOpDummy


def test_core_enums_of_0_6():
    assert core.NcclHostCftMode.DEFAULT == -2**31 and core.NcclHostCftMode.FALLBACK == 3
    assert {n: int(m) for n, m in core.NcclCftCap.__members__.items()} == {
        "NONE": 0, "CFT": 1, "MULTIMEM": 2}
    assert core.NcclNvlsHostMode.DISABLE_TRANSPORT | core.NcclNvlsHostMode.DISABLE_SYMMETRIC_MULTIMEM == 3
    assert core.NcclCftTeamMode.HIER_LSA == 2 and core.NcclCftCap.MULTIMEM == 2
    assert core.WindowFlag.GIN_ONLY == 4 and core.WindowFlag.CFT_COUNTED == 8
    assert core.NcclGinType.EFA_GDA == 5 and core.NcclGinConnectionType.CUSTOM_STRIDE == 3
    assert core.NcclGinConnectionType.CUSTOM_ARRAY == 4
    for name in ("NcclHostCftMode", "NcclNvlsHostMode", "NcclCftTeamMode", "NcclCftCap",
                 "NcclGinType", "NcclGinConnectionType"):
        assert name in core.__all__
        cls = getattr(core, name)
        assert cls.__name__ == name  # reprs read as nccl4py 0.6's
        assert all(repr(m).startswith(f"<{name}.") for m in cls)


@pytest.mark.parametrize("family,version,value,name", [
    ("nccl", 23203, 4, "GPI"),
    ("nccl", 23203, 5, "EFA_GDA"),
    ("nccl", 23100, 5, "EFA_GDA"),
    ("nccl", 23007, 4, "GPI"),
    ("nccl", 23007, 5, "UNKNOWN_5"),   # 2.30.7 has no type 5
    ("nccl", 23004, 4, "UNKNOWN_4"),   # nor 2.30.4 type 4
    ("nccl", 23203, 3, "GDAKI"),
    ("nccl", 23203, 6, "UNKNOWN_6"),   # the count sentinel is no transport
    ("rccl", 23004, 4, "ROCSHMEM"),
    ("rccl", 23004, 5, "ANVIL"),
    ("rccl", 23004, 2, "PROXY"),
    ("rccl", 23004, 9, "UNKNOWN_9"),
    ("host", 23203, 5, "EFA_GDA"),
])
def test_gin_type_decoded_for_the_loaded_family(family, version, value, name):
    t = decode_gin_type(value, family, version)
    assert t.name == name
    assert t == value and int(t) == value and repr(t).endswith(f": {value}>")


def test_unknown_values_never_raise_but_wrong_types_do():
    assert b.GinType(42).name == "UNKNOWN_42" and b.GinType(42) == 42
    with pytest.raises(ValueError):
        b.GinType("GPI")


def test_communicator_decodes_with_the_loaded_library(recording_stub):
    # The stub reports gin_type 5 and railed_gin_type 4 (see tools/gen/stub.py).
    from nccl import _nccl

    family, version = _nccl.library_family(), _nccl.get_version()
    comm = core.Communicator(0x1000)
    try:
        expect = decode_gin_type(5, family, version)
        assert comm.gin_type == 5 and comm.gin_type.name == expect.name
        assert comm.railed_gin_type == 4
    finally:
        comm._set_ptr(0)
