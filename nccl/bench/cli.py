"""Command line of ``python -m nccl.bench``: parse nccl-tests' flags, start
the ranks through ``python -m nccl.run`` (or run as one rank of an outside
launcher), show progress on a terminal, and plot."""
from __future__ import annotations

import argparse
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
from fractions import Fraction
from typing import Any, Callable

from nccl._cli import add_version
from nccl._launch.argtypes import number
from nccl._launch.forward import forwarding_signals

from . import checks
from .collectives import COLLECTIVES, OPS, TYPES, counts, resolve_name
from .progress import Progress

__all__ = ["main", "build_parser", "parse_size", "sizes", "plan"]

PROG = "python -m nccl.bench"

_DESCRIPTION = """\
Measure NCCL/RCCL collectives the way NVIDIA's nccl-tests does, with the same
flags, table and bandwidth formulas (busbw = algbw x factor: all_reduce
2(n-1)/n; all_gather, reduce_scatter, alltoall, gather, scatter (n-1)/n;
broadcast, reduce, sendrecv 1).  Every size runs out of place and in place;
#wrong counts the elements that differ from the expected result (-c)."""

_EPILOG = """\
collectives: %s, or all (RCCL's allreduce_with_bias and alltoallv run only
where the library has them).  nccl-tests' names (all_reduce_perf) work too.

ranks: --nranks N starts N ranks on this machine with python -m nccl.run
(default: the number of visible GPUs, else 4 on the host backend).  Under
mpirun, torchrun or srun without --nranks, each process is one rank:
  mpirun -np 8 python -m nccl.bench all_reduce -b 8 -e 1G -f 2
Each rank drives one GPU: -g and -t accept only 1 (nccl-tests' -g 8 is
--nranks 8 here).  -G, -z, -N and -C are accepted and ignored with a note.

arrays: NumPy on the host backend; torch (or CuPy) on GPUs.

before any rank starts, every number against its range (docs/benchmarks.md),
the sizes, the memory the ranks need, the number of ranks, the root,
NCCL_TESTS_MIN_BW and the -J and --plot paths are checked.  A progress line
with the time left goes to stderr (redrawn on a terminal, else every
--progress-every seconds).  The
run ends with a summary of every collective.  -J writes the results as JSON
(units, hostname, timestamp, command line, average busbw per collective);
--plot-from redraws a saved file:
  python -m nccl.bench --plot-from out.json bw.png

exit status: 0 when every check passed; 1 when any #wrong or out-of-bounds
value is non-zero (or the average busbw is below 0.9 x NCCL_TESTS_MIN_BW);
2 for usage errors.

test-only: NCCL4PY_BENCH_TEST_CORRUPT=1 makes rank 0 flip one byte of every
result it checks (to prove that #wrong detects errors); never set it
otherwise.""" % ", ".join(COLLECTIVES)


_SIZE = re.compile(r"(\d+(?:\.\d*)?|\.\d+)([KMGT]?)(?:I?B)?")


def parse_size(text: str) -> int:
    """nccl-tests' sizes: a number of bytes with an optional K, M, G or T
    (powers of 1024), read exactly: a fraction must come to whole bytes
    (``1.5K``), and a size is at most ``checks.MAX_BYTES``."""
    t = text.strip().upper()
    if t.startswith("-"):
        raise argparse.ArgumentTypeError(f"negative size: {text!r}")
    m = _SIZE.fullmatch(t)
    if m is None:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 8, 64K, 128M, 1G)")
    value = Fraction(m.group(1)) * (1024 ** ("KMGT".index(m.group(2)) + 1) if m.group(2) else 1)
    if value.denominator != 1:
        raise argparse.ArgumentTypeError(f"not a whole number of bytes: {text!r}")
    if value > checks.MAX_BYTES:
        raise argparse.ArgumentTypeError(f"too large: {text!r} (at most {checks.MAX_BYTES} "
                                         "bytes, 2^63 - 1, the most one buffer can hold)")
    return int(value)


def _int_in(lo: int, hi: int) -> Callable[[str], int]:
    """An integer flag from *lo* to *hi* (the error names the range)."""
    return number(int, "an integer", lambda v: lo <= v <= hi, f"must be from {lo} to {hi}")


_positive = _int_in(1, checks.MAX_INT)
_ignored = _int_in(0, checks.MAX_INT)  # nccl-tests reads them as C ints
_seconds = number(float, "a number of seconds", lambda v: 0 <= v <= checks.MAX_SECONDS,
                  f"must be from 0 to {checks.MAX_SECONDS} seconds")


