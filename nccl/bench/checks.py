"""What ``python -m nccl.bench`` checks before it starts any rank, so that a
mistake never costs a whole sweep (an output file that cannot be written is
found out now, not after the last size)."""
from __future__ import annotations

import argparse
import math
import os

__all__ = ["MAX_SIZES", "MAX_BYTES", "MAX_ITERS", "MAX_AGG", "MAX_OPS", "MAX_CHECKS",
           "MAX_SECONDS", "MAX_INT", "QUEUED_OP_BYTES", "size_count", "writable", "preflight",
           "parse_min_bw", "memory_problem", "nranks_problem"]

# More sizes than this is a typo (e.g. -i 1 instead of -f 2), not a sweep.
MAX_SIZES = 4096
# The largest size: what one buffer (a NumPy array, a C size) can hold.
MAX_BYTES = (1 << 63) - 1
# Buffers of the largest size each rank allocates: the send and the receive
# buffer (see worker.Bench.run).
BUFFERS_PER_RANK = 2
# The ranges of the counts (docs/benchmarks.md): beyond them a run takes days
# or a typo took every remaining byte (-m 30000000 queued 4 GB a rank).
MAX_ITERS = 1_000_000     # -n and -w
MAX_AGG = 10_000          # -m: operations queued in one group
MAX_OPS = 10_000_000      # operations timed or warming up per size: -n x -m + -w
MAX_CHECKS = 1000         # -c: each check runs the call again and reads the whole result
MAX_SECONDS = 31_536_000  # -T and --progress-every: a year, as NCCL4PY_HOST_TIMEOUT
MAX_INT = 2**31 - 1       # flags nccl-tests reads as a C int (-g, -t, -G, -z, -N, -C)
# Host memory one operation queued in a group holds until the group ends: about
# 430 bytes on the host backend (measured); NCCL's and RCCL's tasks are of that
# order too.  -m operations are queued at a time in every rank.
QUEUED_OP_BYTES = 512


def _bytes_text(n: int) -> str:
    for unit, shift in (("EiB", 60), ("PiB", 50), ("TiB", 40), ("GiB", 30), ("MiB", 20),
                        ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.3g} {unit}"
    return f"{n} B"


def machine_memory() -> int | None:
    """This machine's physical memory in bytes (None when unknown)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return None


def memory_problem(maxbytes: int, nranks: int, memory: int | None, agg: int = 1,
                   host: bool = True) -> str | None:
    """Why the ranks cannot hold what they need in *memory* bytes (all ranks
    share this machine's memory), or None: on the host backend (*host*) their
    buffers of *maxbytes*, on every backend the *agg* operations each queues
    in a group."""
    buffers = BUFFERS_PER_RANK * maxbytes * nranks if host else 0
    queued = agg * QUEUED_OP_BYTES * nranks
    if memory is None or buffers + queued <= memory:
        return None
    if buffers >= queued:
        what = (f"-e {maxbytes}: the {nranks} ranks need {_bytes_text(buffers + queued)} for "
                f"their buffers ({BUFFERS_PER_RANK} of {_bytes_text(maxbytes)} each)")
    else:
        what = (f"-m {agg}: the {nranks} ranks need {_bytes_text(buffers + queued)} for the "
                f"operations they queue ({agg} of about {QUEUED_OP_BYTES} B each)"
                + (" and their buffers" if buffers else ""))
    return f"{what}, more than this machine's {_bytes_text(memory)} of memory"


def _host_backend(choice: str) -> bool:
    """Whether the ranks will run on the host backend with --backend *choice*."""
    from nccl._launch.launcher import select_backend

    env = dict(os.environ)
    select_backend(choice, env)
    return env.get("NCCL4PY_BACKEND") == "host" and not env.get("NCCL_LIBRARY")


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


def nranks_problem(ns: argparse.Namespace, nranks: int) -> str | None:
    """Why python -m nccl.run would refuse to start *nranks* ranks here (the
    host backend's maximum, the process limit, the CPUs), or None."""
    from nccl._launch.limits import check_nranks

    problem = check_nranks(nranks, host=_host_backend(ns.backend), oversubscribe=False)
    return None if problem is None else (f"--nranks {nranks}: python -m nccl.run "
                                         f"refuses it: {problem}")


def preflight(ns: argparse.Namespace, nranks: int | None, paths: bool = True,
              spawn: bool = False) -> list[str]:
    """Every problem of the command line found without starting a rank
    (*paths*: also check that the output files can be written; *spawn*: the
    bench starts the *nranks* ranks itself, so they must fit this machine)."""
    problems: list[str] = []
    estimate = nranks  # the ranks whose memory is estimated
    if spawn and nranks is not None:
        problem = nranks_problem(ns, nranks)
        if problem:
            problems.append(problem)
            estimate = None  # they will not start
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
        elif estimate is not None:
            problem = memory_problem(ns.maxbytes, estimate, machine_memory(), ns.agg_iters,
                                     host=_host_backend(ns.backend))
            if problem:
                problems.append(problem)
    ops = ns.iters * ns.agg_iters + ns.warmup_iters
    if ops > MAX_OPS:
        problems.append(f"-n {ns.iters} -m {ns.agg_iters} -w {ns.warmup_iters}: {ops} "
                        f"operations per size (-n x -m + -w; at most {MAX_OPS})")
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
