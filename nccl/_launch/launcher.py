"""``python -m nccl.run``: start N ranks of a Python program on this machine.

The parent checks ``-n`` against the machine's limits, makes one unique id
with the selected library and hands it, with the rank layout, to every rank
through environment variables.  It then supervises the ranks: it forwards
SIGINT/SIGTERM/SIGHUP, stops the survivors when one rank fails, forwards
their output in bounded pieces (optionally prefixed), and enforces a timeout.
Each rank runs in its own session; when every rank has exited, whatever is
left in a rank's process group (processes the rank started) is stopped, as
mpiexec does.  See docs/launcher.md.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import queue
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time

from nccl._cli import add_version
from nccl._discovery import gpus_visible
from nccl._launch import forward, hostshm, limits, procgroup, uniqueid
from nccl._launch.argtypes import number

PROG = "python -m nccl.run"
TIMEOUT_EXIT = 124
GRACE_SECONDS = 3.0      # between SIGTERM and SIGKILL when stopping ranks
CHUNK_BYTES = 64 * 1024  # output is forwarded in pieces of at most this size
_KILL_WAIT_SECONDS = 5.0  # after SIGKILL, before giving up on a rank

_DESCRIPTION = """\
Start N ranks of a Python program on this machine, all sharing one NCCL
unique id created here by the selected library.  Inside the program,
nccl.run.environment() returns the rank, the number of ranks and the id."""

_EPILOG = """\
variables set in every rank:
  NCCL4PY_RANK, NCCL4PY_NRANKS, NCCL4PY_LOCAL_RANK, NCCL4PY_LOCAL_SIZE
  RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE (as torchrun sets them)
  MASTER_ADDR=127.0.0.1, MASTER_PORT (a free port), so that torch's
    init_process_group() with env:// works as under torchrun
  NCCL4PY_UNIQUE_ID (the id as 256 hex digits)
  NCCL4PY_BACKEND=host when the host backend is selected

backends:
  auto  (default) NCCL_LIBRARY, NCCL4PY_BACKEND or NCCL4PY_PLATFORM when
        already set, as the loader does; otherwise the GPU library when GPUs
        are visible (/dev/nvidia* or /dev/kfd, not hidden by
        CUDA/HIP/ROCR_VISIBLE_DEVICES), else the host backend
  host  the bundled host backend (NCCL4PY_BACKEND=host; NCCL_LIBRARY is dropped)
  nccl  NCCL4PY_PLATFORM=cuda (the loader finds libnccl; NCCL_LIBRARY is kept)
  rccl  NCCL4PY_PLATFORM=rocm (the loader finds librccl; NCCL_LIBRARY is kept)
  A variable of yours that --backend host/nccl/rccl overrides is named on
  stderr.

limits:
  -n is checked before anything starts: at most 1024 ranks on the host
  backend, within RLIMIT_NPROC, and at most 4 ranks per CPU (or 8) unless
  --oversubscribe is given.

output:
  rank output is forwarded as it arrives, a line at a time: a line ending in
  a newline or a carriage return (progress lines) is passed on at once, and
  a longer line than 64 KiB is passed on in 64 KiB pieces (with -t each
  piece is its own tagged line), so the launcher's memory stays small.  On
  stderr, what a rank writes in one go (lines less than 0.1 s apart, for at
  most 1 s) is passed on as one block, so that the tracebacks of several
  failing ranks do not mix.

exit status:
  0 when every rank exits 0.  When a rank fails, the others are stopped
  (SIGTERM, then SIGKILL after 3 s) and the status is that of the first rank
  that failed (128+N for a rank killed by signal N).  124 after --timeout,
  128+N after the launcher received signal N (130 for Ctrl-C, 143 for
  SIGTERM), 1 when the unique id cannot be created, 2 for usage errors.

signals:
  SIGINT, SIGTERM and SIGHUP are forwarded to the ranks and to the processes
  they started; a second one kills them.  Only rank 0 reads the launcher's
  stdin.

