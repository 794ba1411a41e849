"""The NCCL releases nccl4py is tested with, side by side: each release's
wheel (nvidia-nccl-cu13, downloaded once into a cache) against the tables.

For each release its headers, compiled, give the size and field offsets of
every versioned struct, which must be what the N4P_LAYOUT line the loader
picks for that release says (src/structs.def), and its enums must be ours;
its libnccl.so.2, loaded with NCCL_LIBRARY, must report that version, draw
no warning, and get a DevCommRequirements in its own layout (a field it
lacks refused, one it knows passed on).  The first and last of the releases
are the range that ``pip install 'nccl4py[cu13]'`` picks from, and the last
is the release the tables describe.
"""
from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, clean_env, run_python
from host_ctypes import CUDA_STUBS
from nccl_releases import RELEASES, code_of, fetch

HEAVY = pytest.mark.heavy("the NCCL releases side by side: three nvidia-nccl-cu13 wheels, "
                          "~700 MB downloaded once into ~/.cache/nccl4py-tests")


@pytest.fixture(scope="module", params=RELEASES)
def release(request):
    return request.param, fetch(request.param)


# ------------------------------------------------------------ the tables' facts

def _tables():
    from gen.common import macro_calls
    from gen.enums import parse_enums
    from gen.structs import parse_structs

    structs = {s.ctype: s for s in parse_structs()}
    layouts = [(a[0], a[1], int(a[2]), int(a[3]), int(a[4]))
               for m, a in macro_calls(ROOT / "src" / "structs.def") if m == "N4P_LAYOUT"]
    return structs, layouts, parse_enums()


def layout_for(layouts, ctype: str, code: int):
    """(size, known) of the line the loader picks for NCCL `code`, or None."""
    for t, family, since, size, known in layouts:  # newest first per struct
        if t == ctype and family == "NCCL" and code >= since:
            return size, known
    return None


# ------------------------------------------------------------ the headers' facts

def header_text(inc: Path) -> str:
    text = "\n".join(p.read_text(errors="replace") for p in sorted(inc.rglob("*.h")))
    return re.sub(r"/\*.*?\*/|//[^\n]*", "", text, flags=re.S)


def struct_body(text: str, ctype: str) -> str | None:
    m = re.search(r"typedef\s+struct\s*\w*\s*\{([^{}]*)\}\s*%s\s*;" % ctype, text)
    if m is None:
        tag = re.search(r"typedef\s+struct\s+(\w+)\s+%s\s*;" % ctype, text)
        m = tag and re.search(r"struct\s+%s\s*\{([^{}]*)\}\s*;" % tag.group(1), text)
    return m.group(1) if m else None


def enum_members(text: str, ctype: str) -> dict[str, int] | None:
    m = re.search(r"typedef\s+enum\s*\w*\s*\{([^{}]*)\}\s*%s\s*;" % ctype, text)
    if m is None:
        return None
    out: dict[str, int] = {}
    nxt: int | None = 0
    for item in filter(None, (x.strip() for x in m.group(1).split(","))):
        name, _, value = (s.strip() for s in item.partition("="))
        if value:  # a literal, or an expression this does not evaluate (skipped)
            nxt = int(value, 0) if re.fullmatch(r"-?(0x[0-9a-fA-F]+|\d+)", value) else None
        if nxt is not None:
            out[name] = nxt
            nxt += 1
    return out


def probe(tmp_path: Path, inc: Path, structs, layouts, code: int, text: str):
    """{struct: (sizeof, {field: (offset, size)})} of the release's headers,
    for each versioned struct that has a layout line for it."""
    lines = ["#define NCCL_OS_LINUX 1", "#include <stdio.h>", "#include <stddef.h>",
             "#include <nccl.h>"]
    if (inc / "nccl_device" / "host.h").exists():
        lines.append("#include <nccl_device/host.h>")
    lines.append("int main(void) {")
    wanted = []
    for ctype in sorted({t for t, *_ in layouts}):
        body = struct_body(text, ctype)
        if body is None or layout_for(layouts, ctype, code) is None:
            continue
        wanted.append(ctype)
        lines.append(f'printf("{ctype} - %zu 0\\n", sizeof({ctype}));')
        for f in structs[ctype].fields:
            if re.search(r"\b%s\s*(;|\[)" % re.escape(f.cname), body):
                lines.append(f'printf("{ctype} {f.pyname} %zu %zu\\n", offsetof({ctype}, '
                             f'{f.cname}), sizeof((({ctype} *)0)->{f.cname}));')
        # a member of the release our table lacks would be missed above: count them
        members = len(re.findall(r";", body))
        lines.append(f'printf("{ctype} #members {members} 0\\n");')
    lines.append("return 0; }")
    for name, stub in CUDA_STUBS.items():
        (tmp_path / name).write_text(stub)
    src = tmp_path / "probe.c"
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "probe"
    cc = subprocess.run(["gcc", "-std=c11", f"-I{tmp_path}", f"-I{inc}", "-o", str(exe), str(src)],
                        capture_output=True, text=True, timeout=120)
    assert cc.returncode == 0, cc.stderr[-3000:]
    out: dict = {t: [0, {}, 0] for t in wanted}
    for line in subprocess.run([str(exe)], capture_output=True, text=True, timeout=60,
                               check=True).stdout.splitlines():
        ctype, name, a, b = line.split()
        if name == "-":
            out[ctype][0] = int(a)
        elif name == "#members":
            out[ctype][2] = int(a)
        else:
            out[ctype][1][name] = (int(a), int(b))
    return out


