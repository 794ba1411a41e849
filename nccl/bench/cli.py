"""Command line of ``python -m nccl.bench``: parse nccl-tests' flags, start
the ranks through ``python -m nccl.run`` (or run as one rank of an outside
launcher), show progress on a terminal, and plot."""
from __future__ import annotations

import argparse
import glob
import importlib.util
import os
import signal
import subprocess
import sys
import tempfile
import time
from typing import IO

from nccl._launch.forward import forwarding_signals

from .collectives import COLLECTIVES, OPS, TYPES, resolve_name

__all__ = ["main", "build_parser", "parse_size", "sizes"]

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

arrays: NumPy on the host backend; torch (or CuPy) on GPUs.

exit status: 0 when every check passed; 1 when any #wrong or out-of-bounds
value is non-zero (or the average busbw is below 0.9 x NCCL_TESTS_MIN_BW);
2 for usage errors.

test-only: NCCL4PY_BENCH_TEST_CORRUPT=1 makes rank 0 flip one byte of every
result it checks (to prove that #wrong detects errors); never set it
otherwise.""" % ", ".join(COLLECTIVES)


def parse_size(text: str) -> int:
    """nccl-tests' sizes: an integer with an optional K, M or G (powers of 1024)."""
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    mult = 1
    if t and t[-1] in "KMGT":
        mult = 1024 ** ("KMGT".index(t[-1]) + 1)
        t = t[:-1]
    try:
        value = int(float(t) * mult)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 8, 64K, 128M, 1G)") \
            from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"negative size: {text!r}")
    return value


def _nonneg(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text!r}")
    return v