cleanup:
  each rank runs in its own session and process group.  When every rank has
  exited (successfully or not), processes left in those groups (started by a
  rank and still running) get SIGTERM, then SIGKILL after 1 s, as mpiexec
  does.  A process that moved to a session of its own (setsid, daemons) is
  out of reach.  With the host backend, the /dev/shm names of segments whose
  processes are all gone (ranks stopped in creation) are removed too."""


# ----------------------------------------------------------------- arguments

_positive_int = number(int, "an integer", lambda v: v >= 1, "must be at least 1")
_positive_float = number(float, "a number", lambda v: v > 0, "must be positive")


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        usage="%(prog)s -n N [options] (prog.py | -m module) [args ...]",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-n", "-np", "--nranks", type=_positive_int, required=True,
                        metavar="N", help="number of ranks to start")
    parser.add_argument("--backend", choices=("auto", "host", "nccl", "rccl"),
                        default="auto", help="library that makes the unique id and that "
                        "the ranks load (default: auto, see below)")
    parser.add_argument("-t", "--tag-output", action="store_true",
                        help="prefix every output line with '[rank]: ' (stdout and "
                        "stderr stay separate; lines are never mixed)")
    parser.add_argument("--timeout", type=_positive_float, metavar="SECONDS",
                        help="stop all ranks after SECONDS and exit with status 124")
    parser.add_argument("--oversubscribe", action="store_true",
                        help="allow more than 4 ranks per CPU (see limits below)")
    add_version(parser)
    # Shown in the help; the command itself is split off before parsing.
    parser.add_argument("-m", dest="module", metavar="MODULE",
                        help="run library module MODULE as a script, like python -m")
    parser.add_argument("program", nargs="?", metavar="prog.py",
                        help="the Python script each rank runs")
    parser.add_argument("args", nargs="*", metavar="args",
                        help="arguments for the program")
    return parser


def value_options(parser: argparse.ArgumentParser) -> frozenset[str]:
    """The option strings of *parser* that take a separate value, but ``-m``
    (where the program starts: split_command() handles it)."""
    return frozenset(s for action in parser._actions if action.nargs != 0
                     for s in action.option_strings) - {"-m"}


# Used to find where the program starts: derived from the parser, never a copy.
_VALUE_OPTIONS = value_options(build_parser())


def split_command(argv: list[str]) -> tuple[list[str], str | None, list[str]]:
    """Split *argv* into (launcher options, module or None, command).

    The command starts at the first argument that is not an option or an
    option's value, after ``--``, or after ``-m MODULE``; everything from there
    on belongs to the program, even arguments that look like our options.
    """
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            return argv[:i], None, argv[i + 1:]
        if arg == "-m":
            if i + 1 == len(argv):
                return argv[:i] + ["-m"], None, []  # argparse reports the missing value
            return argv[:i], argv[i + 1], argv[i + 2:]
        if arg.startswith("-m") and not arg.startswith("--"):
            return argv[:i], arg[2:], argv[i + 1:]
        if arg == "-" or not arg.startswith("-"):
            return argv[:i], None, argv[i:]
        i += 2 if arg in _VALUE_OPTIONS else 1
    return argv, None, []


# ------------------------------------------------------------------- backend

def select_backend(choice: str, environ, dev: str | None = None,
                   notes: list[str] | None = None) -> str:
    """Apply ``--backend choice`` to *environ* (a mutable mapping); describe the result.

    With ``auto``, a library the caller chose (``NCCL_LIBRARY``,
    ``NCCL4PY_BACKEND``, ``NCCL4PY_PLATFORM``) is kept, as the loader keeps
    it.  An explicit choice that overrides one of them appends a line saying
    so to *notes*."""
    def override(name: str, value: str | None) -> None:
        old = environ.get(name)
        if old and old != value and notes is not None:
            what = "is dropped" if value is None else f"becomes {name}={value}"
            notes.append(f"--backend {choice}: {name}={old} {what}")
        if value is None:
            environ.pop(name, None)
        else:
            environ[name] = value

    if choice == "host":
        override("NCCL_LIBRARY", None)
        override("NCCL4PY_BACKEND", "host")
        if environ.get("NCCL4PY_PLATFORM") and notes is not None:
            notes.append(f"--backend host: NCCL4PY_PLATFORM={environ['NCCL4PY_PLATFORM']} "
                         "does not apply (NCCL4PY_BACKEND=host selects the host backend)")
        return "host"
    if choice in ("nccl", "rccl"):
        override("NCCL4PY_BACKEND", None)
        override("NCCL4PY_PLATFORM", "cuda" if choice == "nccl" else "rocm")
        return choice
    if choice != "auto":
        raise ValueError(f"unknown backend {choice!r}")
    for name in ("NCCL_LIBRARY", "NCCL4PY_BACKEND", "NCCL4PY_PLATFORM"):
        if environ.get(name):
            return f"{name}={environ[name]}"
    if gpus_visible(environ, dev):
        return "gpu"
    environ["NCCL4PY_BACKEND"] = "host"
    return "host"


def master_address() -> tuple[str, int]:
    """``(MASTER_ADDR, MASTER_PORT)`` for the ranks of one job: this machine's
    loopback address and a TCP port free now (the kernel picks it), where
    torch's env:// rendezvous (rank 0) listens."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return "127.0.0.1", int(s.getsockname()[1])


