"""The maps of the sources agree with the tree: src/bindings.h's file map,
docs/architecture.md's list of the extension's files and the repository
map, src/README.md's table of the tables; and every file a C comment cites
exists."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT

SRC = ROOT / "src"


def _c_sources(with_headers: bool) -> set[str]:
    ext = ("*.c", "*.h") if with_headers else ("*.c",)
    return {p.relative_to(SRC).as_posix() for e in ext for d in (SRC, SRC / "gen")
            for p in d.glob(e)}


def test_the_map_of_bindings_h_names_every_file():
    head = (SRC / "bindings.h").read_text().split("*/", 1)[0]
    named = re.findall(r"^ \*   (\S+\.[ch])\s", head, re.M)
    assert len(named) == len(set(named)), named
    assert set(named) == _c_sources(with_headers=True)


def _section(text: str, title: str) -> str:
    return text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_the_architecture_lists_every_c_file_of_the_extension():
    section = _section((ROOT / "docs" / "architecture.md").read_text(), "The C extension")
    named = re.findall(r"^\| `(\S+\.c)` \|", section, re.M)
    assert len(named) == len(set(named)), named
    assert set(named) == _c_sources(with_headers=False)


def test_the_repository_map_names_what_is_there():
    block = _section((ROOT / "docs" / "architecture.md").read_text(), "The repository")
    for line in block.split("```text\n", 1)[1].split("```", 1)[0].splitlines():
        top = line.split()[0]
        assert (ROOT / top).is_dir(), line
        if top == "tools/":
            said = set(re.findall(r"[\w.]+(?:/|\.sh|\.py)", line.split(None, 1)[1]))
            there = {p.name + ("/" if p.is_dir() else "") for p in (ROOT / "tools").iterdir()
                     if p.name != "__pycache__" and p.suffix != ".txt"}
            assert said == there, (said, there)


def test_src_readme_describes_every_table():
    text = (SRC / "README.md").read_text()
    rows = re.findall(r"^\| `src/(\w+\.def)` \|", text, re.M)
    assert sorted(rows) == sorted(p.name for p in SRC.glob("*.def"))


# headers of the system, of Python and of the libraries, cited in comments
EXTERNAL = {"nccl.h", "hip_runtime_api.h", "driver_types.h", "Python.h", "structmember.h",
            "ndarraytypes.h"}


def test_every_file_a_c_comment_cites_exists():
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    files = set(tracked) | {f"src/gen/{p.name}" for p in (SRC / "gen").iterdir()}
    names = {Path(f).name for f in files} | files | EXTERNAL
    missing = []
    for rel in sorted(files):
        if not re.match(r"(src|host)/.*\.(c|h|def)$", rel):
            continue
        text = re.sub(r"^\s*#\s*include\s*<[^>]*>", "", (ROOT / rel).read_text(), flags=re.M)
        for m in re.finditer(r"(?<![\w.<-])((?:[\w-]+/)*[\w-]+\.(?:c|h|def|py|md))\b", text):
            if m.group(1) not in names and Path(m.group(1)).name not in names:
                missing.append((rel, m.group(1)))
    assert not missing
