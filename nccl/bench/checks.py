"""What ``python -m nccl.bench`` checks before it starts any rank, so that a
mistake never costs a whole sweep (an output file that cannot be written is
found out now, not after the last size)."""
from __future__ import annotations

import argparse
import math
import os

__all__ = ["MAX_SIZES", "size_count", "writable", "preflight", "parse_min_bw"]

# More sizes than this is a typo (e.g. -i 1 instead of -f 2), not a sweep.
MAX_SIZES = 4096


def size_count(minbytes: int, maxbytes: int, stepbytes: int, stepfactor: int) -> int:
    """How many sizes ``cli.sizes`` visits, without listing them."""
    if minbytes > maxbytes:
        return 0
    if stepfactor > 1:  # at most 64 steps: count them
        n, size = 1, max(minbytes, 1)
        n += minbytes == 0 and size <= maxbytes
        while size * stepfactor <= maxbytes:
            size *= stepfactor
            n += 1
        return n
    if stepbytes > 0:
        return (maxbytes - minbytes) // stepbytes + 1
    return 1


def writable(path: str, what: str) -> str | None:
    """None when *path* can be written now, else why not (nothing is left behind)."""
    if os.path.isdir(path):
        return f"{what} {path!r} is a directory"
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        return f"{what} {path!r}: the directory {parent!r} does not exist"
    existed = os.path.exists(path)
    try:
        with open(path, "a"):
            pass
    except OSError as e:
        return f"{what} {path!r} cannot be written: {e.strerror}"
    if not existed:
        os.unlink(path)
    return None


def parse_min_bw(text: str | None) -> float | None:
    """NCCL_TESTS_MIN_BW: a non-negative number of GB/s, or unset."""
    if text is None or text == "":
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or math.isinf(value):
        raise ValueError(f"NCCL_TESTS_MIN_BW={text!r} is not a bandwidth in GB/s "
                         "(a number >= 0)")
    return value


def preflight(ns: argparse.Namespace, nranks: int | None, paths: bool = True) -> list[str]:
    """Every problem of the command line found without starting a rank
    (*paths*: also check that the output files can be written)."""
    problems: list[str] = []
    if ns.maxbytes < 1:
        problems.append(f"-e {ns.maxbytes}: the largest size must be at least 1 byte")
    if ns.minbytes > ns.maxbytes:
        problems.append(f"-b {ns.minbytes} is larger than -e {ns.maxbytes}")
    elif ns.stepfactor <= 1 and ns.stepbytes == 0 and ns.minbytes < ns.maxbytes:
        problems.append("-i 0 without a factor (-f 2 or more) never gets from -b to -e")
    else:
        n = size_count(ns.minbytes, ns.maxbytes, ns.stepbytes, ns.stepfactor)
        if n > MAX_SIZES:
            step = f"-f {ns.stepfactor}" if ns.stepfactor > 1 else f"-i {ns.stepbytes}"
            problems.append(f"-b {ns.minbytes} -e {ns.maxbytes} {step} gives {n} sizes (at "
                            f"most {MAX_SIZES}); use a larger -i or a factor such as -f 2")
    if ns.root != "all":
        try:
            root = int(ns.root)
        except ValueError:
            root = None
            problems.append(f"-r {ns.root!r}: a root is a rank number or 'all'")
        if root is not None and (root < 0 or (nranks is not None and root >= nranks)):
            limit = f"0..{nranks - 1}" if nranks is not None else "0 or more"
            problems.append(f"-r {root}: the root must be a rank, {limit}"
                            + (f" with {nranks} ranks" if nranks is not None else ""))
    for flag, path in (("-J", ns.output_file), ("--plot", ns.plot)):
        problem = writable(path, flag) if paths and path else None
        if problem:
            problems.append(problem)
    try:
        parse_min_bw(os.environ.get("NCCL_TESTS_MIN_BW"))
    except ValueError as e:
        problems.append(str(e))
    corrupt = os.environ.get("NCCL4PY_BENCH_TEST_CORRUPT", "")
    if corrupt not in ("", "0", "1"):
        problems.append(f"NCCL4PY_BENCH_TEST_CORRUPT={corrupt!r}: the tests set it to 1; "
                        "leave it unset")
    return problems