def rank_environment(base, rank: int, nranks: int, uid_hex: str | None,
                     master: tuple[str, int] | None = None) -> dict[str, str]:
    """The environment of rank *rank*: *base* plus the launcher's variables
    (the unique id only when *uid_hex* is given, MASTER_ADDR/MASTER_PORT
    only when *master* is)."""
    env = dict(base)
    for names, value in (
        (("NCCL4PY_RANK", "RANK", "LOCAL_RANK", "NCCL4PY_LOCAL_RANK"), rank),
        (("NCCL4PY_NRANKS", "WORLD_SIZE", "NCCL4PY_LOCAL_SIZE", "LOCAL_WORLD_SIZE"), nranks),
    ):
        for name in names:
            env[name] = str(value)
    if uid_hex is not None:
        env[uniqueid.UNIQUE_ID_ENV] = uid_hex
    if master is not None:
        env["MASTER_ADDR"], env["MASTER_PORT"] = master[0], str(master[1])
    return env


# ------------------------------------------------------------------- output

class _LineWriter:
    """Writes whole lines to one of our streams; one lock per stream."""

    def __init__(self, stream):
        self._stream = stream
        self._binary = getattr(stream, "buffer", None)
        self._lock = threading.Lock()
        self.broken = False

    def write(self, data: bytes) -> None:
        if self.broken:
            return
        with self._lock:
            try:
                if self._binary is not None:
                    self._stream.flush()
                    self._binary.write(data)
                    self._binary.flush()
                else:
                    self._stream.write(data.decode(errors="replace"))
                    self._stream.flush()
            except (OSError, ValueError):  # closed pipe (e.g. `| head`): drop output
                self.broken = True


_LINE_END = re.compile(rb"\r\n|\n|\r")


class _Splitter:
    """Cuts one rank's output into pieces to forward, holding at most
    CHUNK_BYTES: whole lines (ending in a newline or a carriage return) as
    soon as they are complete, an unfinished line once it reaches CHUNK_BYTES.
    With a prefix, each piece starts a line with the prefix and ends with
    its terminator (a newline is added to pieces of long lines)."""

    def __init__(self, prefix: bytes, limit: int = CHUNK_BYTES):
        self.prefix = prefix
        self.limit = limit
        self.partial = b""
        self.after_cr = False  # the last piece ended in "\r": a "\n" may follow
        self.open_line = False  # a piece of an unfinished line went out (no prefix)

    def feed(self, data: bytes) -> bytes:
        if self.after_cr and data.startswith(b"\n"):
            out = [b"\n"]  # completes a "\r\n" split across two reads
            data = data[1:]
        else:
            out = []
        if data:
            self.after_cr = False
        buf = self.partial + data
        start = 0
        for m in _LINE_END.finditer(buf):
            out.append(self.prefix + buf[start:m.end()])
            start = m.end()
            self.after_cr = m.group() == b"\r"
            self.open_line = False
        rest = buf[start:]
        while len(rest) >= self.limit:
            piece, rest = rest[:self.limit], rest[self.limit:]
            out.append(self.prefix + piece + b"\n" if self.prefix else piece)
            self.after_cr = False
            self.open_line = not self.prefix
        self.partial = rest
        return b"".join(out)

    def finish(self) -> bytes:
        """What is left at the end, with a newline so that the next text
        starts on a line of its own."""
        rest, self.partial = self.partial, b""
        if rest:
            return self.prefix + rest + b"\n"
        return b"\n" if self.open_line else b""


