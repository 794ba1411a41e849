"""The host backend's floors (host/README.md, "Files"): every C file and
header has a floor, and includes and calls only look down.

The floors, from the top: entry (the exported functions and the checks of
their arguments), queue (building ops, groups, running an op by its kind),
engines (one file per collective family, the kinds' descriptors, the path
policy), kernels (the reductions), transport (segments, waiting, rounds,
cross-memory reads, copies) and base (settings, output, errors, types).

The checks read the sources (comments and string literals removed): a
file's `#include "..."` of a host header, and its calls of the functions
that another host file defines (every function that is not static, and the
static inline functions of the headers).  Nothing is compiled or run.
"""
from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HOST = ROOT / "host"

FLOORS = ["base", "transport", "kernels", "engines", "queue", "entry"]  # bottom to top
MAX_LINES = 600


def floor_table() -> dict[str, str]:
    """file -> floor, from the first table under "## Files" in host/README.md."""
    text = (HOST / "README.md").read_text()
    section = text.split("\n## Files\n", 1)[1].split("\n## ", 1)[0]
    table = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].startswith("`"):
            continue
        for name in re.findall(r"`([^`]+)`", cells[0]):
            table[name] = cells[1]
    return table


def sources() -> list[Path]:
    return sorted(p for p in HOST.iterdir()
                  if p.suffix in (".c", ".h") and not p.name.startswith("test_"))


def code_of(path: Path) -> str:
    """The text without comments and string or character literals."""
    text = path.read_text()
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
            out.append(" ")
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text[i] in "\"'":
            q, j = text[i], i + 1
            while j < n and text[j] != q:
                j += 2 if text[j] == "\\" else 1
            out.append(q + q)
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


DEF = re.compile(r"^((?:[A-Za-z_]\w*[ \t\*]+)+?)([A-Za-z_]\w*)\s*\(([^;{}()]*(?:\([^;{}()]*\)[^;{}()]*)*)\)\s*\{",
                 re.M)
DECL = re.compile(r"^(?:[A-Za-z_]\w*[ \t\*]+)+[A-Za-z_]\w*\s*\([^;{}]*\)[^;{}()]*(?:\([^;{}()]*\))?\s*;",
                  re.M)
CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def definitions(path: Path, code: str) -> tuple[set[str], set[str]]:
    """(functions other files may call, functions only this file calls)."""
    shared, local = set(), set()
    for m in DEF.finditer(code):
        words = m.group(1).split()
        name = m.group(2)
        if "static" in words and not (path.suffix == ".h" and "inline" in words):
            local.add(name)
        else:
            shared.add(name)
    return shared, local


@pytest.fixture(scope="module")
def tree():
    table = floor_table()
    files = sources()
    codes = {p.name: code_of(p) for p in files}
    owner, local = {}, {}
    for p in files:
        shared, mine = definitions(p, codes[p.name])
        local[p.name] = mine
        for name in shared:
            assert name not in owner or owner[name] == p.name, (
                f"{name} is defined in both {owner[name]} and {p.name}")
            owner[name] = p.name
    calls = defaultdict(set)  # file -> {(callee file, function)}
    for p in files:
        for m in CALL.finditer(DECL.sub(" ", codes[p.name])):  # calls, not prototypes
            name = m.group(1)
            target = owner.get(name)
            if target and target != p.name and name not in local[p.name]:
                calls[p.name].add((target, name))
    includes = {p.name: set(INCLUDE.findall(p.read_text())) & {q.name for q in files}
                for p in files}
    return table, files, codes, owner, calls, includes


def test_every_file_has_a_floor(tree):
    table, files, *_ = tree
    names = {p.name for p in files}
    assert sorted(names - set(table)) == [], "files missing from host/README.md's table"
    wrong = {f: fl for f, fl in table.items() if f in names and fl not in FLOORS}
    assert wrong == {}, f"floors must be one of {FLOORS}"
    listed = {f for f in table if f.endswith((".c", ".h")) and not f.startswith("test_")}
    assert sorted(listed - names) == [], "host/README.md lists files that do not exist"


def level(table, name):
    return FLOORS.index(table[name])


def test_includes_look_down(tree):
    table, files, _, _, _, includes = tree
    up = [f"{f} ({table[f]}) includes {h} ({table[h]})"
          for f, hs in sorted(includes.items()) for h in sorted(hs)
          if level(table, h) > level(table, f)]
    assert up == []


def test_calls_look_down(tree):
    table, _, _, _, calls, _ = tree
    up = [f"{f} ({table[f]}) calls {fn} of {g} ({table[g]})"
          for f, edges in sorted(calls.items()) for g, fn in sorted(edges)
          if level(table, g) > level(table, f)]
    assert up == []


def test_no_circle_between_files(tree):
    """No two files call each other, directly or around a circle (Tarjan)."""
    _, files, _, _, calls, _ = tree
    graph = {p.name: sorted({g for g, _ in calls[p.name]}) for p in files}
    index, low, stack, on, circles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                circles.append(sorted(scc))

    for v in graph:
        if v not in index:
            visit(v)
    assert circles == []


def test_the_checks_see_the_calls(tree):
    """The parser finds what it must: an all-reduce's way down the floors."""
    table, _, _, owner, calls, includes = tree
    assert owner["n4p_submit_data"] == "group.c"
    assert owner["n4p_round_open"] == "rounds.c"
    assert owner["begin"] == "engine.h"  # a static inline function of a header
    assert ("group.c", "n4p_submit_data") in calls["coll_api.c"]
    assert ("run.c", "n4p_run_op") in calls["group.c"]
    assert ("kinds.c", "n4p_kind_of") in calls["run.c"]
    assert ("rounds.c", "n4p_round_open") in calls["engine.h"]
    assert ("engine.h", "begin") in calls["allreduce.c"]
    assert "engine.h" in includes["allreduce.c"]
    assert [table[f] for f in ("coll_api.c", "run.c", "allreduce.c", "reduce.c", "rounds.c",
                               "errors.c")] == ["entry", "queue", "engines", "kernels",
                                                "transport", "base"]


def test_per_kind_switches_are_in_kinds_c(tree):
    """A switch on the kind of an op is its descriptor's (kinds.c) alone."""
    _, files, codes, *_ = tree
    found = {p.name for p in files if re.search(r"\bcase\s+N4P_K_", codes[p.name])}
    assert found <= {"kinds.c"}
    # and comparisons with a kind: only the engine of sends and receives
    # (p2p.c, p2p_overlap.c) tells its two kinds apart
    compared = {p.name: set(re.findall(r"[!=]=\s*(N4P_K_\w+)", codes[p.name])) for p in files}
    assert {f for f, ks in compared.items() if ks} <= {"p2p.c", "p2p_overlap.c"}
    assert set().union(*compared.values()) <= {"N4P_K_SEND", "N4P_K_RECV"}


def test_no_host_source_is_longer_than_600_lines():
    long = {p.name: n for p in HOST.glob("*.c")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}
