"""NCCLCollConfig and VendorOption: construction and checks with nccl4py 0.6's messages."""
from __future__ import annotations

import dataclasses

import pytest

from nccl.core import NcclInvalid
from nccl.core.coll_config import NCCLCollConfig, VendorOption, event_handle
from nccl.core.constants import CTAPolicy


def test_is_a_keyword_only_dataclass_with_0_6_fields():
    names = [f.name for f in dataclasses.fields(NCCLCollConfig)]
    assert names == ["min_ctas", "max_ctas", "nvls_ctas", "cga_cluster_size", "alg_selection",
                     "force_alg_selection", "cta_policy", "user_profiler_tag",
                     "launch_completion_event", "vendor_options"]
    with pytest.raises(TypeError):
        NCCLCollConfig(1)  # type: ignore[misc]
    c = NCCLCollConfig(min_ctas=2, alg_selection="ring")
    assert dataclasses.replace(c, max_ctas=4).max_ctas == 4
    assert dataclasses.asdict(c)["alg_selection"] == "ring"
    assert c == NCCLCollConfig(min_ctas=2, alg_selection="ring")
    # every field has its default on the class, as in nccl4py 0.6
    assert {f.name: getattr(NCCLCollConfig, f.name) for f in dataclasses.fields(NCCLCollConfig)} \
        == {f.name: () if f.name == "vendor_options" else None
            for f in dataclasses.fields(NCCLCollConfig)}


@pytest.mark.parametrize("kwargs,message", [
    ({}, "got none"),
    ({"int_value": 1, "str_value": "x"}, "got ['int_value', 'str_value']"),
])
def test_vendor_option_needs_exactly_one_value(kwargs, message):
    with pytest.raises(NcclInvalid, match="exactly one of int_value, str_value, raw_value") as e:
        VendorOption(1, 2, **kwargs)
    assert str(e.value).endswith(message)


@pytest.mark.parametrize("options,message", [
    (VendorOption(1, 2, int_value=3), "must be a sequence of VendorOption, got VendorOption"),
    ("abc", "must be a sequence of VendorOption, got str"),
    (5, "must be a sequence of VendorOption, got int"),
    ([VendorOption(1, 2, int_value=3), 7], "must contain VendorOption instances, got int"),
    ((VendorOption(1, 2, int_value=3), VendorOption(1, 2, raw_value=1)),
     r"Duplicate vendor option key \(vendor_id=1, option_id=2\); keys must be unique"),
])
def test_vendor_options_checked(options, message):
    with pytest.raises(NcclInvalid, match=message):
        NCCLCollConfig(vendor_options=options)


def test_checked_again_at_use():
    c = NCCLCollConfig()
    c.vendor_options = "oops"  # type: ignore[assignment]
    with pytest.raises(NcclInvalid, match="got str"):
        c._fields_to_write()


def test_fields_written():
    c = NCCLCollConfig(min_ctas=1, max_ctas=8, cta_policy=CTAPolicy.ZERO, force_alg_selection=False,
                       user_profiler_tag=2**63, alg_selection="tree,ring")
    assert c._fields_to_write() == {
        "min_ctas": 1, "max_ctas": 8, "cta_policy": 2, "force_alg_selection": 0,
        "user_profiler_tag": 2**63, "alg_selection": "tree,ring", "launch_completion_event": 0}
    assert NCCLCollConfig()._fields_to_write() == {"launch_completion_event": 0}


@pytest.mark.parametrize("kwargs,exc", [
    ({"min_ctas": "x"}, TypeError), ({"min_ctas": 1.5}, TypeError),
    ({"min_ctas": 2**40}, OverflowError), ({"user_profiler_tag": -1}, OverflowError),
    ({"alg_selection": b"ring"}, TypeError),
])
def test_bad_field_values(kwargs, exc):
    with pytest.raises(exc):
        NCCLCollConfig(**kwargs)._fields_to_write()


class _Event:
    def __init__(self, handle):
        self.handle = handle


def test_event_handles():
    assert event_handle(None) == 0 and event_handle(0x1234) == 0x1234
    assert event_handle(_Event(0x99)) == 0x99
    with pytest.raises(ValueError, match="null handle"):
        event_handle(0)
    with pytest.raises(RuntimeError, match="Event has been closed"):
        event_handle(_Event(0))
    for bad in (True, 1.5, "e", object()):
        with pytest.raises(TypeError, match="cuda.core.Event or a nonzero integer"):
            event_handle(bad)
