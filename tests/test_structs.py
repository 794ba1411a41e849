"""Struct layouts (sizes and offsets from the published ABI), initialiser
defaults, the buffer protocol, pickling and from_* constructors."""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

import nccl.bindings as b
from nccl._nccl import _struct_layouts
from conftest import REAL_NCCL, ROOT, cc, nccl_include_dir

# (sizeof, {field: offset}) on x86_64, from the NCCL 2.32.6 headers
EXPECTED = {
    "UniqueId": (128, {}),
    "Config": (120, {
        "size_": 0, "magic": 8, "version": 12, "blocking": 16, "cga_cluster_size": 20,
        "min_ctas": 24, "max_ctas": 28, "net_name": 32, "split_share": 40, "traffic_class": 44,
        "comm_name": 48, "collnet_enable": 56, "cta_policy": 60, "shrink_share": 64,
        "nvls_ctas": 68, "n_channels_per_net_peer": 72, "nvlink_centric_sched": 76,
        "graph_usage_mode": 80, "num_rma_ctx": 84, "max_p2p_peers": 88,
        "graph_stream_ordering": 92, "launch_order_implicit": 96, "num_rma_sig": 100,
        "rma_eager_init": 104, "host_cft_mode": 108, "nvls_host_mode": 112}),
    "SimInfo": (24, {"size_": 0, "magic": 8, "version": 12, "estimated_time": 16}),
    "CommProperties": (152, {
        "size_": 0, "magic": 8, "version": 12, "rank": 16, "n_ranks": 20, "cuda_dev": 24,
        "nvml_dev": 28, "device_api_support": 32, "multimem_support": 33, "gin_type": 36,
        "n_lsa_teams": 40, "host_rma_support": 44, "railed_gin_type": 48, "comm_hash": 56,
        "gin_min_stride": 64, "gin_connection_type": 68, "gin_support": 72,
        "dev_comm_runtime_version_size": 136, "cft_support": 144,
        "cft_multicast_support": 145, "cft_counted_support": 146}),
    "WaitSignalDesc": (16, {"op_cnt": 0, "peer": 4, "sig_idx": 8, "ctx": 12}),
    "DevCommRequirements": (136, {
        "world_gin_barrier_count": 88, "gin_strong_signals_required": 92,
        "gin_va_signals_required": 93, "gin_custom_stride": 96, "gin_type": 100,
        "use_runtime_version": 104, "cft_caps": 108, "cft_barrier_count": 112,
        "gin_custom_array": 120, "gin_custom_array_count": 128}),
    "CollConfig": (72, {
        "ext": 16, "min_ctas": 24, "max_ctas": 28, "nvls_ctas": 32, "cga_cluster_size": 36,
        "alg_selection": 40, "force_alg_selection": 48, "cta_policy": 52,
        "user_profiler_tag": 56, "launch_completion_event_handle": 64}),
    "EncryptionConfig": (32, {"mode": 16, "psk": 24}),
    "Team": (12, {"n_ranks": 0, "rank": 4, "stride": 8}),
    "MultimemHandle": (8, {"mc_base_ptr": 0}),
    "LsaBarrierHandle": (8, {"buf_handle": 0, "n_barriers": 4}),
    "GinBarrierHandle": (8, {"signal0": 0, "unused": 4}),
    "CftBarrierHandle": (8, {"buf_handle": 0, "n_barriers": 4}),
    "LLA2AHandle": (8, {"buf_handle": 0, "n_slots": 4}),
    "ResourceWindowVidmem": (16, {"lsa_flat_base": 0, "stride4g": 8, "mc_offset4k": 12}),
    "ConfigExt": (24, {"next": 0, "key": 8, "val": 16}),
    "ConfigExtKey": (8, {"vendor_id": 0, "option_id": 4}),
    "ConfigExtVal": (8, {"i": 0, "s": 0, "raw": 0}),
    "TeamRequirements": (32, {"next": 0, "team": 8, "multimem": 20, "out_multimem_handle": 24}),
    "DevComm": (248, {
        "magic": 0, "version": 4, "rank": 8, "n_ranks": 12, "n_ranks_rcp32": 16, "lsa_rank": 20,
        "lsa_size": 24, "lsa_size_rcp32": 28, "window_table": 32, "resource_window": 40,
        "resource_window_inlined": 48, "hybrid_dense_gin_barrier": 64, "lsa_multimem": 72,
        "lsa_barrier": 80, "rail_gin_barrier": 88, "gin_connection_count": 96,
        "backend_index": 97, "gin_net_device_types": 98, "gin_handles": 104,
        "gin_signal_count": 136, "gin_counter_count": 140, "gin_signal_shadows": 144,
        "gin_context_count": 152, "gin_connection_stride": 156, "gin_context_stride": 160,
        "gin_strong_legacy_signals": 164, "abort_flag": 168, "hybrid_lsa_barrier": 176,
        "hybrid_rail_gin_barrier": 184, "world_gin_barrier": 192,
        "gin_connection_stride_rcp32": 200, "cft_rank": 204, "cft_size": 208,
        "cft_multimem_rank": 212, "cft_multimem_size": 216, "cft_multimem_size_rcp32": 220,
        "uc_le_id": 224, "mc_le_id": 228, "cft_barrier": 232, "cft_multimem_barrier": 240}),
    "DevResourceRequirements": (56, {
        "next": 0, "buffer_size": 8, "buffer_align": 16, "out_buffer_handle": 24,
        "gin_signal_count": 32, "gin_counter_count": 36, "out_gin_signal_start": 40,
        "out_gin_counter_start": 48}),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_layout(name):
    size, offsets = EXPECTED[name]
    got_size, fields = _struct_layouts()[name]
    assert got_size == size
    assert len(bytes(getattr(b, name)())) == size
    got = {f: off for f, off, _ in fields}
    for field, off in offsets.items():
        assert got[field] == off, field


def test_numpy_dtypes_match():
    assert b.config_dtype.itemsize == 120
    assert b.comm_properties_dtype.fields["gin_support"][0].shape == (64,)
    assert b.comm_properties_dtype.fields["railed_gin_type"][1] == 48
    assert b.unique_id_dtype.itemsize == 128
    assert b.sim_info_dtype.fields["estimated_time"][1] == 16


# nccl4py 0.6.0's dtype names and their structs
UPSTREAM_DTYPES = {
    "unique_id_dtype": "UniqueId", "config_dtype": "Config", "sim_info_dtype": "SimInfo",
    "comm_properties_dtype": "CommProperties", "wait_signal_desc_dtype": "WaitSignalDesc",
    "dev_comm_requirements_dtype": "DevCommRequirements", "dev_comm_dtype": "DevComm",
    "coll_config_dtype": "CollConfig", "encryption_config_dtype": "EncryptionConfig",
    "team_dtype": "Team", "multimem_handle_dtype": "MultimemHandle",
    "lsa_barrier_handle_dtype": "LsaBarrierHandle", "gin_barrier_handle_dtype": "GinBarrierHandle",
    "cft_barrier_handle_dtype": "CftBarrierHandle", "ll_a2a_handle_dtype": "LLA2AHandle",
    "resource_window_vidmem_dtype": "ResourceWindowVidmem",
    "dev_resource_requirements_dtype": "DevResourceRequirements",
    "config_ext_dtype": "ConfigExt", "team_requirements_dtype": "TeamRequirements"}


def test_every_struct_has_its_dtype_by_name():
    """The dtype names are derived from the struct table: a struct added there
    has its dtype, named as nccl4py 0.6 names it."""
    from nccl.bindings import nccl as mod

    for dname, struct in UPSTREAM_DTYPES.items():
        assert mod._dtype_name(struct) == dname
    layouts = _struct_layouts()
    assert set(mod._DTYPE_NAMES.values()) == set(layouts)
    for dname, struct in mod._DTYPE_NAMES.items():
        assert getattr(b, dname).itemsize == layouts[struct][0], dname
    # every 0.6 name of a struct this build has resolves
    assert {d for d, s in UPSTREAM_DTYPES.items() if s in layouts} <= set(mod._DTYPE_NAMES)
    with pytest.raises(AttributeError):
        b.no_such_struct_dtype  # noqa: B018


def test_config_defaults():
    c = b.Config()
    assert (c.size_, c.magic, c.version) == (120, 0xCAFEBEEF, 23206)
    for f, _, kind in _struct_layouts()["Config"][1]:
        if kind == "i4":
            assert getattr(c, f) == -(2**31), f
    assert c.net_name == "" and c.comm_name == ""


def test_config_string_fields_keep_their_bytes():
    import ctypes

    c = b.Config()
    c.comm_name = "éq-" + "x" * 100
    addr = int.from_bytes(bytes(c)[48:56], "little")
    assert ctypes.string_at(addr).decode() == c.comm_name
    c.comm_name = None
    assert bytes(c)[48:56] == bytes(8)


def test_sim_info_and_properties_defaults():
    s = b.SimInfo()
    assert (s.size_, s.magic, s.version, s.estimated_time) == (24, 0x74685283, 23206, -1.0)
    p = b.CommProperties()
    assert (p.size_, p.magic, p.version) == (152, 0xCAFEBEEF, 23206)


def test_field_range_checks():
    c = b.Config()
    with pytest.raises(OverflowError):
        c.blocking = 2**31
    with pytest.raises(TypeError):
        c.blocking = 1.5
    with pytest.raises(TypeError):
        c.net_name = 5
    with pytest.raises(OverflowError):
        c.magic = -1


def test_unique_id_bytes_pickle_and_from_bytes():
    raw = bytes(range(128))
    u = b.UniqueId.from_bytes(raw)
    assert bytes(u) == raw
    assert memoryview(u).nbytes == 128
    v = pickle.loads(pickle.dumps(u))
    assert v == u and bytes(v) == raw and v.ptr != u.ptr
    with pytest.raises(ValueError):
        b.UniqueId.from_bytes(b"short")


def test_from_buffer_is_zero_copy_and_from_ptr_copies():
    buf = bytearray(16)
    d = b.WaitSignalDesc.from_buffer(buf)
    d.peer = 7
    assert buf[4] == 7
    e = b.WaitSignalDesc.from_ptr(d.ptr)
    assert e.peer == 7 and e.ptr != d.ptr
    f = b.WaitSignalDesc.from_ptr(d.ptr, owner=buf)
    assert f.ptr == d.ptr
    ro = b.WaitSignalDesc.from_ptr(d.ptr, readonly=True)
    with pytest.raises(ValueError, match="read-only"):
        ro.peer = 1
    with pytest.raises(ValueError):
        b.WaitSignalDesc.from_ptr(0)
    with pytest.raises(ValueError):
        b.WaitSignalDesc.from_buffer(bytearray(15))
    with pytest.raises(TypeError):
        b.WaitSignalDesc.from_buffer(3)
    # a read-only buffer gives a read-only struct
    r = b.WaitSignalDesc.from_buffer(bytes(16))
    with pytest.raises(ValueError):
        r.ctx = 1


def test_structs_with_pointers_refuse_pickling():
    with pytest.raises(pickle.PicklingError):
        pickle.dumps(b.Config())


def test_pointer_box():
    box = b.PointerBox()
    assert box.ptr == 0 and not box
    box.ptr = 0x1234
    assert int(box) == 0x1234 and bool(box) and f"{box:x}" == "1234"
    import ctypes

    assert ctypes.c_ssize_t.from_address(box.address).value == 0x1234
    assert "0x1234" in repr(b.PointerBox(0x1234))


NCCL_HEADER_PROBE = r"""
#include <stddef.h>
#include <stdio.h>
#include <nccl.h>
int main(void) {
    printf("Config %zu %zu %zu\n", sizeof(ncclConfig_t), offsetof(ncclConfig_t, nvlinkCentricSched),
           offsetof(ncclConfig_t, commName));
    printf("SimInfo %zu %zu\n", sizeof(ncclSimInfo_t), offsetof(ncclSimInfo_t, estimatedTime));
    printf("UniqueId %zu\n", sizeof(ncclUniqueId));
    printf("WaitSignalDesc %zu %zu\n", sizeof(ncclWaitSignalDesc_t), offsetof(ncclWaitSignalDesc_t, ctx));
    return 0;
}
"""


@REAL_NCCL
def test_layout_against_real_header(tmp_path):
    """When a real nccl.h (and CUDA runtime headers) are present, a C probe
    compiled against it agrees with our layout for the fields both share."""
    inc = nccl_include_dir()
    cuda_inc = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "include"
    if inc is None or not (cuda_inc / "cuda_runtime.h").exists():
        pytest.skip("no nccl.h with CUDA runtime headers on this machine")
    src = tmp_path / "probe.c"
    src.write_text(NCCL_HEADER_PROBE)
    exe = tmp_path / "probe"
    subprocess.run([cc(), f"-I{inc}", f"-I{cuda_inc}", "-o", str(exe), str(src)], check=True)
    out = dict((l.split()[0], [int(x) for x in l.split()[1:]])
               for l in subprocess.run([str(exe)], capture_output=True, text=True,
                                       check=True).stdout.splitlines())
    layouts = _struct_layouts()
    cfg = {f: o for f, o, _ in layouts["Config"][1]}
    # newer headers may grow the config; the shared prefix must agree
    assert out["Config"][0] >= 80
    assert out["Config"][1] == cfg["nvlink_centric_sched"] and out["Config"][2] == cfg["comm_name"]
    assert out["SimInfo"] == [24, 16]
    assert out["UniqueId"] == [128]
    assert out["WaitSignalDesc"] == [16, 12]


def test_upstream_0_6_names_resolve():
    """Every public name of nccl4py 0.6.0's nccl.bindings.nccl (classes with
    their public attributes) exists here; the struct dtypes are module-level
    attributes built on first use."""
    import nccl.bindings.nccl as m

    path = Path(__file__).parent / "data" / "upstream-0.6.0-bindings-names.txt"
    names = [n for n in path.read_text().splitlines() if n and not n.startswith("#")]
    assert len(names) > 500

    def resolves(name):
        obj = m
        for part in name.split("."):
            if not hasattr(obj, part):
                return False
            obj = getattr(obj, part)
        return True

    # upstream's list was taken on a newer Python: attributes that Python's own
    # built-in bases gained later (BaseException.add_note, 3.11) are not ours
    newer_builtins = {"add_note": (3, 11)}
    assert [n for n in names if sys.version_info >= newer_builtins.get(n.rsplit(".", 1)[-1], (3,))
            and not resolves(n)] == []


def test_nested_fields_are_views_of_the_outer_struct():
    t = b.TeamRequirements()
    t.team.n_ranks, t.team.rank = 4, 1
    assert bytes(t)[8:16] == (4).to_bytes(4, "little") + (1).to_bytes(4, "little")
    team = b.Team()
    team.stride = 3
    t.team = team
    assert (t.team.n_ranks, t.team.stride) == (0, 3)
    with pytest.raises(TypeError, match="team must be a Team"):
        t.team = b.MultimemHandle()
    t.multimem = True
    assert t.multimem is True and bytes(t)[20] == 1


def test_config_ext_string_survives_its_view():
    import ctypes
    import gc

    e = b.ConfigExt()
    e.key.vendor_id, e.key.option_id = 7, 2
    e.val.s = "vendor-" + "x" * 50
    gc.collect()
    addr = int.from_bytes(bytes(e)[16:24], "little")
    assert ctypes.string_at(addr).decode() == "vendor-" + "x" * 50
    assert e.val.s == "vendor-" + "x" * 50
    e.val.i = 5  # the union's other member: the string is no longer there
    assert e.val.s is None and e.val.i == 5
    assert b.config_ext_dtype.itemsize == 24


def _devcomm(version, fill):
    raw = bytearray(248)
    raw[0:4] = (0xCAFEBEEF).to_bytes(4, "little")
    raw[4:8] = version.to_bytes(4, "little")
    for off, value in fill.items():
        raw[off:off + 4] = value.to_bytes(4, "little")
    return b.DevComm.from_bytes(bytes(raw))


def test_dev_comm_read_in_the_layout_of_its_version():
    # 2.31+ layout: lsaBarrier at 80, ginContextCount at 152, cftRank at 204
    d = _devcomm(23203, {8: 2, 80: 11, 84: 5, 152: 4, 204: 9})
    assert (d.rank, d.lsa_barrier.buf_handle, d.lsa_barrier.n_barriers) == (2, 11, 5)
    assert (d.gin_context_count, d.cft_rank) == (4, 9)
    # NCCL 2.30 layout (240 bytes): lsaBarrier at 128, ginContextCount at 200, no cft fields
    for version in (23004, 23007):
        d = _devcomm(version, {8: 2, 128: 11, 132: 5, 200: 4, 204: 0x100})  # byte 205: 1
        assert (d.rank, d.lsa_barrier.buf_handle, d.lsa_barrier.n_barriers) == (2, 11, 5)
        assert d.gin_context_count == 4
        assert d.cft_rank is None and d.resource_window_inlined is None
        assert d.gin_strong_legacy_signals is (True if version == 23007 else None)
    from nccl._errors import NcclInvalid

    with pytest.raises(NcclInvalid, match="layout of version 22907"):
        _devcomm(22907, {}).rank
    fresh = b.DevComm()  # not filled by a library: version 0, the current layout
    assert fresh.rank == 0 and fresh.gin_handles == (0, 0, 0, 0)
