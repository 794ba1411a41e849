"""python tools/gen [--check | --stub OUT.c | --noop OUT.c] [--root DIR]"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as `python tools/gen`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    __package__ = "gen"

import gen  # noqa: E402
from gen import api, stub  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tools/gen", description=gen.__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 naming the stale files")
    ap.add_argument("--stub", type=Path, help="write the recording stub library's C source")
    ap.add_argument("--noop", type=Path, help="write the no-op library's C source")
    ap.add_argument("--root", type=Path, default=gen.ROOT,
                    help="the source tree (default: the one holding this tool)")
    ns = ap.parse_args(argv)
    root = ns.root.resolve()
    if ns.stub or ns.noop:
        entries = api.parse_table(root / api.TABLE)
        for path, noop in ((ns.stub, False), (ns.noop, True)):
            if path:
                path.write_text(stub.gen_stub_c(entries, noop=noop))
        return 0
    old = gen.stale(root)
    if ns.check:
        if old:
            print("stale generated files (run python tools/gen): "
                  + ", ".join(str(p.relative_to(root)) for p in old), file=sys.stderr)
            return 1
        return 0
    for path, text in old.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