# nccl-tests options that have no meaning here: accepted, ignored, and said so.
NOT_APPLICABLE = {
    "cudagraph": ("-G", "collectives are called one by one from Python, not captured in "
                  "CUDA graphs"),
    "blocking": ("-z", "each size is timed over all its iterations with one "
                 "synchronisation at the end"),
    "run_cycles": ("-N", "every size runs once; run the command again for more cycles"),
    "report_cputime": ("-C", "the times reported are wall-clock times"),
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=_DESCRIPTION, epilog=_EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("collectives", nargs="*", metavar="collective", default=[],
                   help="collectives to run (default: all_reduce); with --plot-from, the "
                   "PNG file to write")
    p.add_argument("--nranks", "--np", type=_positive, metavar="N",
                   help="start N ranks on this machine (default: visible GPUs, else 4; at "
                   "most what python -m nccl.run -n allows here); -n is the iterations, as "
                   "in nccl-tests")
    p.add_argument("--backend", choices=("auto", "host", "nccl", "rccl"), default="auto",
                   help="library for the ranks, as python -m nccl.run --backend")
    p.add_argument("--array", choices=("auto", "numpy", "torch", "cupy"), default="auto",
                   help="array library for the buffers (default: NumPy on the host "
                   "backend, torch or CuPy on GPUs)")
    g = p.add_argument_group("nccl-tests options")
    g.add_argument("-b", "--minbytes", type=parse_size, default=32 << 20, metavar="SIZE",
                   help="first size (K/M/G/T suffixes; 0 to 2^63-1 bytes; default 32M)")
    g.add_argument("-e", "--maxbytes", type=parse_size, default=32 << 20, metavar="SIZE",
                   help="last size (1 to 2^63-1 bytes, at most 4096 sizes, and on the "
                   "host backend 2 buffers of it per rank within this machine's memory; "
                   "default 32M)")
    g.add_argument("-i", "--stepbytes", type=parse_size, default=1 << 20, metavar="SIZE",
                   help="fixed increment between sizes (0 to 2^63-1 bytes; default 1M)")
    g.add_argument("-f", "--stepfactor", type=_int_in(0, checks.MAX_BYTES), default=0,
                   metavar="F", help="multiplicative factor between sizes, 0 to 2^63-1 "
                   "(2 or more replaces -i; 0 and 1: none)")
    g.add_argument("-n", "--iters", type=_int_in(0, checks.MAX_ITERS), default=20,
                   metavar="N", help=f"timed iterations per size, 0 to {checks.MAX_ITERS}, "
                   f"with -n x -m + -w at most {checks.MAX_OPS} (default 20)")
    g.add_argument("-w", "--warmup_iters", type=_int_in(0, checks.MAX_ITERS), default=1,
                   metavar="N", help=f"warm-up iterations, 0 to {checks.MAX_ITERS} "
                   "(default 1)")
    g.add_argument("-m", "--agg_iters", type=_int_in(1, checks.MAX_AGG), default=1,
                   metavar="N", help=f"operations aggregated in one group per iteration, 1 "
                   f"to {checks.MAX_AGG}, and all the ranks' queued operations "
                   f"({checks.QUEUED_OP_BYTES} bytes each) within this machine's memory "
                   "(default 1)")
    g.add_argument("-c", "--check", type=_int_in(0, checks.MAX_CHECKS), default=1,
                   metavar="N", help=f"check the results N times per size, 0 to "
                   f"{checks.MAX_CHECKS} (0: no check, #wrong N/A)")
    g.add_argument("-o", "--op", default="sum", metavar="OP",
                   help="sum, prod, max, min, avg, mulsum or all (comma lists allowed)")
    g.add_argument("-d", "--datatype", default="float", metavar="TYPE",
                   help=f"{', '.join(TYPES)} or all (comma lists allowed)")
    g.add_argument("-r", "--root", default="0", metavar="ROOT",
                   help="root rank of broadcast/reduce/gather/scatter, or all (default 0)")
    g.add_argument("-a", "--average", type=int, choices=(0, 1, 2, 3), default=1,
                   help="time reported: 0 rank 0's, 1 average, 2 min, 3 max across ranks")
    g.add_argument("-J", "--output_file", metavar="FILE",
                   help="also write the results as JSON")
    g.add_argument("-T", "--timeout", type=_int_in(1, checks.MAX_SECONDS), metavar="SECONDS",
                   help=f"stop every rank after SECONDS, 1 to {checks.MAX_SECONDS} (exit "
                   "status 124)")
    g.add_argument("-g", "--ngpus", type=_positive, default=1, metavar="1",
                   help="GPUs per rank: only 1 (use --nranks N for N ranks)")
    g.add_argument("-t", "--nthreads", type=_positive, default=1, metavar="1",
                   help="threads per process: only 1 (use --nranks N for N ranks)")
    na = p.add_argument_group("nccl-tests options accepted and ignored (not applicable here)")
    for dest, (flag, why) in NOT_APPLICABLE.items():
        na.add_argument(flag, f"--{dest}", type=_ignored, metavar="N",
                        help=f"{why} (0 to {checks.MAX_INT})")
    p.add_argument("--plot", metavar="PNG",
                   help="draw bandwidth against size (log-log) into PNG: algbw and busbw "
                   "for one collective, one panel per collective for several (needs "
                   "matplotlib)")
    p.add_argument("--plot-from", metavar="JSON",
                   help="draw a saved -J file instead of running: --plot-from out.json bw.png")
    p.add_argument("--progress-every", type=_seconds, default=10.0, metavar="SECONDS",
                   help="when stderr is not a terminal, a progress line every SECONDS, "
                   f"0 to {checks.MAX_SECONDS} (default 10; 0: none)")
    add_version(p)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--command-line", help=argparse.SUPPRESS)
    return p


def _list(text: str, choices: tuple[str, ...], what: str) -> list[str]:
    if text == "all":
        return list(choices)
    items = [t.strip() for t in text.split(",") if t.strip()]
    aliases = {"float32": "float", "float16": "half", "float64": "double", "fp16": "half",
               "bf16": "bfloat16", "int": "int32", "char": "int8"}
    items = [aliases.get(t, t) for t in items]
    for t in items:
        if t not in choices:
            raise ValueError(f"unknown {what} {t!r}; choose from {', '.join(choices)} or all")
    return items


def sizes(minbytes: int, maxbytes: int, stepbytes: int, stepfactor: int) -> list[int]:
    """The sizes nccl-tests visits: from min to max by factor (when > 1) or step."""
    out: list[int] = []
    size = minbytes
    while size <= maxbytes:
        out.append(size)
        if stepfactor > 1:
            if size == 0:
                size = 1
                continue
            size *= stepfactor
        elif stepbytes > 0:
            size += stepbytes
        else:
            break
    return out


def _step_text(ns: argparse.Namespace) -> str:
    return f"{ns.stepfactor}(factor)" if ns.stepfactor > 1 else f"{ns.stepbytes}(bytes)"


def _launcher_environment() -> Any:
    """The rank environment when mpirun, torchrun or srun started this process, else None."""
    try:
        from nccl._launch.rankenv import detect

        return detect(exchange_id=False)
    except Exception:
        return None


def plan(names: list[str], type_names: list[str], op_names: list[str], root_arg: str,
         nranks: int, size_list: list[int]) -> list[tuple[str, list[int]]]:
    """The rows each collective's block will print, in order (see worker.Bench.run)."""
    out = []
    for name in names:
        c = COLLECTIVES[name]
        rows: list[int] = []
        for t in type_names:
            dtype = TYPES.index(t)
            for _op in (op_names if c.reduces else [None]):
                for _root in (range(nranks) if root_arg == "all" else [0]) if c.rooted else [0]:
                    rows += [s for s in size_list if c.split == "none" or not s
                             or counts(c, s, dtype, nranks)[2] > 0]
        out.append((c.binary, rows))
    return out


def _spawn(ns: argparse.Namespace, argv: list[str], nranks: int,
           blocks: list[tuple[str, list[int]]], json_path: str | None) -> int:
    cmd = [sys.executable, "-m", "nccl.run", "-n", str(nranks), "--backend", ns.backend]
    if ns.timeout:
        cmd += ["--timeout", str(ns.timeout)]
    cmd += ["-m", "nccl.bench", *argv, "--worker", "--command-line",
            " ".join([PROG, shlex.join(argv)])]
    if json_path and not ns.output_file:
        cmd += ["-J", json_path]
    # SIGINT/SIGTERM/SIGHUP go to the launcher, which passes them to every
    # rank; the status is then 128+N (130 for Ctrl-C, 143 for SIGTERM).
    bar = Progress(sys.stderr, blocks, tty=sys.stderr.isatty(), every=ns.progress_every)
    with forwarding_signals(cmd, stdout=subprocess.PIPE, text=True, bufsize=1) as (proc, fwd):
        assert proc.stdout is not None
        bar.start()
        try:
            for line in proc.stdout:
                bar.clear()
                sys.stdout.write(line)
                sys.stdout.flush()
                bar.feed(line)
            return fwd.status(proc.wait())
        finally:
            bar.stop()


def _error(parser: argparse.ArgumentParser, problems: list[str]) -> int:
    parser.print_usage(sys.stderr)
    for problem in problems:
        print(f"{PROG}: error: {problem}", file=sys.stderr)
    return 2


def _plot_from(ns: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """``--plot-from results.json out.png``: redraw saved results, run nothing."""
    from .plot import BadResults, MissingMatplotlib, load, plot, require_matplotlib

    outputs = list(ns.collectives) + ([ns.plot] if ns.plot else [])
    if len(outputs) != 1:
        return _error(parser, ["--plot-from JSON needs exactly one output file: "
                               "--plot-from out.json bw.png"])
    png = outputs[0]
    problem = checks.writable(png, "the plot")
    try:
        doc = load(ns.plot_from)
        require_matplotlib()
    except (BadResults, MissingMatplotlib) as e:
        return _error(parser, [str(e)] + ([problem] if problem else []))
    if problem:
        return _error(parser, [problem])
    plot(doc, png, sys.stderr)
    print(f"# plot written to {png}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    from nccl._cli import quiet_pipe

    return quiet_pipe(lambda: _main(argv))


_NP = re.compile(r"-np(?:=?(\d+))?")


def _np_problem(argv: list[str]) -> str | None:
    """mpirun's -np N, which here would read as -n p: say what -n means."""
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        m = _NP.fullmatch(arg)
        if m:
            n = m.group(1) or (argv[i + 1] if i + 1 < len(argv) and argv[i + 1].isdigit()
                               else "N")
            return (f"{arg}{'' if m.group(1) or n == 'N' else ' ' + n}: here, as in nccl-tests, "
                    f"-n is the number of iterations; to start {n} ranks use --nranks {n} "
                    f"(or mpirun -np {n} python -m nccl.bench ...)")
    return None


def _main(argv: list[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    problem = _np_problem(argv)
    if problem is not None:
        return _error(parser, [problem])
    try:
        ns = parser.parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    if ns.plot_from is not None:
        return _plot_from(ns, parser)
    problems = [f"{flag} {value}: each rank drives one GPU here; for {value} ranks use "
                f"--nranks {value} (or mpirun -np {value})"
                for flag, value in (("-g", ns.ngpus), ("-t", ns.nthreads)) if value != 1]
    try:
        wanted = ns.collectives or ["all_reduce"]
        if wanted == ["all"]:
            names = list(COLLECTIVES)
        else:
            names = list(dict.fromkeys(resolve_name(c) for c in wanted))
        type_names = _list(ns.datatype, TYPES, "datatype")
        op_names = _list(ns.op, OPS, "op")
    except ValueError as e:
        return _error(parser, problems + [str(e)])
    launched = None if ns.worker or ns.nranks is not None else _launcher_environment()
    in_rank = ns.worker or launched is not None
    if ns.worker:
        nranks = None  # the parent checked everything
    elif launched is not None:
        nranks = launched.nranks
    else:
        from nccl._discovery import visible_gpus

        nranks = ns.nranks or visible_gpus()[0] or 4
    lead = not ns.worker and (launched is None or launched.rank == 0)
    if not ns.worker:
        problems += checks.preflight(ns, nranks, paths=lead, spawn=launched is None)
    if ns.plot and not ns.worker and not problems:
        from .plot import MissingMatplotlib, require_matplotlib

        try:
            require_matplotlib()
        except MissingMatplotlib as e:
            problems.append(f"--plot: {e}")
    if problems:
        return _error(parser, problems)
    if lead:
        for dest, (flag, why) in NOT_APPLICABLE.items():
            if getattr(ns, dest) is not None:
                print(f"{PROG}: note: {flag} {getattr(ns, dest)} is not applicable here "
                      f"({why}); ignored", file=sys.stderr)
    size_list = sizes(ns.minbytes, ns.maxbytes, ns.stepbytes, ns.stepfactor)
    if in_rank:
        from . import worker

        tmp = None
        if ns.plot and not ns.output_file and not ns.worker:
            tmp = tempfile.NamedTemporaryFile(suffix=".json", delete=False)
            tmp.close()
            ns.output_file = tmp.name
        try:
            return worker.run(ns, names, size_list, type_names, op_names, ns.root,
                              _step_text(ns), plot_here=not ns.worker)
        except KeyboardInterrupt:  # Ctrl-C, passed on by the launcher: no traceback
            return 128 + signal.SIGINT
        finally:
            if tmp is not None:
                os.unlink(tmp.name)
    assert nranks is not None
    json_path = ns.output_file
    tmpdir = None
    if ns.plot and not json_path:
        tmpdir = tempfile.mkdtemp(prefix="nccl4py-bench-")
        json_path = os.path.join(tmpdir, "results.json")
    try:
        blocks = plan(names, type_names, op_names, ns.root, nranks, size_list)
        status = _spawn(ns, argv, nranks, blocks, json_path)
        if ns.plot and json_path and os.path.exists(json_path):
            from .plot import plot_file

            plot_file(json_path, ns.plot, sys.stderr)
            print(f"# plot written to {ns.plot}", file=sys.stderr)
        return status
    finally:
        if tmpdir is not None:
            import shutil

            shutil.rmtree(tmpdir, ignore_errors=True)