@HEAVY
def test_layout_lines_are_the_release_s_own(tmp_path, release):
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    name, tree = release
    inc = tree / "include"
    text = header_text(inc)
    code = int(re.search(r"#\s*define\s+NCCL_VERSION_CODE\s+(\d+)", text).group(1))
    assert code == code_of(name)
    structs, layouts, enums = _tables()
    found = probe(tmp_path, inc, structs, layouts, code, text)
    assert "ncclConfig_t" in found  # every release has one, and a line for it
    for ctype, (size, fields, members) in found.items():
        line_size, known = layout_for(layouts, ctype, code)
        ours = {f.pyname: f.offset for f in structs[ctype].fields}
        assert size == line_size, (name, ctype)
        assert len(fields) == members, (name, ctype, "a member the table lacks")
        assert {f: o for f, (o, _) in fields.items()} == {f: ours[f] for f in fields}, ctype
        assert max(o + s for o, s in fields.values()) == known, (name, ctype)
    # its enums: every member the release declares is ours, with its value (the
    # counts excepted: an older release counts fewer)
    for e in enums:
        theirs = enum_members(text, e.ctype)
        if theirs and e.c and not e.defines:
            mine = {m.cname: m.number for m in e.members}
            counts = {m.cname for m in e.members if m.count}
            assert {n: mine.get(n) for n in theirs if n not in counts} == \
                {n: v for n, v in theirs.items() if n not in counts}, (name, e.ctype)
    if code >= 23206:
        assert enum_members(text, "ncclGinConnectionType_t")["NCCL_GIN_CONNECTION_CUSTOM_ARRAY"] == 4


CHILD = r"""
import ctypes, json, warnings
import nccl.bindings as b
from nccl._errors import NcclInvalid
out = {}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    out["version"] = b.get_version()
    d = b.DevCommRequirements()
    out["new"] = [d.size_, d.version]
    if CALL:
        ranks = (ctypes.c_int * 2)(0, 1)
        d.gin_custom_array, d.gin_custom_array_count = ctypes.addressof(ranks), 2
        try:
            b.dev_comm_create(0, d)   # no communicator: the library says so, if it is asked
            out["custom_array"] = "accepted"
        except NcclInvalid as e:
            out["custom_array"] = "refused: " + str(e)
        except b.NCCLError as e:
            out["custom_array"] = "library: " + str(e)
out["warnings"] = [str(w.message) for w in caught]
print(json.dumps(out))
"""


@HEAVY
def test_the_release_gets_structs_in_its_layout(release):
    name, tree = release
    code = code_of(name)
    _, layouts, _ = _tables()
    line = layout_for(layouts, "ncclDevCommRequirements_t", code)
    env = clean_env(NCCL_LIBRARY=str(tree / "lib" / "libnccl.so.2"))
    p = run_python(CHILD.replace("CALL", str(line is not None)), env, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["version"] == code and out["warnings"] == []  # no release of these is newer
    assert out["new"] == [136, 23206]
    if line is None:
        return
    if line[1] < 132:  # the release lacks ginCustomArray: refused before the call
        assert out["custom_array"].startswith(
            f"refused: DevCommRequirements.gin_custom_array is set, but the loaded NCCL {name} "
            f"does not know it (its DevCommRequirements has {line[1]} bytes)"), out
    else:  # it reaches the library, which refuses the missing communicator itself
        assert out["custom_array"].startswith("library: InvalidArgument"), out
        assert "comm argument is NULL" in out["custom_array"], out


def test_the_cu13_extra_is_the_tested_range():
    """``pip install 'nccl4py[cu13]'`` (and cu12) picks an NCCL of RELEASES'
    range, whose newest is the release the tables describe."""
    from nccl import _nccl

    tree = ast.parse((ROOT / "setup.py").read_text())  # the extras are setup.py's EXTRAS
    extras = ast.literal_eval(next(node.value for node in tree.body
                                   if isinstance(node, ast.Assign)
                                   and [getattr(t, "id", None) for t in node.targets]
                                   == ["EXTRAS"]))
    for cuda in ("cu12", "cu13"):
        assert extras[cuda] == [f"nvidia-nccl-{cuda}>={RELEASES[0]},<={RELEASES[-1]}"], cuda
    assert code_of(RELEASES[-1]) == _nccl.ABI_VERSION
