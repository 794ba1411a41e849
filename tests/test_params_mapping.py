"""nccl.core.params: a read-only Mapping over the library's parameter API."""
from __future__ import annotations

from collections.abc import Mapping

import pytest

import nccl.core as nc


@pytest.fixture
def fake_library(monkeypatch):
    from nccl import bindings

    table = {"NCCL_A": "1", "NCCL_B": "x"}

    def get(key):
        if key not in table:
            raise KeyError(key)
        return table[key]

    monkeypatch.setattr(bindings, "param_get_parameter", get, raising=False)
    monkeypatch.setattr(bindings, "param_get_all_keys", lambda: list(table), raising=False)
    return table


def test_mapping_over_the_library(fake_library):
    p = nc.params
    assert isinstance(p, Mapping)
    assert p["NCCL_A"] == "1" and "NCCL_B" in p and "NCCL_C" not in p
    assert p.get("NCCL_C", "d") == "d" and sorted(p) == ["NCCL_A", "NCCL_B"] and len(p) == 2
    fake_library["NCCL_C"] = "late"  # a subsystem registering later shows up
    assert len(p) == 3 and dict(p)["NCCL_C"] == "late"
    with pytest.raises(TypeError):
        p["NCCL_A"] = "2"  # type: ignore[index]


def test_names_of_0_6():
    assert "params" in nc.__all__ and "dump_params" in nc.__all__
    assert callable(nc.dump_params)
