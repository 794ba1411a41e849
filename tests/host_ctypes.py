"""Helpers for tests that call the host backend's NCCL 2.32 functions
directly through ctypes: NCCL 2.32.3's types as ctypes structures (PRELUDE,
run by each rank), ranks as processes, and gcc probes against NCCL's own
headers."""
from __future__ import annotations

import ctypes
import shutil
import subprocess

import pytest

from conftest import ROOT, clean_env, nccl_include_dir
from hostproc import Rank

# ctypes views of NCCL 2.32.3's types, shared by the test and its ranks.
PRELUDE = r"""
import ctypes, json, os, sys
import numpy as np
from nccl import _discovery

lib = ctypes.CDLL(_discovery.host_backend_path())
c = ctypes
P = c.c_void_p


class CollConfig(c.Structure):
    _fields_ = [("size", c.c_size_t), ("magic", c.c_uint), ("version", c.c_uint),
                ("ext", P), ("minCTAs", c.c_int), ("maxCTAs", c.c_int),
                ("nvlsCTAs", c.c_int), ("cgaClusterSize", c.c_int),
                ("algSelection", c.c_char_p), ("forceAlgSelection", c.c_int),
                ("CTAPolicy", c.c_int), ("userProfilerTag", c.c_uint64),
                ("launchCompletionEvent", P)]


class ConfigExt(c.Structure):
    _fields_ = [("next", P), ("vendorId", c.c_int), ("optionId", c.c_int), ("val", c.c_int64)]


class Team(c.Structure):
    _fields_ = [("nRanks", c.c_int), ("rank", c.c_int), ("stride", c.c_int)]


class UniqueId(c.Structure):
    _fields_ = [("internal", c.c_char * 128)]


UNDEF = -2**31


def initializer():
    # NCCL_COLLCONFIG_INITIALIZER of 2.32.3
    return CollConfig(c.sizeof(CollConfig), 0xcafebeef, 23203, None, UNDEF, UNDEF, UNDEF,
                      UNDEF, None, 1, UNDEF, 0, None)


lib.ncclGetLastError.restype = c.c_char_p
lib.ncclGetLastError.argtypes = [P]
lib.ncclCommInitRank.argtypes = [c.POINTER(P), c.c_int, UniqueId, c.c_int]
lib.ncclCommInitAll.argtypes = [c.POINTER(P), c.c_int, P]
lib.ncclCommDestroy.argtypes = lib.ncclCommAbort.argtypes = [P]
for f in ("ncclTeamWorld", "ncclTeamLsa", "ncclTeamRail"):
    getattr(lib, f).restype = Team
    getattr(lib, f).argtypes = [P]
for f in ("ncclTeamRankToWorld", "ncclTeamRankToLsa"):
    getattr(lib, f).restype = c.c_int
    getattr(lib, f).argtypes = [P, Team, c.c_int]


def last_error():
    return lib.ncclGetLastError(None).decode()
"""

def new_uid() -> str:
    lib = ctypes.CDLL(host_path())
    uid = (ctypes.c_char * 128)()
    assert lib.ncclGetUniqueId(uid) == 0
    return bytes(uid).hex()


def host_path() -> str:
    from nccl import _discovery

    return _discovery.host_backend_path()


def run_ranks(code: str, n: int, env=None, timeout: float = 240) -> list[dict]:
    uid = new_uid()
    ranks = [Rank(code, str(n), str(r), uid, env=env or clean_env()) for r in range(n)]
    try:
        out = [rk.event(timeout) for rk in ranks]
        for rk in ranks:
            assert rk.wait(timeout) == 0, rk.stderr()[-3000:]
        return out
    finally:
        for rk in ranks:
            rk.kill()


CUDA_STUBS = {
    "cuda_runtime.h": "#include <stddef.h>\ntypedef struct CUstream_st *cudaStream_t;\n"
                      "typedef struct CUevent_st *cudaEvent_t;\n",
    "cuda.h": "typedef int CUmemLocationType;\n",
    "cuda_fp16.h": "", "cuda_bf16.h": "", "cuda_fp8.h": "",
}

LAYOUT_PROBE = r"""
#include <stdio.h>
#define F(T, f) printf(#T "." #f " %zu %zu\n", offsetof(T, f), sizeof(((T *)0)->f));
int main(void)
{
    printf("ncclCollConfig_t %zu %zu\n", sizeof(ncclCollConfig_t), _Alignof(ncclCollConfig_t));
    F(ncclCollConfig_t, size) F(ncclCollConfig_t, magic) F(ncclCollConfig_t, version)
    F(ncclCollConfig_t, ext) F(ncclCollConfig_t, minCTAs) F(ncclCollConfig_t, maxCTAs)
    F(ncclCollConfig_t, nvlsCTAs) F(ncclCollConfig_t, cgaClusterSize)
    F(ncclCollConfig_t, algSelection) F(ncclCollConfig_t, forceAlgSelection)
    F(ncclCollConfig_t, CTAPolicy) F(ncclCollConfig_t, userProfilerTag)
    F(ncclCollConfig_t, launchCompletionEvent)
    printf("ncclConfigExt_t %zu\n", sizeof(ncclConfigExt_t));
    F(ncclConfigExt_t, next) F(ncclConfigExt_t, key) F(ncclConfigExt_t, val)
    printf("ncclTeam_t %zu %zu\n", sizeof(ncclTeam_t), _Alignof(ncclTeam_t));
    F(ncclTeam_t, nRanks) F(ncclTeam_t, rank) F(ncclTeam_t, stride)
    printf("ncclParamHandle_t %zu\n", sizeof(ncclParamHandle_t));
    printf("ncclMultimemHandle_t %zu %zu\n", sizeof(ncclMultimemHandle_t),
           _Alignof(ncclMultimemHandle_t));
    printf("ncclCftLeId %zu\n", sizeof(ncclCftLeId));
    printf("ncclCftTeamMode_t %zu %d\n", sizeof(ncclCftTeamMode_t), (int)NCCL_CFT_TEAM_HIER_LSA);
    ncclCollConfig_t init = NCCL_COLLCONFIG_INITIALIZER;
    const unsigned char *b = (const unsigned char *)&init;
    for (size_t i = 0; i < sizeof init; i++)
        printf("%02x", b[i]);
    printf("\n");
    return 0;
}
"""


def real_headers(tmp_path):
    """The include/ folder of the NCCL release the tables describe: the
    installed wheel's when it is that release, else that release's wheel from
    the tests' cache (nccl_releases.fetch), with CUDA stubs in tmp_path."""
    from nccl_releases import RELEASES, code_of, fetch

    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    inc = nccl_include_dir()
    if inc is None or f"NCCL_VERSION_CODE {code_of(RELEASES[-1])}" not in (inc / "nccl.h").read_text():
        inc = fetch(RELEASES[-1]) / "include"
    for name, text in CUDA_STUBS.items():
        (tmp_path / name).write_text(text)
    return inc


def gcc(tmp_path, name, source, *incs):
    src = tmp_path / f"{name}.c"
    src.write_text(source)
    args = ["gcc", "-std=c11",
            f"-I{tmp_path}", *[f"-I{i}" for i in incs], f"-I{ROOT / 'host'}",
            f"-I{ROOT / 'src'}", "-o", str(tmp_path / name), str(src)]
    return subprocess.run(args, capture_output=True, text=True, timeout=120)