class _Floor:
    """One rank at a time writes a burst to a stream: a rank that has the
    floor keeps it while its output keeps coming with gaps under
    QUIET_SECONDS, for at most BURST_SECONDS.  So what a rank writes in one
    go (a traceback: one write per line) reaches the terminal as one block,
    however many ranks fail at once."""

    QUIET_SECONDS = 0.1
    BURST_SECONDS = 1.0

    def __init__(self) -> None:
        self.lock = threading.Lock()


def _pump(pipe, writer: _LineWriter, prefix: bytes, floor: _Floor | None = None) -> None:
    splitter = _Splitter(prefix)
    with pipe:
        fd = pipe.fileno()
        data = os.read(fd, CHUNK_BYTES)
        while True:
            with floor.lock if floor is not None else contextlib.nullcontext():
                end = time.monotonic() + (floor.BURST_SECONDS if floor is not None else 0.0)
                while True:
                    out = splitter.feed(data) if data else splitter.finish()
                    if out:
                        writer.write(out)
                    if not data:
                        return
                    if floor is None or time.monotonic() >= end or \
                            not select.select([fd], [], [], floor.QUIET_SECONDS)[0]:
                        break
                    data = os.read(fd, CHUNK_BYTES)
            data = os.read(fd, CHUNK_BYTES)  # without the floor: wait for the next burst


# -------------------------------------------------------------- supervision

def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def _describe(returncode: int) -> str:
    if returncode < 0:
        return f"was killed by signal {-returncode} ({_signal_name(-returncode)})"
    return f"exited with status {returncode}"


