"""The API table itself: generated code is current, and every entry's C
signature agrees with a real NCCL header when one is on the machine."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import gen_api
import pytest

from conftest import ROOT, nccl_include_dir


def test_generated_files_are_current():
    p = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_api.py"), "--check"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


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


def _header_prototypes(incdir: Path) -> dict[str, list[str]]:
    text = "\n".join(p.read_text(errors="replace") for p in incdir.rglob("*.h"))
    text = re.sub(r"/\*.*?\*/|//[^\n]*", "", text, flags=re.S)
    protos = {}
    for m in re.finditer(r"(?:ncclResult_t|const\s+char\s*\*)\s*(nccl[A-Za-z0-9]+)\s*\(([^;{)]*)\)\s*;", text):
        name, params = m.group(1), m.group(2).strip()
        if params in ("", "void"):
            protos[name] = []
            continue
        types = []
        for p in params.split(","):
            p = p.strip()
            p = re.sub(r"\[\s*\]$", "*", re.sub(r"\s*\[\s*\]\s*$", "[]", p))
            t = re.sub(r"[A-Za-z_][A-Za-z0-9_]*\s*(\[\])?$", "", p).strip() or p
            types.append(_norm(t + ("*" if p.endswith("[]") else "")))
        protos.setdefault(name, types)
    return protos


def test_signatures_match_the_real_header():
    inc = nccl_include_dir()
    if inc is None:
        pytest.skip("no nccl.h installed (nvidia-nccl wheel)")
    protos = _header_prototypes(inc)
    checked = 0
    for e in gen_api.parse_table():
        if e.name not in protos:
            continue
        ours = [_norm(p.ctype) for p in e.params]
        assert ours == protos[e.name], (e.name, ours, protos[e.name])
        checked += 1
    # everything but the RCCL-only entries is declared by NCCL's headers
    assert checked >= len(gen_api.parse_table()) - 2, checked
