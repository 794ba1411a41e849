"""NCCLConfig: nccl4py 0.6's keyword-only dataclass that still behaves as the
0.2/0.3 object (``.ptr``, ``._lowpp``, ``FIELDS``, checks, assignment after
construction keeping the C struct in step)."""
from __future__ import annotations

import copy
import dataclasses
import pickle
import typing

import numpy as np
import pytest

import nccl.core as nc
from nccl import _nccl, bindings as b
from nccl.core import CTAPolicy, NcclHostCftMode, NcclInvalid, NcclNvlsHostMode

# nccl4py 0.6.0's fields, in its order
UPSTREAM_FIELDS = (
    "blocking", "cga_cluster_size", "min_ctas", "max_ctas", "net_name", "split_share",
    "traffic_class", "comm_name", "collnet_enable", "cta_policy", "shrink_share", "nvls_ctas",
    "n_channels_per_net_peer", "nvlink_centric_sched", "graph_usage_mode", "num_rma_ctx",
    "max_p2p_peers", "graph_stream_ordering", "launch_order_implicit", "num_rma_sig",
    "rma_eager_init", "host_cft_mode", "nvls_host_mode")
# its annotations where they are not `int | None`
UPSTREAM_TYPES = {
    **{n: bool for n in ("blocking", "split_share", "collnet_enable", "shrink_share",
                         "nvlink_centric_sched", "launch_order_implicit", "rma_eager_init")},
    "net_name": str, "comm_name": str, "cta_policy": CTAPolicy,
    "host_cft_mode": NcclHostCftMode, "nvls_host_mode": NcclNvlsHostMode}


def c_int(cfg: nc.NCCLConfig, field: str) -> int:
    """The int field as the C struct behind cfg holds it."""
    off = dict((f, o) for f, o, _ in _nccl._struct_layouts()["Config"][1])[field]
    return int.from_bytes(bytes(cfg._lowpp)[off:off + 4], "little", signed=True)


