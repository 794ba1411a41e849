#!/usr/bin/env python3
"""Host overhead of nccl.core and nccl.bindings against upstream nccl4py (0.3.1
or 0.6.0) and a ctypes wrapper, on a no-op library.

    python bench/core_overhead.py [--calls N] [--repeats R] [--import-runs K]
                                  [--upstream-version 0.3.1|0.6.0] [--upstream-dir DIR]
                                  [--no-install] [--cpu C]

Measures, in one invocation:

  * per-call host time (ns) of
      - ``Communicator.allreduce(a, b, nccl.core.SUM)`` (nccl.core, C hot path)
        with NumPy float32 arrays of 8 elements, and with torch CPU tensors
        when torch is importable;
      - ``nccl.bindings.all_reduce(ints)`` (this package's low-level call),
        and the same with the communicator as a ``Comm`` object;
      - upstream nccl4py's ``nccl.bindings.nccl.all_reduce(ints)`` (0.5+: with
        a ``Comm`` object, the only form it accepts);
      - ``send``, ``get_version`` and ``comm_count``, ours against upstream's
        (the communicator as upstream takes it; the ratios only);
      - a ctypes wrapper in the style of vLLM's pynccl (bench/_ctypes_pynccl.py);
      - an empty Python function with 7 arguments (the interpreter's floor);
      - on the real host backend, a communicator of one rank (a process of
        its own): ``comm.allreduce`` of the same NumPy arrays (and torch
        tensors) against ``nccl.bindings.all_reduce(ints)`` on the same
        memory, so the library's own work (a copy of 32 bytes) is in both
        (goal: at most 1.5x);
      - ``comm.allreduce`` of ml_dtypes bfloat16 arrays of 8 elements on that
        communicator (when ml_dtypes is importable), against float32's;
      - the same ``comm.allreduce(numpy)`` with the flight recorder off
        (``NCCL4PY_TRACE_BUFFER=0``) and with the watchdog on
        (``NCCL4PY_WATCHDOG_TIMEOUT=600``), each in a process of its own: the
        recorder's cost per call is the difference (goal: at most 50 ns);
  * the time of ``import nccl.core`` (and ``import nccl.bindings``) in a fresh
    interpreter, ours against upstream's;

and prints one table with the ratios against their goals.

The library.  Every call goes to a *no-op library* generated from the API
table (tools/gen/stub.py, every function returns ncclSuccess at once) with
three additions compiled in here: ncclCommCount writes 1 and ncclCommUserRank
writes 0 (nccl.core asks for the size and rank of a communicator), and the
library exports ``nccl4pyHostBackend()``, the marker of a host-memory library,
so that nccl.core accepts NumPy and torch CPU buffers.  The library only
*poses* as a host-memory library to reach the host-buffer code path; it is a
benchmark tool, never a backend.  Its ncclAllReduce also counts its calls,
which the script checks after every timed block (each call of every variant
must reach the C function exactly once).

Upstream.  nccl4py 0.3.1 and what it imports (cuda-pathfinder for
``nccl.bindings``; cuda-core and cuda-bindings for ``nccl.core``; packaging,
typing_extensions) are installed with ``pip install --no-deps --target`` into a
private directory (default ~/.cache/nccl4py-bench/nccl4py-0.3.1), once.  Its
package is also named ``nccl``, so it runs in its own interpreter started with
``-S -s`` (no site-packages, so this package's editable install is not
importable there), PYTHONPATH=<that directory>:<a directory holding only a
link to NumPy>, and LD_PRELOAD=<the no-op library>: upstream's low-level
module looks symbols up with dlsym(RTLD_DEFAULT) first, so it calls the no-op
library without a GPU.  The child checks that ``nccl`` comes from that
directory.  Upstream's ``Communicator.allreduce`` is attempted once there; it
needs a CUDA driver (cuda.core.Device), so without a GPU the table says why
it was not measured.

Method.  The per-call variants run in two long-lived processes (ours and
upstream's) that take turns: R rounds, each timing one block of N calls of
every variant (the order rotates each round); the figure is the median over
the rounds.  Both processes are pinned to one CPU (--cpu), so neither gets a
quieter core than the other.  Imports: each import is timed inside a fresh interpreter (the
time of the ``import`` statement alone, so interpreter start-up noise stays
out), K interpreters per import, interleaved; the figure is the median.
Ours runs with this checkout first on PYTHONPATH (build the extension in
place first: ``pip install -e .`` or ``python setup.py build_ext --inplace``),
so what is measured is this checkout whatever is installed; upstream runs
with ``-S -s`` as above.  A second pair imports NumPy first (upstream's
nccl.core imports NumPy; ours does not), to show nccl4py's own share.  On a
noisy machine the ratios are what to compare.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
UPSTREAM_VERSIONS = ("0.3.1", "0.6.0")
UPSTREAM_VERSION = UPSTREAM_VERSIONS[0]  # --upstream-version


def upstream_specs() -> list[str]:
    """Everything upstream imports for `import nccl.bindings` and `import
    nccl.core` (NumPy is taken from this interpreter)."""
    return [f"nccl4py=={UPSTREAM_VERSION}", "cuda-pathfinder==1.9.1", "cuda-core==1.2.2",
            "cuda-bindings==13.5.0", "packaging==26.4", "typing_extensions==4.16.0"]


# ints for the low-level calls: send, recv, count, Float32, Sum, comm, stream
LOW_ARGS = (0x7F00_0000_1000, 0x7F00_0000_2000, 8, 7, 0, 0x5500_0000, 0)
FAKE_COMM = 0x5500_0000
# Other low-level calls, ours against upstream (the communicator as upstream
# 0.5+ takes it): name -> (function name, arguments before the communicator,
# arguments after it).  They do not reach the counting ncclAllReduce.
OTHER_CALLS = {
    "send": ("send", (0x7F00_0000_1000, 8, 7, 1), (0,)),
    "get_version": ("get_version", None, ()),
    "comm_count": ("comm_count", (), ()),
}


class Star(tuple):
    """An argument of loop() that the timed call unpacks: loop(f, Star(args))
    times ``f(*args)``, as a caller holding a tuple writes it."""

    __slots__ = ()


def loop(f, *args, **kwargs):
    """A timing loop ``run(n)`` that calls ``f(*args, **kwargs)`` n times.

    The loop is the one a hand-written benchmark has: the call spelled out
    (the positional arguments, a Star one unpacked, then the keyword ones)
    with f and every argument bound as default values, so that they are
    locals of the loop and each iteration costs the call alone.  Its source is
    generated because the number and the kind of the arguments vary."""
    bound = {"f": f}
    spelled = []
    for i, a in enumerate(args):
        bound[f"a{i}"] = tuple(a) if isinstance(a, Star) else a  # *a is fastest on a tuple
        spelled.append(f"*a{i}" if isinstance(a, Star) else f"a{i}")
    for k, v in kwargs.items():
        bound[f"kw_{k}"] = v
        spelled.append(f"{k}=kw_{k}")
    params = ", ".join(f"{name}={name}" for name in bound)
    exec(f"def run(n, {params}):\n"  # the defaults are taken from `bound`
         f"    for _ in range(n):\n"
         f"        f({', '.join(spelled)})\n", bound)
    return bound["run"]


def other_benches(mod, comm, prefix: str) -> dict:
    """Timing loops of OTHER_CALLS through module `mod`, named prefix + name."""
    return {prefix + name: loop(getattr(mod, fname),
                                Star(() if before is None else before + (comm,) + after))
            for name, (fname, before, after) in OTHER_CALLS.items()}


# ---------------------------------------------------------------- the library

EXTRA_C = """
/* Added by bench/core_overhead.py: the no-op library poses as a host-memory
 * library so that nccl.core accepts host buffers.  A benchmark tool, never a
 * backend. */
