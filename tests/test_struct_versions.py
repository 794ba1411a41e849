"""A versioned struct reaches each library in that library's own layout.

The recording stub poses as NCCL 2.28 ... 2.32.7 and RCCL 2.30.4 (its own
ncclGetVersion; named librccl.so for RCCL) and records the bytes it gets:
the size and version of the layout that library knows, the caller's object
left as it was, and a field the library's layout lacks refused when set.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import build_stub, clean_env, run_python

VERSION_C = """
EXPORT ncclResult_t ncclGetVersion(int *version) { *version = POSE_VERSION; return ncclSuccess; }
"""

CHILD = r"""
import json, ctypes
import nccl.bindings as b
from nccl._errors import NcclInvalid
stub = ctypes.CDLL(b.get_library_path())
stub.nccl4pyStubLastCall.restype = ctypes.c_char_p
stub.nccl4pyStubSetDeref(1)
out = {}

def fields():
    rec = stub.nccl4pyStubLastCall().decode().split(" ")
    return dict(f.split("=", 1) for f in rec[1:])

def header(hexbytes):
    raw = bytes.fromhex(hexbytes)
    return int.from_bytes(raw[:8], "little"), int.from_bytes(raw[12:16], "little")

cfg = b.Config()
cfg.blocking = 0
before = bytes(cfg)
b.comm_init_rank_config(2, bytes(128), 0, cfg)
out["config"] = header(fields()["*config"])
out["config_blocking"] = int.from_bytes(bytes.fromhex(fields()["*config"])[16:20], "little", signed=True)
out["object_unchanged"] = bytes(cfg) == before
req = b.DevCommRequirements()
req.lsa_barrier_count = 2
b.dev_comm_create(0x1000, req)
out["reqs"] = header(fields()["*reqs"])
props = b.comm_query_properties(0x1000)
out["props_rank"] = props.rank
out["props_header"] = [props.size_, props.version]
for name, value in (("nvls_host_mode", 1), ("graph_stream_ordering", 1), ("num_rma_sig", 4)):
    c = b.Config()
    setattr(c, name, value)
    try:
        b.comm_init_rank_config(2, bytes(128), 0, c)
        out[name] = "ok"
    except NcclInvalid as e:
        out[name] = str(e)
# nccl.core's NCCLConfig writes graph_stream_ordering into the struct (not dropped)
import nccl.core as nc
try:
    b.comm_init_rank_config(2, bytes(128), 0, nc.NCCLConfig(graph_stream_ordering=0).ptr)
    raw = bytes.fromhex(fields()["*config"])
    out["core_graph_stream_ordering"] = int.from_bytes(raw[92:96], "little", signed=True)
except NcclInvalid as e:
    out["core_graph_stream_ordering"] = str(e)
coll = b.CollConfig()
coll.min_ctas = 2
before = bytes(coll)
b.all_reduce_config(1, 2, 3, 7, 0, 0x1000, 0, coll)
out["coll"] = header(fields()["*config"])
out["coll_min_ctas"] = int.from_bytes(bytes.fromhex(fields()["*config"])[24:28], "little")
out["coll_unchanged"] = bytes(coll) == before
coll.launch_completion_event_handle = 0x77
try:
    b.all_reduce_config(1, 2, 3, 7, 0, 0x1000, 0, coll.ptr)
    out["launch_completion_event"] = "ok"
except NcclInvalid as e:
    out["launch_completion_event"] = str(e)
r = b.DevCommRequirements()
r.cft_barrier_count = 1
try:
    b.dev_comm_create(0x1000, r)
    out["cft_barrier_count"] = "ok"
except NcclInvalid as e:
    out["cft_barrier_count"] = str(e)
ranks = (ctypes.c_int * 2)(1, 3)
r = b.DevCommRequirements()
r.gin_custom_array, r.gin_custom_array_count = ctypes.addressof(ranks), 2
try:
    b.dev_comm_create(0x1000, r)
    raw = bytes.fromhex(fields()["*reqs"])
    assert int.from_bytes(raw[120:128], "little") == ctypes.addressof(ranks)
    out["gin_custom_array"] = "ok" if int.from_bytes(raw[128:132], "little") == 2 else raw.hex()
except NcclInvalid as e:
    out["gin_custom_array"] = str(e)
