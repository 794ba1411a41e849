"""The generator of everything that follows from the tables of src/*.def.

    python tools/gen                  # rewrite every generated file and block
    python tools/gen --check          # exit 1, naming them, if any is stale
    python tools/gen --stub OUT.c     # write the recording stub library (tests)
    python tools/gen --noop OUT.c     # write the no-op library (benchmarks)

One module per table (see src/README.md), each with generate(root): the
whole files it writes (all C under src/gen/) and the marked blocks it writes
into hand-kept files (common.py: one marker dialect, one writer).  The build
(setup.py), tools/lint.sh and the tests run this one entry point, so an edit
to any table regenerates its C and its Python together.  Only the standard
library is used.
"""
from __future__ import annotations

from pathlib import Path

from . import api, collectives, dtypes, enums, gpu, structs
from .common import ROOT, Output, replace_blocks

# every table, by the module that reads it
TABLES = {m.TABLE: m for m in (api, gpu, dtypes, enums, structs, collectives)}


def outputs(root: Path = ROOT) -> Output:
    """What every table generates, merged (a file or block made twice is an error)."""
    out = Output()
    for module in TABLES.values():
        out.update(module.generate(root))
    return out


def generated(root: Path = ROOT) -> dict[Path, str]:
    """Every generated file (or file with generated blocks) and its content."""
    out = outputs(root)
    files = {root / rel: text for rel, text in out.files.items()}
    for rel, blocks in out.blocks.items():
        path = root / rel
        files[path] = replace_blocks(path.read_text(), blocks, rel)
    return files


def stale(root: Path = ROOT) -> dict[Path, str]:
    """The generated files whose content differs from what the tables give."""
    return {p: text for p, text in generated(root).items()
            if not p.exists() or p.read_text() != text}