def _exit_status(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def _ranks_text(ranks: list[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ",".join(map(str, ranks))


class Launcher:
    """Runs *nranks* copies of *command* and supervises them (see the module doc)."""

    def __init__(self, command: list[str], nranks: int, base_env, uid: bytes, *,
                 tag_output: bool = False, timeout: float | None = None,
                 grace: float = GRACE_SECONDS):
        self.command = command
        self.nranks = nranks
        self.base_env = base_env
        self.uid_hex = uniqueid.encode(uid)
        self.tag_output = tag_output
        self.timeout = timeout
        self.grace = grace
        self.procs: list[subprocess.Popen] = []
        self.codes: dict[int, int] = {}
        self.exit_order: list[int] = []
        self.stopped: set[int] = set()
        self.events: queue.SimpleQueue = queue.SimpleQueue()
        self.err = _LineWriter(sys.stderr)
        self.out = _LineWriter(sys.stdout)
        self.threads: list[threading.Thread] = []
        self._preexec = None
        self.master = master_address()

    # -- messages
    def say(self, text: str) -> None:
        self.err.write(f"nccl.run: {text}\n".encode())

    # -- signals to ranks
    def _live(self) -> list[int]:
        return [r for r in range(len(self.procs)) if r not in self.codes]

    def _send(self, ranks, sig: int) -> None:
        for r in ranks:
            proc = self.procs[r]
            if proc.returncode is not None:
                continue
            # The rank and anything it started.  An exited rank stays an
            # unreaped zombie until the end, so its group id cannot be reused.
            if not procgroup.signal_group(proc.pid, sig):
                try:
                    proc.send_signal(sig)
                except (ProcessLookupError, OSError):
                    pass

    def _stop(self, ranks) -> None:
        ranks = [r for r in ranks if r not in self.stopped]
        self.stopped.update(ranks)
        self._send(ranks, signal.SIGTERM)

    # -- running
    def _spawn(self, rank: int) -> subprocess.Popen:
        # Output always goes through the launcher, a whole line at a time, so
        # ranks never mix their text within a line (even when unbuffered).
        piped = subprocess.PIPE
        return subprocess.Popen(
            self.command,
            env=rank_environment(self.base_env, rank, self.nranks, self.uid_hex, self.master),
            stdin=None if rank == 0 else subprocess.DEVNULL,  # like mpirun: stdin to rank 0
            stdout=piped,
            stderr=piped,
            start_new_session=True,  # signals reach ranks only through us, once
            preexec_fn=self._preexec,
        )

    def _start_threads(self) -> None:
        def waiter(rank, proc):
            self.events.put(("exit", rank, procgroup.wait_unreaped(proc)))

        floor = _Floor()  # stderr: a rank's traceback stays one block
        for rank, proc in enumerate(self.procs):
            prefix = f"[{rank}]: ".encode() if self.tag_output else b""
            for pipe, writer, turns in ((proc.stdout, self.out, None),
                                        (proc.stderr, self.err, floor)):
                self.threads.append(threading.Thread(
                    target=_pump, args=(pipe, writer, prefix, turns), daemon=True))
            threading.Thread(target=waiter, args=(rank, proc), daemon=True).start()
        for thread in self.threads:
            thread.start()

    def _on_signal(self, signum, frame) -> None:
        self.events.put(("signal", signum))  # SimpleQueue.put is reentrant

    def run(self) -> int:
        self._preexec = procgroup.death_signal_preexec()
        with forward.catching_signals(self._on_signal):
            return self._run()

    def _run(self) -> int:
        start = time.monotonic()
        try:
            for rank in range(self.nranks):
                self.procs.append(self._spawn(rank))
        except OSError as exc:
            self.say(f"cannot start rank {len(self.procs)}: {exc}")
            procgroup.cleanup_groups(self.procs, self.grace)
            return 1
        self._start_threads()

        deadline = start + self.timeout if self.timeout else None
        first_failure: int | None = None
        timed_out = False
        signals = 0
        first_signal: int | None = None
        stop_time: float | None = None   # when SIGTERM went out
        kill_time: float | None = None   # when SIGKILL went out
        while len(self.codes) < self.nranks:
            now = time.monotonic()
            wait = 0.5
            if deadline is not None and stop_time is None:
                wait = min(wait, deadline - now)
            if stop_time is not None and kill_time is None:
                wait = min(wait, stop_time + self.grace - now)
            try:
                event = self.events.get(timeout=max(wait, 0.0))
            except queue.Empty:
                event = None
            now = time.monotonic()

            if event is not None and event[0] == "exit":
                _, rank, code = event
                self.codes[rank] = code
                self.exit_order.append(rank)
                if code != 0 and rank not in self.stopped and first_failure is None:
                    first_failure = rank
                    if self._live():
                        self._stop(self._live())
                        stop_time = now
            elif event is not None and event[0] == "signal":
                signals += 1
                sig = event[1]
                if signals == 1:
                    first_signal = sig
                    self.say(f"received {_signal_name(sig)}; forwarding it to the ranks")
                    self._send(self._live(), sig)
                else:
                    self.say(f"received {_signal_name(sig)} again; killing the ranks")
                    self._send(self._live(), signal.SIGKILL)
                    kill_time = kill_time or now

            if (deadline is not None and not timed_out and first_failure is None
                    and now >= deadline and self._live()):
                timed_out = True
                live = self._live()
                self.say(f"timeout: {_ranks_text(live)} still running after "
                         f"{self.timeout:g} s (--timeout); stopping "
                         f"{'it' if len(live) == 1 else 'them'}")
                self._stop(live)
                stop_time = stop_time or now
            if stop_time is not None and kill_time is None and now >= stop_time + self.grace:
                self._send(self._live(), signal.SIGKILL)
                kill_time = now
            if kill_time is not None and now >= kill_time + _KILL_WAIT_SECONDS:
                self.say(f"{_ranks_text(self._live())} did not exit after SIGKILL; giving up")
                break

        # Processes the ranks started and left behind go with their groups;
        # then the pipes they held close and the output threads finish.
        left = procgroup.cleanup_groups(self.procs,
                                        min(self.grace, procgroup.CLEANUP_GRACE_SECONDS))
        if left:
            self.say(f"stopped {len(left)} process{'es' if len(left) > 1 else ''} "
                     "the ranks left running")
        end = time.monotonic() + 2.0
        for thread in self.threads:
            thread.join(max(0.0, end - time.monotonic()))

        status = 0
        if timed_out:
            status = TIMEOUT_EXIT
        elif first_signal is not None:
            status = 128 + first_signal
        elif first_failure is not None:
            status = _exit_status(self.codes[first_failure])
        elif self._live():
            status = 1
        if status != 0:
            self._summary()
        return status

    def _summary(self) -> None:
        failed = [r for r in self.exit_order if self.codes[r] != 0 and r not in self.stopped]
        parts = []
        if failed:
            parts.append(", ".join(f"rank {r} {_describe(self.codes[r])}" for r in failed))
        stopped = sorted(self.stopped)
        if stopped:
            parts.append(f"{_ranks_text(stopped)} {'was' if len(stopped) == 1 else 'were'} "
                         "stopped")
        if parts:
            self.say("; ".join(parts))


# ---------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    prog = PROG
    if argv is None:
        argv = sys.argv[1:]
        name = os.path.basename(sys.argv[0]) if sys.argv else ""
        if name and not name.endswith(".py"):  # a console script such as nccl4py-run
            prog = name
    argv = list(argv)
    parser = build_parser(prog)
    options, module, command = split_command(argv)
    opts = parser.parse_args(options)
    if opts.program is not None or opts.args:  # only reachable through odd option mixes
        parser.error(f"unexpected arguments: {' '.join([opts.program or '', *opts.args])}")
    if opts.module is not None:  # "-m" with its value was left to argparse
        module = opts.module
    if module is None and not command:
        parser.error("no program given: name a script (prog.py) or a module (-m module)")
    if module is not None:
        if not module:
            parser.error("-m needs a module name")
        child = [sys.executable, "-m", module, *command]
    else:
        if not os.path.exists(command[0]):
            parser.error(f"can't open file {command[0]!r}: no such file")
        # "--" keeps python from reading a script named "-x.py" as an option
        child = [sys.executable, *(["--"] if command[0].startswith("-") else []), *command]

    notes: list[str] = []
    backend = select_backend(opts.backend, os.environ, notes=notes)
    for note in notes:
        sys.stderr.write(f"nccl.run: note: {note}\n")
    host = backend == "host" or os.environ.get("NCCL4PY_BACKEND") == "host"
    problem = limits.check_nranks(opts.nranks, host=host, oversubscribe=opts.oversubscribe)
    if problem is not None:
        parser.error(problem)
    try:
        uniqueid.fake_id_requested()
    except ValueError as exc:
        parser.error(str(exc))
    try:
        uid = uniqueid.launcher_unique_id()
    except Exception as exc:
        from nccl._source_tree import missing_build

        hint = missing_build() if isinstance(exc, ImportError) else None
        if hint is not None:  # a source tree without its build: --backend host won't help
            sys.stderr.write(f"nccl.run: {hint}\n")
            return 1
        sys.stderr.write(
            f"nccl.run: cannot create the unique id: {exc}\n"
            "nccl.run: use --backend host for the bundled host backend, or set "
            "NCCL_LIBRARY to the NCCL/RCCL library to load\n")
        return 1
    launcher = Launcher(child, opts.nranks, dict(os.environ), uid,
                        tag_output=opts.tag_output, timeout=opts.timeout)
    status = launcher.run()
    if host:  # segments of ranks stopped while they waited in creation
        hostshm.remove_stale()
    return status