def _positive(text: str) -> int:
    v = _nonneg(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return v


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=_DESCRIPTION, epilog=_EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("collectives", nargs="*", metavar="collective", default=["all_reduce"],
                   help="collectives to run (default: all_reduce)")
    p.add_argument("--nranks", "--np", type=_positive, metavar="N",
                   help="start N ranks on this machine (default: visible GPUs, else 4)")
    p.add_argument("--backend", choices=("auto", "host", "nccl", "rccl"), default="auto",
                   help="library for the ranks, as python -m nccl.run --backend")
    p.add_argument("--array", choices=("auto", "numpy", "torch", "cupy"), default="auto",
                   help="array library for the buffers (default: NumPy on the host "
                   "backend, torch or CuPy on GPUs)")
    g = p.add_argument_group("nccl-tests options")
    g.add_argument("-b", "--minbytes", type=parse_size, default=32 << 20, metavar="SIZE",
                   help="first size (K/M/G suffixes; default 32M)")
    g.add_argument("-e", "--maxbytes", type=parse_size, default=32 << 20, metavar="SIZE",
                   help="last size (default 32M)")
    g.add_argument("-i", "--stepbytes", type=parse_size, default=1 << 20, metavar="SIZE",
                   help="fixed increment between sizes (default 1M)")
    g.add_argument("-f", "--stepfactor", type=_nonneg, default=0, metavar="F",
                   help="multiplicative factor between sizes (replaces -i)")
    g.add_argument("-n", "--iters", type=_nonneg, default=20, metavar="N",
                   help="timed iterations per size (default 20)")
    g.add_argument("-w", "--warmup_iters", type=_nonneg, default=1, metavar="N",
                   help="warm-up iterations (default 1)")
    g.add_argument("-m", "--agg_iters", type=_positive, default=1, metavar="N",
                   help="operations aggregated in one group per iteration (default 1)")
    g.add_argument("-c", "--check", type=_nonneg, default=1, metavar="N",
                   help="check the results N times per size (0: no check, #wrong N/A)")
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
    g.add_argument("-T", "--timeout", type=_positive, metavar="SECONDS",
                   help="stop every rank after SECONDS (exit status 124)")
    p.add_argument("--plot", metavar="PNG",
                   help="draw algbw and busbw against size (log-log) into PNG "
                   "(needs matplotlib)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
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


def visible_gpus(environ: dict[str, str] | None = None) -> int:
    """A cheap count of the GPUs this process would see (no library is loaded)."""
    env = dict(os.environ) if environ is None else environ
    for var in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        if var in env:
            ids = [x for x in env[var].split(",") if x.strip()]
            if not ids or ids[0].strip() == "-1":
                return 0
            return len(ids)
    nvidia = len(glob.glob("/dev/nvidia[0-9]*"))
    if nvidia:
        return nvidia
    if os.path.exists("/dev/kfd"):
        return len(glob.glob("/dev/dri/renderD*"))
    return 0


def _outside_launcher() -> bool:
    """True when a launcher (mpirun, torchrun, srun) started this process as a rank."""
    try:
        from nccl.run import environment

        environment(exchange_id=False)
        return True
    except Exception:
        return False


class _Progress:
    """'[3/22] all_reduce' on stderr, redrawn in place; only on a terminal."""

    def __init__(self, stream: IO[str], total: int) -> None:
        self.stream, self.total, self.done, self.t0 = stream, total, 0, time.monotonic()
        self.shown = False

    def clear(self) -> None:
        if self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self.shown = False

    def show(self, what: str) -> None:
        pct = 100 * self.done // max(self.total, 1)
        self.stream.write(f"\r\033[K[{self.done}/{self.total} sizes, {pct}%, "
                          f"{time.monotonic() - self.t0:.1f} s] {what}")
        self.stream.flush()
        self.shown = True


def _expected_rows(names: list[str], n_types: int, n_ops: int, root_arg: str, nranks: int,
                   n_sizes: int) -> int:
    total = 0
    for name in names:
        c = COLLECTIVES[name]
        roots = (nranks if root_arg == "all" else 1) if c.rooted else 1
        total += n_types * (n_ops if c.reduces else 1) * roots * n_sizes
    return total


def _spawn(ns: argparse.Namespace, argv: list[str], names: list[str], n_types: int,
           n_ops: int, n_sizes: int, json_path: str | None) -> int:
    nranks = ns.nranks or visible_gpus() or 4
    cmd = [sys.executable, "-m", "nccl.run", "-n", str(nranks), "--backend", ns.backend]
    if ns.timeout:
        cmd += ["--timeout", str(ns.timeout)]
    cmd += ["-m", "nccl.bench", *argv, "--worker"]
    if json_path and not ns.output_file:
        cmd += ["-J", json_path]
    # SIGINT/SIGTERM/SIGHUP go to the launcher, which passes them to every
    # rank; the status is then 128+N (130 for Ctrl-C, 143 for SIGTERM).
    progress = sys.stderr.isatty()
    if not progress:
        with forwarding_signals(cmd) as (proc, fwd):
            return fwd.status(proc.wait())
    bar = _Progress(sys.stderr, _expected_rows(names, n_types, n_ops, ns.root, nranks, n_sizes))
    with forwarding_signals(cmd, stdout=subprocess.PIPE, text=True, bufsize=1) as (proc, fwd):
        assert proc.stdout is not None
        current = names[0] if names else ""
        try:
            for line in proc.stdout:
                bar.clear()
                sys.stdout.write(line)
                sys.stdout.flush()
                if line.startswith("# Collective test starting:"):
                    current = line.split(":", 1)[1].strip()
                elif line.strip() and not line.startswith("#"):
                    bar.done += 1
                if not line.startswith("# Collective test concluded"):
                    bar.show(current)
            return fwd.status(proc.wait())
        finally:
            bar.clear()


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        ns = parser.parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    try:
        if ns.collectives == ["all"]:
            names = list(COLLECTIVES)
        else:
            names = list(dict.fromkeys(resolve_name(c) for c in ns.collectives))
        type_names = _list(ns.datatype, TYPES, "datatype")
        op_names = _list(ns.op, OPS, "op")
        if ns.root != "all":
            int(ns.root)
    except ValueError as e:
        parser.print_usage(sys.stderr)
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    if ns.minbytes > ns.maxbytes:
        print(f"{PROG}: error: -b {ns.minbytes} is larger than -e {ns.maxbytes}",
              file=sys.stderr)
        return 2
    size_list = sizes(ns.minbytes, ns.maxbytes, ns.stepbytes, ns.stepfactor)
    if ns.plot and importlib.util.find_spec("matplotlib") is None:
        print(f"{PROG}: error: --plot needs matplotlib: pip install matplotlib "
              "(or pip install 'nccl4py[plot]')", file=sys.stderr)
        return 2
    in_rank = ns.worker or (ns.nranks is None and _outside_launcher())
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
    json_path = ns.output_file
    tmpdir = None
    if ns.plot and not json_path:
        tmpdir = tempfile.mkdtemp(prefix="nccl4py-bench-")
        json_path = os.path.join(tmpdir, "results.json")
    try:
        status = _spawn(ns, argv, names, len(type_names), len(op_names), len(size_list),
                        json_path)
        if ns.plot and json_path and os.path.exists(json_path):
            from .plot import MissingMatplotlib, plot_file

            try:
                plot_file(json_path, ns.plot)
            except MissingMatplotlib as e:
                print(f"{PROG}: error: {e}", file=sys.stderr)
                return status or 2
            print(f"# plot written to {ns.plot}", file=sys.stderr)
        return status
    finally:
        if tmpdir is not None:
            import shutil

            shutil.rmtree(tmpdir, ignore_errors=True)