def test_a_keyword_only_dataclass_with_the_0_6_fields():
    fields = dataclasses.fields(nc.NCCLConfig)
    assert tuple(f.name for f in fields) == UPSTREAM_FIELDS == nc.NCCLConfig.FIELDS
    assert all(f.default is None and f.kw_only for f in fields)
    hints = typing.get_type_hints(nc.NCCLConfig)
    for name in UPSTREAM_FIELDS:
        assert hints[name] == UPSTREAM_TYPES.get(name, int) | None, name
    with pytest.raises(TypeError, match="positional"):
        nc.NCCLConfig(True)  # type: ignore[misc]
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        nc.NCCLConfig(bogus=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unhashable"):
        hash(nc.NCCLConfig())


def test_every_field_reaches_the_c_struct_and_unset_is_the_initializer():
    default = bytes(b.Config())
    assert bytes(nc.NCCLConfig()._lowpp) == default
    for name in UPSTREAM_FIELDS:
        if name in ("net_name", "comm_name"):
            cfg = nc.NCCLConfig(**{name: "x"})
            assert getattr(cfg._lowpp, name) == "x"
        else:
            cfg = nc.NCCLConfig(**{name: 1})
            assert c_int(cfg, name) == 1, name
        setattr(cfg, name, None)  # unset again: the initializer's bytes, a NULL string
        assert bytes(cfg._lowpp) == default, name


def test_graph_stream_ordering_is_written_not_dropped():
    cfg = nc.NCCLConfig(graph_stream_ordering=0, graph_usage_mode=1)
    assert cfg._lowpp.graph_stream_ordering == 0 and c_int(cfg, "graph_stream_ordering") == 0
    cfg.graph_stream_ordering = True
    assert c_int(cfg, "graph_stream_ordering") == 1 and cfg.graph_stream_ordering is True
    with pytest.raises(NcclInvalid, match="graph_stream_ordering"):
        cfg.graph_stream_ordering = 2
    assert c_int(cfg, "graph_stream_ordering") == 1  # a refused value changes nothing


def test_enum_fields_take_their_members():
    # NcclHostCftMode.DEFAULT is INT_MIN, the library's "unset"; the others are in range
    cfg = nc.NCCLConfig(host_cft_mode=NcclHostCftMode.DEFAULT,
                        nvls_host_mode=NcclNvlsHostMode.DISABLE,
                        cta_policy=CTAPolicy.EFFICIENCY | CTAPolicy.ZERO)
    assert c_int(cfg, "host_cft_mode") == -2**31
    assert c_int(cfg, "nvls_host_mode") == 0x7FFFFFFF
    assert c_int(cfg, "cta_policy") == 3
    cfg.host_cft_mode = b.HostCftMode.Fallback  # the low-level enum is the same values
    assert c_int(cfg, "host_cft_mode") == 3 and cfg.host_cft_mode is b.HostCftMode.Fallback
    with pytest.raises(NcclInvalid, match="host_cft_mode must be >= 0, got -5"):
        cfg.host_cft_mode = -5
    with pytest.raises(NcclInvalid, match="nvls_host_mode must be an int or NcclNvlsHostMode"):
        nc.NCCLConfig(nvls_host_mode="enable")
    with pytest.raises(NcclInvalid, match="nvls_host_mode must be >= 0"):
        # not a member: INT_MIN would decode as ENABLE through the IntFlag
        nc.NCCLConfig(nvls_host_mode=-2**31)


@pytest.mark.parametrize("kwargs,message", [
    ({"min_ctas": 0}, "min_ctas must be in 1..32, got 0"),
    ({"cga_cluster_size": 9}, "cga_cluster_size must be in 0..8, got 9"),
    ({"graph_usage_mode": 3}, "graph_usage_mode must be in 0..2, got 3"),
    ({"blocking": "yes"}, "blocking must be a bool"),
    ({"launch_order_implicit": 2}, "launch_order_implicit must be a bool"),
    ({"num_rma_sig": -1}, "num_rma_sig must be >= 0, got -1"),
    ({"comm_name": 5}, "comm_name must be a str"),
    ({"max_p2p_peers": True}, "max_p2p_peers must be an int"),
])
def test_checked_at_construction_and_assignment(kwargs, message):
    with pytest.raises(NcclInvalid, match=message):
        nc.NCCLConfig(**kwargs)
    cfg = nc.NCCLConfig()
    with pytest.raises(NcclInvalid, match=message):
        setattr(cfg, *next(iter(kwargs.items())))
    assert cfg == nc.NCCLConfig() and bytes(cfg._lowpp) == bytes(b.Config())


def test_replace_asdict_pickle_copy_keep_the_struct_in_step():
    cfg = nc.NCCLConfig(blocking=False, min_ctas=2, comm_name="c", launch_order_implicit=True,
                        host_cft_mode=NcclHostCftMode.ENABLE)
    other = dataclasses.replace(cfg, min_ctas=4, num_rma_sig=3)
    assert (other.min_ctas, other._lowpp.min_ctas, other._lowpp.num_rma_sig) == (4, 4, 3)
    assert other._lowpp.comm_name == "c" and other.ptr != cfg.ptr and cfg._lowpp.min_ctas == 2
    d = dataclasses.asdict(cfg)
    assert list(d) == list(UPSTREAM_FIELDS)
    assert d["host_cft_mode"] is NcclHostCftMode.ENABLE and d["nvls_host_mode"] is None
    assert nc.NCCLConfig(**d) == cfg
    for twin in (pickle.loads(pickle.dumps(cfg)), copy.deepcopy(cfg), copy.copy(cfg)):
        assert twin == cfg and twin.ptr != cfg.ptr
        assert [getattr(twin._lowpp, f) for f in UPSTREAM_FIELDS] == \
               [getattr(cfg._lowpp, f) for f in UPSTREAM_FIELDS]
    assert nc.NCCLConfig(min_ctas=2) != nc.NCCLConfig(min_ctas=3)
    assert nc.NCCLConfig(blocking=True) == nc.NCCLConfig(blocking=1)


def test_0_2_and_0_3_uses():
    cfg = nc.NCCLConfig(blocking=False)
    cfg.min_ctas = 4                     # 0.2: assignment after construction
    assert cfg._lowpp.min_ctas == 4 and cfg._lowpp.blocking == 0
    assert cfg.ptr == cfg._lowpp.ptr     # 0.2 .ptr, 0.3 ._lowpp.ptr
    del cfg.min_ctas
    assert cfg.min_ctas is None and cfg._lowpp.min_ctas == b.Config().min_ctas
    with pytest.raises(AttributeError, match="no field 'bogus'"):
        cfg.bogus = 1  # type: ignore[attr-defined]
    assert set(nc.NCCLConfig.FIELDS) == {f.name for f in dataclasses.fields(cfg)}


@pytest.mark.nccl(nranks=[2, 4])
def test_split_and_init_with_a_0_6_config(comm):
    cfg = nc.NCCLConfig(graph_stream_ordering=1, launch_order_implicit=True, num_rma_sig=2,
                        rma_eager_init=False, host_cft_mode=NcclHostCftMode.DEFAULT,
                        nvls_host_mode=NcclNvlsHostMode.ENABLE, comm_name="cfg-test")
    child = comm.split(0, comm.nranks - 1 - comm.rank, config=dataclasses.replace(cfg))
    x = np.full(4, comm.rank + 1, np.float32)
    child.allreduce(x, x, nc.SUM)
    assert child.rank == comm.nranks - 1 - comm.rank
    np.testing.assert_array_equal(x, np.full(4, comm.nranks * (comm.nranks + 1) / 2))
    child.destroy()
    # the low-level call of 0.2 programs takes .ptr, 0.3's ._lowpp.ptr
    for ptr in (cfg.ptr, cfg._lowpp.ptr):
        handle = b.comm_split(comm.ptr, 0, comm.rank, ptr)
        assert handle
        b.comm_destroy(handle)