static unsigned long long bench_allreduce_calls;

EXPORT unsigned long long nccl4pyBenchAllReduceCalls(void) { return bench_allreduce_calls; }

EXPORT int nccl4pyHostBackend(void) { return NCCL4PY_ABI_VERSION_CODE; }

EXPORT %(allreduce)s
{
    %(allreduce_void)s
    bench_allreduce_calls++;
    return ncclSuccess;
}

EXPORT %(allreduce_cfg)s
{
    %(allreduce_cfg_void)s
    bench_allreduce_calls++;
    return ncclSuccess;
}

EXPORT %(count)s
{
    (void)%(count_comm)s;
    *%(count_out)s = 1;
    return ncclSuccess;
}

EXPORT %(rank)s
{
    (void)%(rank_comm)s;
    *%(rank_out)s = 0;
    return ncclSuccess;
}
"""


def build_noop(outdir: Path) -> Path:
    sys.path.insert(0, str(ROOT / "tools"))
    from gen import api as gen_api
    from gen import stub

    entries = {e.name: e for e in gen_api.parse_table()}
    ar, cnt, rk = entries["ncclAllReduce"], entries["ncclCommCount"], entries["ncclCommUserRank"]
    arc = entries["ncclAllReduceConfig"]
    extra = EXTRA_C % {
        "allreduce": ar.proto("ncclAllReduce"),
        "allreduce_void": " ".join(f"(void){p.name};" for p in ar.params),
        "allreduce_cfg": arc.proto("ncclAllReduceConfig"),
        "allreduce_cfg_void": " ".join(f"(void){p.name};" for p in arc.params),
        "count": cnt.proto("ncclCommCount"), "count_comm": cnt.params[0].name,
        "count_out": cnt.params[1].name,
        "rank": rk.proto("ncclCommUserRank"), "rank_comm": rk.params[0].name,
        "rank_out": rk.params[1].name,
    }
    src = outdir / "noop_host.c"
    src.write_text(stub.gen_stub_c(list(entries.values()), noop=True) + extra)
    lib = outdir / "libnccl_noop_host.so"
    omit = [f"-DSTUB_OMIT_{n}" for n in ("ncclAllReduce", "ncclAllReduceConfig", "ncclCommCount",
                                          "ncclCommUserRank")]
    subprocess.run([os.environ.get("CC", "cc"), "-O2", "-shared", "-fPIC", f"-I{ROOT / 'src'}",
                    *omit, "-o", str(lib), str(src)], check=True)
    return lib


# ------------------------------------------------------------------ upstream

def default_upstream_dir() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "nccl4py-bench" / f"nccl4py-{UPSTREAM_VERSION}"


def ensure_upstream(target: Path, install: bool) -> str | None:
    """Install upstream into `target` unless there; None, or why it is unavailable."""
    marker = target / ".nccl4py-bench-specs"
    specs = upstream_specs()
    want = "\n".join(specs)
    if marker.is_file() and marker.read_text() == want:
        return None
    if not install:
        return f"not installed in {target} (--no-install)"
    print(f"# installing {' '.join(specs)} into {target} (once)", file=sys.stderr)
    tmp = target.with_name(target.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet",
                        "--disable-pip-version-check", "--no-deps", "--target", str(tmp),
                        *specs])
    if r.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        return f"pip install failed (status {r.returncode})"
    (tmp / marker.name).write_text(want)
    shutil.rmtree(target, ignore_errors=True)
    os.replace(tmp, target)
    return None


def numpy_only_dir(outdir: Path) -> Path:
    """A directory holding only links to this interpreter's NumPy."""
    import numpy

    site = Path(numpy.__file__).resolve().parent.parent
    d = outdir / "numpy_only"
    d.mkdir()
    for name in ("numpy", "numpy.libs"):
        if (site / name).exists():
            (d / name).symlink_to(site / name)
    return d