d = b.DevCommRequirements()
out["reqs_new"] = [d.size_, d.version, d.gin_custom_array, d.gin_custom_array_count]
print(json.dumps(out))
"""

# (library name, version code, config (size, version), reqs (size, version) or None: as is,
#  which of nvls_host_mode / graph_stream_ordering / num_rma_sig / cft_barrier_count /
#  gin_custom_array pass).  2.32.7 is newer than the tables: it gets 2.32.6's layouts.
ALL = {"nvls_host_mode", "graph_stream_ordering", "num_rma_sig", "cft_barrier_count",
       "gin_custom_array"}
POSES = [
    ("libnccl.so.2", 23207, (120, 23206), (136, 23206), ALL),
    ("libnccl.so.2", 23206, (120, 23206), (136, 23206), ALL),
    ("libnccl.so.2", 23203, (120, 23203), (120, 23203), ALL - {"gin_custom_array"}),
    ("libnccl.so.2", 23102, (112, 23102), (120, 23102), {"graph_stream_ordering", "num_rma_sig",
                                                          "cft_barrier_count"}),
    ("libnccl.so.2", 23007, (96, 23007), (96, 23007), {"graph_stream_ordering"}),
    ("libnccl.so.2", 23004, (96, 23004), (96, 23004), set()),
    ("libnccl.so.2", 22903, (88, 22903), None, set()),
    ("libnccl.so.2", 22809, (80, 22809), None, set()),
    ("librccl.so", 23004, (96, 23004), (96, 23004), set()),
]
# what a new struct of the tables holds: NCCL 2.32.6's size and version
ABI = 23206


def coll_header(family, code):
    """The ncclCollConfig_t header a library gets: 64 bytes in 2.31 (no
    launchCompletionEvent), 72 from 2.32; others get it as it is."""
    if family == "NCCL" and code // 100 == 232:
        return (72, min(code, ABI))
    return {("NCCL", 231): (64, 23102)}.get((family, code // 100), (72, ABI))


@pytest.mark.parametrize("name,code,config,reqs,allowed", POSES,
                         ids=[f"{n.split('.')[0][3:]}-{c}" for n, c, *_ in POSES])
def test_versioned_structs_per_library(tmp_path, name, code, config, reqs, allowed):
    lib = build_stub(name, outdir=tmp_path / str(code), omit=("ncclGetVersion",),
                     extra_c=VERSION_C.replace("POSE_VERSION", str(code)))
    p = run_python(CHILD, clean_env(NCCL_LIBRARY=str(lib)), timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert tuple(out["config"]) == config
    assert out["config_blocking"] == 0          # the fields the caller set travel
    assert out["object_unchanged"]              # the caller's Config keeps its own header
    # a library older than every layout of the struct gets it as it is (and says no itself)
    assert tuple(out["reqs"]) == (reqs or (136, ABI))
    assert out["reqs_new"] == [136, ABI, 0, 0]  # a new struct is 2.32.6's, whatever is loaded
    assert out["props_rank"] == 3               # what the library wrote comes back ...
    assert out["props_header"] == [152, ABI]    # ... into the caller's own layout
    family = "RCCL" if name.startswith("librccl") else "NCCL"
    core = out["core_graph_stream_ordering"]
    if "graph_stream_ordering" in allowed:
        assert core == 0
    else:
        assert "graph_stream_ordering" in core and family in core, core
    coll = coll_header(family, code)
    assert tuple(out["coll"]) == coll and out["coll_min_ctas"] == 2 and out["coll_unchanged"]
    if coll[0] == 64:
        assert "CollConfig.launch_completion_event_handle is set" in \
            out["launch_completion_event"] and f"{family} 2.31.2" in out["launch_completion_event"]
    else:
        assert out["launch_completion_event"] == "ok"
    for field in sorted(ALL):
        if field in allowed or (field in ("cft_barrier_count", "gin_custom_array") and reqs is None):
            assert out[field] == "ok", field
        else:
            dotted = f"{code // 10000}.{code // 100 % 100}.{code % 100}"
            assert field in out[field] and f"{family} {dotted}" in out[field], out[field]


CORE_CHILD = r"""
import json, ctypes
import numpy as np
import nccl.bindings as b
import nccl.core as nc
from nccl._errors import NcclInvalid
stub = ctypes.CDLL(b.get_library_path())
stub.nccl4pyStubLastCall.restype = ctypes.c_char_p
stub.nccl4pyStubSetDeref(1)
out = {}
comm = nc.Communicator(0x7F0012345000)
x = np.ones(8, np.float32)
comm.allreduce(x, x, nc.SUM, config=nc.NCCLCollConfig(min_ctas=2, alg_selection="ring"))
rec = dict(f.split("=", 1) for f in stub.nccl4pyStubLastCall().decode().split(" ")[1:])
raw = bytes.fromhex(rec["*config"])
out["header"] = [int.from_bytes(raw[:8], "little"), int.from_bytes(raw[12:16], "little")]
out["min_ctas"] = int.from_bytes(raw[24:28], "little")
try:
    comm.allreduce(x, x, nc.SUM, config=nc.NCCLCollConfig(launch_completion_event=0x77))
    out["event"] = "ok"
