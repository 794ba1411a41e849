"""Host backend: its NCCL 2.32 functions have NCCL 2.32.3's prototypes and
struct layouts, and what it does not implement is not exported."""
from __future__ import annotations

import ctypes
import subprocess

import pytest

from host_ctypes import LAYOUT_PROBE, gcc, host_path, real_headers
from test_host_collectives import host_available

pytestmark = pytest.mark.skipif(not host_available(), reason="host backend not built")


def test_other_nccl_2_32_functions_stay_absent():
    """What has no meaning on host memory is not exported, so the bindings
    report the function as missing."""
    lib = ctypes.CDLL(host_path())
    for name in ("ncclAllReduceConfig", "ncclTeamRail", "ncclParamDumpAll"):
        assert hasattr(lib, name), name
    for name in ("ncclTeamCft", "ncclTeamCftMultimem", "ncclSetEncryption",
                 "ncclGetMultimemDevicePointer", "ncclGetMultimemDeviceLeInfo",
                 "ncclGetCftDeviceLeInfo", "ncclGetPeerDeviceLeInfo",
                 "ncclLsaBarrierCreateRequirement", "ncclGinBarrierCreateRequirement",
                 "ncclLLA2ACalcSlots", "ncclLLA2ACreateRequirement",
                 "ncclGinOutboxCreateRequirement", "ncclGinInboxA2ACreateRequirement"):
        assert not hasattr(lib, name), name




def test_declarations_are_those_of_nccl_2_32_3(tmp_path):
    """api_232.h redeclares each function after NCCL's own headers: a
    prototype that differs does not compile."""
    inc = real_headers(tmp_path)
    body = ("#include <nccl.h>\n#include <nccl_device/host.h>\n"
            "#define NCCL4PY_NCCL_API_H /* NCCL's own types instead of ours */\n"
            '#include "api_232.h"\n%s\nint main(void) { return 0; }\n')
    p = gcc(tmp_path, "decls", body % "", inc)
    assert p.returncode == 0, p.stderr[-3000:]
    # the check can fail: a prototype that differs is an error
    wrong = "int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, long rank);"
    p = gcc(tmp_path, "decls_wrong", body % wrong, inc)
    assert p.returncode != 0 and "conflicting types" in p.stderr


def test_layouts_are_those_of_nccl_2_32_3(tmp_path):
    inc = real_headers(tmp_path)
    theirs = gcc(tmp_path, "theirs", "#include <nccl.h>\n#include <nccl_device/host.h>\n"
                  + LAYOUT_PROBE, inc)
    ours = gcc(tmp_path, "ours", '#include "api_232.h"\n' + LAYOUT_PROBE)
    assert theirs.returncode == 0, theirs.stderr[-3000:]
    assert ours.returncode == 0, ours.stderr[-3000:]
    out = [subprocess.run([str(tmp_path / n)], capture_output=True, text=True,
                          timeout=60).stdout for n in ("theirs", "ours")]
    assert "ncclCollConfig_t 72 8" in out[0] and "ncclTeam_t 12 4" in out[0]
    assert out[1] == out[0]
