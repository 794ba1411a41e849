"""The types of the NCCL 2.31 / 2.32 functions (src/nccl_api_232.h) have
the layouts of NCCL 2.32.6 (the release the tables describe; 2.32.3's are
the same), and the API table's prototypes are its own: each generated
declaration compiles after NCCL's own header."""
from __future__ import annotations

import subprocess

from gen import api as gen_api

from conftest import REAL_NCCL
from host_ctypes import LAYOUT_PROBE, gcc, real_headers

pytestmark = REAL_NCCL

# Declared by NCCL 2.32.3's headers only for Windows (exported on Linux):
# their prototypes are checked against the header text by
# test_api_table.py::test_signatures_match_the_real_header.
WINDOWS_ONLY = {"ncclGinOutboxCreateRequirement", "ncclGinInboxA2ACreateRequirement"}
# What C++ spells without `struct` in those prototypes.
CXX_NAMES = ("typedef struct ncclTeam ncclTeam;\n"
             "typedef struct ncclDevResourceRequirements ncclDevResourceRequirements;\n"
             "typedef struct ncclGinOutboxHandle ncclGinOutboxHandle;\n"
             "typedef struct ncclGinInboxA2AHandle ncclGinInboxA2AHandle;\n")


def _declarations(extra: str = "") -> str:
    decls = [f"extern __typeof__(*({e.name}_fn)0) {e.name};"
             for e in gen_api.parse_table() if e.since != "rccl" and e.name not in WINDOWS_ONLY]
    return ("#define NCCL_OS_LINUX 1\n#include <nccl.h>\n#include <nccl_device/host.h>\n"
            "#define NCCL4PY_NCCL_API_H /* NCCL's own types instead of ours */\n" + CXX_NAMES
            + '#include "gen/api_table.h"\n' + "\n".join(decls) + "\n" + extra
            + "\nint main(void) { return 0; }\n")


def test_table_prototypes_are_those_of_nccl_2_32_3(tmp_path):
    inc = real_headers(tmp_path)
    p = gcc(tmp_path, "decls", _declarations(), inc)
    assert p.returncode == 0, p.stderr[-3000:]
    # the check can fail: a prototype that differs is an error
    wrong = "int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, long rank);"
    p = gcc(tmp_path, "decls_wrong", _declarations(wrong), inc)
    assert p.returncode != 0 and "conflicting types" in p.stderr


def test_host_declarations_compile_after_nccl_2_32_3(tmp_path):
    """src/gen/host_api_decls.h (what the host backend defines) after NCCL's header."""
    inc = real_headers(tmp_path)
    body = ("#include <nccl.h>\n#include <nccl_device/host.h>\n"
            "#define NCCL4PY_NCCL_API_H\n" + CXX_NAMES
            + '#include "gen/host_api_decls.h"\nint main(void) { return 0; }\n')
    p = gcc(tmp_path, "host_decls", body, inc)
    assert p.returncode == 0, p.stderr[-3000:]


def test_layouts_are_those_of_nccl_2_32_3(tmp_path):
    inc = real_headers(tmp_path)
    theirs = gcc(tmp_path, "theirs", "#include <nccl.h>\n#include <nccl_device/host.h>\n"
                  + LAYOUT_PROBE, inc)
    ours = gcc(tmp_path, "ours", '#include "nccl_api.h"\n' + LAYOUT_PROBE)
    assert theirs.returncode == 0, theirs.stderr[-3000:]
    assert ours.returncode == 0, ours.stderr[-3000:]
    out = [subprocess.run([str(tmp_path / n)], capture_output=True, text=True,
                          timeout=60).stdout for n in ("theirs", "ours")]
    assert "ncclCollConfig_t 72 8" in out[0] and "ncclTeam_t 12 4" in out[0]
    assert "ncclMultimemHandle_t 8 8" in out[0]
    assert out[1] == out[0]
    # a new CollConfig of the bindings holds NCCL_COLLCONFIG_INITIALIZER
    import nccl.bindings as b

    assert bytes(b.CollConfig()).hex() == out[0].strip().splitlines()[-1]
