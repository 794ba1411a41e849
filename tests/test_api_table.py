"""The API table itself: every entry's C signature agrees with a real NCCL
header when one is on the machine, and the host backend exports exactly the
entries the table says it implements (tests/test_generator.py: the generated
files are current)."""
from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
from pathlib import Path

from gen import api as gen_api
import pytest

from conftest import REAL_NCCL, ROOT, nccl_header_text, nccl_include_dir


def test_the_host_backend_exports_what_the_table_says():
    lib_path = ROOT / "nccl" / "_lib" / "libnccl4py_host.so"
    if not lib_path.exists():
        import nccl

        lib_path = Path(nccl.__file__).parent / "_lib" / "libnccl4py_host.so"
    lib = ctypes.CDLL(str(lib_path))
    for e in gen_api.parse_table():
        for sym in e.symbols:
            assert hasattr(lib, sym) == e.host, (sym, "flag host" if e.host else "no flag host")


@pytest.mark.parametrize("line, error", [
    ("ncclX | x | 2.3.5 | status | host | int a", "expected 7 columns"),
    ("ncclX | x | 2.3.5 | long | host | int a | s", "unknown return kind"),
    ("ncclX | x | 2.3.5 | status | gpu | int a | s", "unknown flags"),
    ("ncclX | x | 2.3.5 | status | - | int a |", "summary"),
    ("ncclX | x | 2.3.5 | status | - | float a | s", "bad parameter"),
    ("ncclX | x | 2.3.5 | status | - | int a? | s", "not an out kind"),
    ("ncclX | x | 2.3.5 | status | - | out_int a?, out_ptr b? | s", "at most one"),
    ("ncclX | x | 2.3.5 | cstr | - | out_int a | s", "need a status return"),
    ("ncclX | x | 2.3.5 | status | - | props p | s", "written p?"),
    ("ncclX | x | 2.3.5 | status | - | int_array a | s", "needs its length"),
    ("ncclX | x | 2.3.5 | status | - | int_array a[n] | s", "no parameter n"),
    ("ncclX | x | 2.3.5 | status | - | size n, int_array a[n] | s", "must be an int"),
    ("ncclX | x | 2.3.5 | status | - | int_array a[n]=None, int n | s", "must be trailing"),
])
def test_bad_table_lines_are_refused(line, error):
    with pytest.raises(SystemExit, match=re.escape(error)):
        gen_api.parse_entry(line, "test")


def test_table_entries_are_unique_and_well_formed():
    table = gen_api.parse_table()
    names = [s for e in table for s in e.symbols]
    assert len(names) == len(set(names))
    assert len({e.pyname for e in table}) == len(table)
    required = {"ncclBcast", "ncclCommInitRankConfig", "ncclCommInitAll", "ncclMemAlloc",
                "ncclMemFree", "ncclGroupSimulateEnd", "ncclCommWindowRegister",
                "ncclDevCommCreate", "ncclAllReduceWithBias", "ncclAllToAllv"}
    assert required <= set(names)


def _norm(t: str) -> str:
    t = re.sub(r"\bconst\b", "", t)
    return re.sub(r"\s+", "", t)


def _header_prototypes(text: str) -> dict[str, list[str]]:
    protos = {}
    for m in re.finditer(r"(?:ncclResult_t|const\s+char\s*\*|\bint|\bvoid|ncclTeam_t)\s*"
                         r"(nccl[A-Za-z0-9]+)\s*\(([^;{)]*)\)\s*;", text):
        name, params = m.group(1), m.group(2).strip()
        if "&" in params:  # a C++ overload of device code
            continue
        if params in ("", "void"):
            protos[name] = []
            continue
        types = []
        for p in params.split(","):
            p = p.split("=")[0].strip()  # a C++ default argument
            p = re.sub(r"\[\s*\]$", "*", re.sub(r"\s*\[\s*\]\s*$", "[]", p))
            t = re.sub(r"[A-Za-z_][A-Za-z0-9_]*\s*(\[\])?$", "", p).strip() or p
            types.append(_norm(t + ("*" if p.endswith("[]") else "")))
        protos.setdefault(name, types)
    return protos


@REAL_NCCL
def test_signatures_match_the_real_header():
    protos = _header_prototypes(nccl_header_text())
    checked = 0
    for e in gen_api.parse_table():
        if e.name not in protos:
            continue
        ours = [_norm(p.ctype) for p in e.params]
        assert ours == protos[e.name], (e.name, ours, protos[e.name])
        checked += 1
    # everything but the RCCL-only entries is declared by NCCL's headers
    assert checked >= len(gen_api.parse_table()) - 2, checked


@REAL_NCCL
def test_every_function_the_real_library_exports_is_in_the_table():
    """The table lists every public function of the installed libnccl (the
    nvidia-nccl wheel): nothing NCCL exports is missing from nccl.bindings."""
    inc = nccl_include_dir()
    if inc is None or shutil.which("nm") is None:
        pytest.skip("no nvidia-nccl wheel or no nm")
    lib = inc.parent / "lib" / "libnccl.so.2"
    out = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True,
                         text=True, check=True).stdout
    exported = {line.split()[-1] for line in out.splitlines() if line.split()[-1:]
                and line.split()[-1].startswith("nccl")}
    internal = {"ncclResetDebugInitInternal"}  # exported, declared in no public header
    ours = {s for e in gen_api.parse_table() for s in e.symbols}
    assert exported - internal - ours == set()
    assert len(exported) >= 55