except NcclInvalid as e:
    out["event"] = str(e)
print(json.dumps(out))
"""


@pytest.mark.parametrize("code,header", [(23206, [72, 23206]), (23203, [72, 23203]),
                                         (23102, [64, 23102])])
def test_core_config_reaches_the_library_in_its_layout(tmp_path, code, header):
    """Communicator's config= hands NCCL 2.31 its 64-byte ncclCollConfig_t."""
    lib = build_stub("libnccl.so.2", outdir=tmp_path, omit=("ncclGetVersion",), host_memory=True,
                     extra_c=VERSION_C.replace("POSE_VERSION", str(code)))
    p = run_python(CORE_CHILD, clean_env(NCCL_LIBRARY=str(lib)), timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["header"] == header and out["min_ctas"] == 2
    if code >= 23200:
        assert out["event"] == "ok"
    else:  # 2.31 has no launchCompletionEvent: refused, not dropped
        assert "launch_completion_event_handle is set" in out["event"] and "2.31.2" in out["event"]


NEWER_CHILD = r"""
import json, warnings
import nccl.bindings as b
from nccl import _diagnostics
out = {}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")  # once is nccl4py's doing, not the warnings registry's
    if MODE == "error":
        warnings.simplefilter("error", RuntimeWarning)
        try:
            b.get_version()
            out["first"] = "ok"
        except RuntimeWarning as e:
            out["first"] = str(e)
    out["version"] = b.get_version()
    b.comm_init_rank_config(2, bytes(128), 0, b.Config())
    out["reqs"] = b.DevCommRequirements().size_
out["warnings"] = [[w.category.__name__, str(w.message)] for w in caught]
print(json.dumps(out))
"""


@pytest.mark.parametrize("code,newer", [(23207, True), (23300, True), (23206, False)])
def test_a_newer_nccl_is_reported_once(tmp_path, code, newer):
    """An NCCL newer than the tables know (2.32.6) gets one RuntimeWarning naming
    both versions, and python -m nccl says so; 2.32.6 itself gets neither."""
    lib = build_stub("libnccl.so.2", outdir=tmp_path, omit=("ncclGetVersion",),
                     extra_c=VERSION_C.replace("POSE_VERSION", str(code)))
    env = clean_env(NCCL_LIBRARY=str(lib))
    dotted = f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    p = run_python(NEWER_CHILD.replace("MODE", '"record"'), env, timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["version"] == code and out["reqs"] == 136
    if newer:
        assert len(out["warnings"]) == 1, out["warnings"]
        category, message = out["warnings"][0]
        assert category == "RuntimeWarning"
        assert f"the loaded NCCL {dotted} ({lib})" in message and "NCCL 2.32.6" in message
    else:
        assert out["warnings"] == []
    # a warnings filter that makes it an error fails the first call only
    p = run_python(NEWER_CHILD.replace("MODE", '"error"'), env, timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    if newer:
        assert dotted in out["first"] and "2.32.6" in out["first"], out["first"]
    else:
        assert out["first"] == "ok"
    assert out["version"] == code and out["warnings"] == []
    # python -m nccl: a line under the loaded library, and the JSON's fields
    p = subprocess.run([sys.executable, "-m", "nccl"], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    line = "newer than NCCL 2.32.6, the newest whose struct layouts nccl4py knows"
    assert (line in p.stdout) == newer, p.stdout
    assert "Warning" not in p.stderr  # the report says it; no warning besides
    p = subprocess.run([sys.executable, "-m", "nccl", "--json"], env=env, capture_output=True,
                       text=True, timeout=120)
    lib_info = json.loads(p.stdout)["library"]
    assert lib_info["version"] == dotted and lib_info["known_version"] == "2.32.6"
    assert lib_info["newer_than_known"] == newer