def upstream_cmd_env(updir: Path, npdir: Path, lib: Path | None) -> tuple[list[str], dict]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "NCCL_LIBRARY", "LD_PRELOAD")}
    env["PYTHONPATH"] = f"{updir}{os.pathsep}{npdir}"
    if lib is not None:
        env["LD_PRELOAD"] = str(lib)
    return [sys.executable, "-S", "-s"], env


def ours_env() -> dict:
    """The environment of our processes: this checkout first on the path (its
    extension built in place, as an editable install has it)."""
    env = {k: v for k, v in os.environ.items() if k not in ("NCCL_LIBRARY", "LD_PRELOAD")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


# ------------------------------------------------------------------ children

# Flight recorder settings compared with the default run (recorder on, 2000
# entries, no watchdog): the same comm.allreduce(numpy) in processes of their own.
TRACE_VARIANTS = {
    "trace_off": {"NCCL4PY_TRACE_BUFFER": "0"},
    "watchdog": {"NCCL4PY_WATCHDOG_TIMEOUT": "600"},
}


def host_benches(benches: dict, notes: dict) -> list:
    """The loops of the host-backend process (one rank); the objects to
    destroy at the end."""
    import numpy as np

    import nccl
    import nccl.bindings as b
    import nccl.core
    from nccl import _nccl

    if not os.path.realpath(nccl.__file__).startswith(str(ROOT) + os.sep):
        raise SystemExit(f"imported nccl from {nccl.__file__}, not from {ROOT}")
    comm = nccl.core.Communicator.init(1, 0, nccl.core.get_unique_id())
    assert _nccl.library_family() == "host", _nccl.library_family()
    a = np.arange(8, dtype=np.float32)
    out = np.empty_like(a)
    benches["host_hl_numpy"] = loop(comm.allreduce, a, out, nccl.core.SUM)
    low = (a.ctypes.data, out.ctypes.data, 8, int(b.DataType.Float32), int(b.RedOp.Sum),
           comm.ptr, 0)
    benches["host_ll"] = loop(b.all_reduce, Star(low))  # a and out stay bound in the loop above
    try:
        import torch
    except Exception:  # noqa: BLE001 - any failure means "not importable"
        pass
    else:
        ta = torch.arange(8, dtype=torch.float32)
        benches["host_hl_torch"] = loop(comm.allreduce, ta, torch.empty_like(ta), nccl.core.SUM)
    try:
        import ml_dtypes
    except Exception:  # noqa: BLE001 - any failure means "not importable"
        notes["ml_dtypes"] = "ml_dtypes not importable"
    else:
        ba = np.arange(8).astype(ml_dtypes.bfloat16)
        benches["host_hl_bf16"] = loop(comm.allreduce, ba, np.empty_like(ba), nccl.core.SUM)
    notes["host_lib"] = b.get_library_path()
    return [comm]


def child_main(kind: str, libpath: str, updir: str | None, cpu: int) -> int:
    """A long-lived timing process: answers `name calls` with ns/call."""
    import ctypes

    if cpu >= 0:
        os.sched_setaffinity(0, {cpu})

    counter = None  # the no-op library's count of ncclAllReduce calls
    if kind != "host":
        lib = ctypes.CDLL(libpath)
        counter = lib.nccl4pyBenchAllReduceCalls
        counter.restype = ctypes.c_ulonglong
    benches: dict = {}
    notes: dict = {}
    to_destroy: list = []

    if kind == "host":
        to_destroy = host_benches(benches, notes)
    elif kind == "ours":
        import numpy as np

        import nccl
        import nccl.bindings as b
        import nccl.core
        from nccl import _nccl
        from _ctypes_pynccl import CtypesNccl

        if not os.path.realpath(nccl.__file__).startswith(str(ROOT) + os.sep):
            raise SystemExit(f"imported nccl from {nccl.__file__}, not from {ROOT}")
        assert b.get_library_path() == libpath, b.get_library_path()
        assert _nccl.library_family() == "host", _nccl.library_family()
        notes["ours_file"] = nccl.__file__
        comm = nccl.core.Communicator(FAKE_COMM)
        assert comm.nranks == 1 and comm.rank == 0, (comm.nranks, comm.rank)
        SUM = nccl.core.SUM
        a = np.arange(8, dtype=np.float32)
        out = np.empty_like(a)

        benches["hl_numpy"] = loop(comm.allreduce, a, out, SUM)
        benches["hl_config_none"] = loop(comm.allreduce, a, out, SUM, config=None)
        if hasattr(nccl.core, "NCCLCollConfig"):
            cfg = nccl.core.NCCLCollConfig(min_ctas=1)
            benches["hl_config"] = loop(comm.allreduce, a, out, SUM, config=cfg)
        try:
            import torch
        except Exception as e:  # noqa: BLE001 - any failure means "not importable"
            notes["torch"] = f"torch not importable ({type(e).__name__}: {e})"
        else:
            notes["torch"] = f"torch {torch.__version__}"
            ta = torch.arange(8, dtype=torch.float32)
            benches["hl_torch"] = loop(comm.allreduce, ta, torch.empty_like(ta), SUM)
        benches["ll_ours"] = loop(b.all_reduce, Star(LOW_ARGS))
        with_comm = LOW_ARGS[:5] + (b.Comm(FAKE_COMM),) + LOW_ARGS[6:]
        benches["ll_ours_comm"] = loop(b.all_reduce, Star(with_comm))
        benches.update(other_benches(b, b.Comm(FAKE_COMM), "other_ours_"))
        pyn = CtypesNccl(libpath)
        assert pyn.get_version() == b.get_version()
        benches["ctypes"] = loop(pyn.all_reduce, Star(LOW_ARGS))

        def empty(s, r, c, d, o, cm, st):  # the interpreter's floor
            return None

        benches["empty"] = loop(empty, Star(LOW_ARGS))
    else:
        import nccl.bindings.nccl as ub

        here = os.path.realpath(ub.__file__)  # 0.5+: nccl is a namespace package
        if not here.startswith(os.path.realpath(updir) + os.sep) or any(
                "editable" in m for m in sys.modules):
            raise SystemExit(f"upstream child imported the wrong nccl: {here}")
        notes["upstream_file"] = here

        # nccl4py 0.5+ takes the communicator as a Comm object only
        up_args = LOW_ARGS[:5] + (ub.Comm(FAKE_COMM),) + LOW_ARGS[6:] if hasattr(
            ub, "Comm") else LOW_ARGS

        benches["ll_upstream"] = loop(ub.all_reduce, Star(up_args))
        benches.update(other_benches(ub, up_args[5], "other_upstream_"))
        # upstream's high-level allreduce, if it can run here
        try:
            import numpy as np

            import nccl.core as uc

            comm = uc.Communicator(FAKE_COMM)
            a = np.arange(8, dtype=np.float32)
            out = np.empty_like(a)
            comm.allreduce(a, out, uc.SUM)
        except Exception as e:  # noqa: BLE001 - reported, not raised
            msg = str(e).splitlines()[0] if str(e) else ""
            notes["hl_upstream"] = f"{type(e).__name__}: {msg}"
        else:
            benches["hl_upstream"] = loop(comm.allreduce, a, out, uc.SUM)

    variant = os.environ.get("NCCL4PY_BENCH_VARIANT")
    if variant:  # a flight-recorder setting: only the high-level call, named for it
        benches = {f"hl_numpy_{variant}": benches["hl_numpy"]}
    for name, fn in benches.items():  # warm-up, and each call reaches the library once
        before = counter() if counter else 0
        fn(5000)
        if counter and counted(name) and counter() - before != 5000:
            raise SystemExit(f"{name}: {counter() - before} library calls for 5000 calls")
    print(json.dumps({"benches": list(benches), "notes": notes}), flush=True)
    for line in sys.stdin:
        name, calls = line.split()
        calls = int(calls)
        fn = benches[name]
        before = counter() if counter else 0
        t0 = time.perf_counter_ns()
        fn(calls)
        dt = time.perf_counter_ns() - t0
        if counter and counted(name) and counter() - before != calls:
            raise SystemExit(f"{name}: {counter() - before} library calls for {calls} calls")
        print(dt / calls, flush=True)
    for c in to_destroy:
        c.destroy()
    return 0


def counted(bench: str) -> bool:
    """Whether each call of this variant reaches the counting ncclAllReduce."""
    return bench != "empty" and not bench.startswith("other_")


class Child:
    def __init__(self, cmd: list[str], env: dict, cwd: str):
        self.p = subprocess.Popen(cmd, env=env, cwd=cwd, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, bufsize=1)
        line = self.p.stdout.readline()
        if not line:
            self.p.wait()
            raise RuntimeError(f"{cmd[-3:]} exited with status {self.p.returncode}")
        info = json.loads(line)
        self.benches, self.notes = info["benches"], info["notes"]

    def run(self, name: str, calls: int) -> float:
        self.p.stdin.write(f"{name} {calls}\n")
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError(f"the timing process died during {name}")
        return float(line)

    def close(self) -> None:
        self.p.stdin.close()
        self.p.wait()


# ------------------------------------------------------------------- imports

IMPORT_SNIPPET = ("import time; {pre}t = time.perf_counter(); import {mod}; "
                  "print((time.perf_counter() - t) * 1e3)")


def import_times(runs: int, updir: Path | None, npdir: Path, cwd: str) -> tuple[dict, dict]:
    """ms of `import X` measured inside K fresh interpreters (median)."""
    base_env = ours_env()
    # (who, label) -> (interpreter flags, env, module, import first)
    what = [("nccl.core", "nccl.core", ""), ("nccl.core|numpy", "nccl.core", "numpy"),
            ("nccl.bindings", "nccl.bindings", "")]
    cmds = {f"ours:{label}": ([sys.executable], base_env, mod, pre) for label, mod, pre in what}
    errors = {}
    check = subprocess.run([sys.executable, "-c", "import nccl.core, nccl; print(nccl.__file__)"],
                           env=base_env, cwd=cwd, capture_output=True, text=True, check=True)
    if not os.path.realpath(check.stdout.strip()).startswith(str(ROOT) + os.sep):
        raise SystemExit(f"`import nccl` finds {check.stdout.strip()}, not this checkout")
    if updir is not None:
        pre_flags, env = upstream_cmd_env(updir, npdir, None)
        check = subprocess.run(pre_flags + ["-c", "import nccl.core, nccl.bindings.nccl; "
                                            "print(nccl.bindings.nccl.__file__)"],
                               env=env, cwd=cwd, capture_output=True, text=True)
        if check.returncode != 0 or not os.path.realpath(check.stdout.strip()).startswith(
                os.path.realpath(updir)):
            errors["upstream"] = (check.stderr.strip().splitlines() or ["?"])[-1]
        else:
            for label, mod, pre in what:
                if mod == "nccl.bindings":
                    mod = "nccl.bindings.nccl"
                cmds[f"upstream:{label}"] = (pre_flags, env, mod, pre)
    samples: dict[str, list[float]] = {k: [] for k in cmds}
    names = list(cmds)
    for i in range(runs):
        for k in names[i % len(names):] + names[:i % len(names)]:
            flags, env, mod, pre = cmds[k]
            code = IMPORT_SNIPPET.format(pre=f"import {pre}; " if pre else "", mod=mod)
            r = subprocess.run(flags + ["-c", code], env=env, cwd=cwd, check=True,
                               capture_output=True, text=True)
            samples[k].append(float(r.stdout.split()[-1]))
    return {k: statistics.median(v) for k, v in samples.items()}, errors


# ---------------------------------------------------------------------- main

def main() -> int:
    global UPSTREAM_VERSION
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=100_000, help="calls per timed block")
    ap.add_argument("--repeats", type=int, default=9, help="timed blocks per variant")
    ap.add_argument("--import-runs", type=int, default=7, help="fresh interpreters per import")
    ap.add_argument("--upstream-version", choices=UPSTREAM_VERSIONS, default=UPSTREAM_VERSION,
                    help="the upstream nccl4py to compare with (default %(default)s)")
    ap.add_argument("--upstream-dir", type=Path,
                    help="where it is installed (default ~/.cache/nccl4py-bench/nccl4py-VERSION)")
    ap.add_argument("--no-install", action="store_true", help="never run pip")
    ap.add_argument("--cpu", type=int, default=None,
                    help="CPU both timing processes are pinned to (default: the last one "
                         "this process may use; -1: no pinning)")
    ap.add_argument("--child", choices=("ours", "upstream", "host"), help=argparse.SUPPRESS)
    ap.add_argument("--lib", help=argparse.SUPPRESS)
    ns = ap.parse_args()
    UPSTREAM_VERSION = ns.upstream_version
    ns.upstream_dir = ns.upstream_dir or default_upstream_dir()
    if ns.child:
        return child_main(ns.child, ns.lib, str(ns.upstream_dir), ns.cpu)
    if ns.cpu is None:
        ns.cpu = max(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else -1

    up_err = ensure_upstream(ns.upstream_dir, not ns.no_install)
    updir = None if up_err else ns.upstream_dir.resolve()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        lib = build_noop(tmp)
        npdir = numpy_only_dir(tmp)
        script = str(Path(__file__).resolve())
        env = ours_env()
        env["NCCL_LIBRARY"] = str(lib)
        pin = ["--cpu", str(ns.cpu)]
        children = [Child([sys.executable, script, "--child", "ours", "--lib", str(lib), *pin],
                          env, d)]
        # the flight recorder off, and on with the watchdog (the default: on, no watchdog)
        for variant, extra in TRACE_VARIANTS.items():
            children.append(Child([sys.executable, script, "--child", "ours", "--lib", str(lib),
                                   *pin], {**env, **extra, "NCCL4PY_BENCH_VARIANT": variant}, d))
        # the real host backend, one rank (no no-op library)
        host_env = {**ours_env(), "NCCL4PY_BACKEND": "host"}
        children.append(Child([sys.executable, script, "--child", "host", *pin], host_env, d))
        if updir is not None:
            pre, uenv = upstream_cmd_env(updir, npdir, lib)
            try:
                children.append(Child(pre + [script, "--child", "upstream", "--lib", str(lib),
                                             "--upstream-dir", str(updir), *pin], uenv, d))
            except RuntimeError as e:
                up_err = str(e)
        jobs = [(c, b) for c in children for b in c.benches]
        samples: dict[str, list[float]] = {b: [] for _, b in jobs}
        for i in range(ns.repeats):
            k = i % len(jobs)
            for c, b in jobs[k:] + jobs[:k]:
                samples[b].append(c.run(b, ns.calls))
        notes = {}
        for c in children:
            notes.update(c.notes)
            c.close()
        per_call = {b: statistics.median(v) for b, v in samples.items()}
        imports, imp_err = import_times(ns.import_runs, updir, npdir, d)
    report(ns, per_call, notes, imports, up_err, imp_err)
    return 0


def report(ns, per_call: dict, notes: dict, imports: dict, up_err, imp_err: dict) -> None:
    up_missing = f"upstream unavailable: {up_err}" if up_err else None
    rows: list[tuple[str, str, str, str, str]] = []  # item, value, unit, goal, verdict

    def val(name: str, label: str, unit: str, missing: str) -> None:
        v = per_call.get(name) if unit == "ns/call" else imports.get(name)
        rows.append((label, f"{v:.1f}" if v is not None else "-", unit, "",
                     "" if v is not None else missing))

    torch_note = notes.get("torch", "")
    hl_up_note = notes.get("hl_upstream") or up_missing or ""
    val("hl_numpy", "ours  comm.allreduce(numpy f32[8])", "ns/call", "")
    val("hl_config_none", "ours  comm.allreduce(numpy f32[8], config=None)", "ns/call", "")
    val("hl_config", "ours  comm.allreduce(numpy f32[8], config=NCCLCollConfig(min_ctas=1))",
        "ns/call", "")
    val("hl_numpy_trace_off", "ours  comm.allreduce(numpy f32[8]), NCCL4PY_TRACE_BUFFER=0",
        "ns/call", "")
    val("hl_numpy_watchdog", "ours  comm.allreduce(numpy f32[8]), NCCL4PY_WATCHDOG_TIMEOUT=600",
        "ns/call", "")
    val("hl_torch", "ours  comm.allreduce(torch f32[8])", "ns/call", torch_note)
    val("ll_ours", "ours  nccl.bindings.all_reduce(ints)", "ns/call", "")
    val("ll_ours_comm", "ours  nccl.bindings.all_reduce(ints, comm=Comm)", "ns/call", "")
    val("ll_upstream", f"upstream {UPSTREAM_VERSION} nccl.bindings.nccl.all_reduce(ints"
        f"{', comm=Comm' if UPSTREAM_VERSION >= '0.5' else ''})",
        "ns/call", up_missing or "")
    val("hl_upstream", f"upstream {UPSTREAM_VERSION} comm.allreduce(numpy f32[8])", "ns/call",
        f"not run: {hl_up_note}" if "hl_upstream" not in per_call else "")
    val("ctypes", "ctypes pynccl-style all_reduce(ints)", "ns/call", "")
    val("empty", "empty Python function, 7 args", "ns/call", "")
    val("host_hl_numpy", "host backend, 1 rank: comm.allreduce(numpy f32[8])", "ns/call", "")
    val("host_hl_torch", "host backend, 1 rank: comm.allreduce(torch f32[8])", "ns/call",
        torch_note)
    val("host_hl_bf16", "host backend, 1 rank: comm.allreduce(ml_dtypes bfloat16[8])",
        "ns/call", notes.get("ml_dtypes", ""))
    val("host_ll", "host backend, 1 rank: bindings.all_reduce(ints)", "ns/call", "")
    up_imp_missing = up_missing or (f"upstream import failed: {imp_err['upstream']}"
                                    if "upstream" in imp_err else "")
    val("ours:nccl.core", "ours  import nccl.core", "ms", "")
    val("upstream:nccl.core", f"upstream {UPSTREAM_VERSION} import nccl.core", "ms", up_imp_missing)
    val("ours:nccl.core|numpy", "ours  import nccl.core, numpy already imported", "ms", "")
    val("upstream:nccl.core|numpy",
        f"upstream {UPSTREAM_VERSION} import nccl.core, numpy already imported", "ms",
        up_imp_missing)
    val("ours:nccl.bindings", "ours  import nccl.bindings", "ms", "")
    val("upstream:nccl.bindings", f"upstream {UPSTREAM_VERSION} import nccl.bindings.nccl", "ms",
        up_imp_missing)

    def ratio(label: str, num: float | None, den: float | None, goal: float | None) -> None:
        if num is None or den is None:
            rows.append((label, "-", "", f"<= {goal:g}" if goal else "", "n/a (not measured)"))
            return
        r = num / den
        verdict = ("met" if r <= goal else "NOT met") if goal else ""
        rows.append((label, f"{r:.2f}", "x", f"<= {goal:g}" if goal else "", verdict))

    pc = per_call.get

    def diff(label: str, a: float | None, b: float | None, goal: float) -> None:
        if a is None or b is None:
            rows.append((label, "-", "ns/call", f"<= {goal:g}", "n/a (not measured)"))
            return
        rows.append((label, f"{a - b:.1f}", "ns/call", f"<= {goal:g}",
                     "met" if a - b <= goal else "NOT met"))

    diff("flight recorder: default - NCCL4PY_TRACE_BUFFER=0", pc("hl_numpy"),
         pc("hl_numpy_trace_off"), 50)
    diff("watchdog on - NCCL4PY_TRACE_BUFFER=0", pc("hl_numpy_watchdog"),
         pc("hl_numpy_trace_off"), 50)
    ratio("high/low: comm.allreduce(numpy) / bindings.all_reduce", pc("hl_numpy"), pc("ll_ours"), 3)
    ratio("config=None / plain comm.allreduce(numpy)", pc("hl_config_none"), pc("hl_numpy"), None)
    if pc("hl_config") is not None and pc("hl_numpy") is not None:
        extra = pc("hl_config") - pc("hl_numpy")
        rows.append(("config=NCCLCollConfig(...) minus plain", f"{extra:.0f}", "ns", "<= 150",
                     "met" if extra <= 150 else "NOT met"))
    ratio("high/low: comm.allreduce(torch) / bindings.all_reduce", pc("hl_torch"), pc("ll_ours"), 3)
    ratio("host backend, 1 rank: comm.allreduce(numpy) / bindings.all_reduce",
          pc("host_hl_numpy"), pc("host_ll"), 1.5)
    ratio("host backend, 1 rank: comm.allreduce(torch) / bindings.all_reduce",
          pc("host_hl_torch"), pc("host_ll"), None)
    ratio("host backend, 1 rank: comm.allreduce(bfloat16) / comm.allreduce(float32)",
          pc("host_hl_bf16"), pc("host_hl_numpy"), None)
    ratio("low-level ours / upstream", pc("ll_ours"), pc("ll_upstream"), 0.6)
    ratio("low-level ours with a Comm / upstream", pc("ll_ours_comm"), pc("ll_upstream"),
          0.8 if UPSTREAM_VERSION >= "0.5" else None)
    comm = "Comm" if UPSTREAM_VERSION >= "0.5" else "int"
    for name, (fname, before, after) in OTHER_CALLS.items():
        args = "" if before is None else ", ".join(
            ["ints"] * bool(before) + [comm] + ["ints"] * bool(after))
        ratio(f"low-level ours / upstream: {fname}({args})", pc(f"other_ours_{name}"),
              pc(f"other_upstream_{name}"), None)
    ratio("low-level ours / ctypes", pc("ll_ours"), pc("ctypes"), 0.1)
    ratio("high-level ours (numpy) / ctypes", pc("hl_numpy"), pc("ctypes"), None)
    ratio("high-level ours (torch) / ctypes", pc("hl_torch"), pc("ctypes"), None)
    ratio("high-level ours (numpy) / upstream high-level", pc("hl_numpy"), pc("hl_upstream"), None)
    ratio("import nccl.core ours / upstream", imports.get("ours:nccl.core"),
          imports.get("upstream:nccl.core"), 0.2)
    ratio("import nccl.core, numpy already imported, ours / upstream",
          imports.get("ours:nccl.core|numpy"), imports.get("upstream:nccl.core|numpy"), None)
    ratio("import nccl.bindings ours / upstream", imports.get("ours:nccl.bindings"),
          imports.get("upstream:nccl.bindings"), None)

    print(f"# nccl4py host overhead on a no-op library vs upstream nccl4py {UPSTREAM_VERSION} and "
          f"ctypes (median of {ns.repeats} x {ns.calls} calls; imports: timed inside "
          f"{ns.import_runs} fresh interpreters, median; Python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs, timing processes on CPU {ns.cpu})")
    w = max(len(r[0]) for r in rows)
    print(f"{'measurement':<{w}}  {'value':>9}  {'unit':<7}  {'goal':<6}  verdict / note")
    for label, v, unit, goal, verdict in rows:
        print(f"{label:<{w}}  {v:>9}  {unit:<7}  {goal:<6}  {verdict}".rstrip())


if __name__ == "__main__":
    sys.exit(main())
