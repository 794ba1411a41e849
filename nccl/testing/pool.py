"""The parent's side: pools of rank processes that run multi-rank tests.

A pool is N worker processes (``python -m nccl.testing.worker``), one per
rank, each a pytest session of its own that has collected the modules of
the multi-rank tests.  The pool is started on first use and reused by the
following tests with the same number of ranks; for each test the parent
asks rank 0 for a fresh unique id, sends the test's node id and the id to
every rank, and collects one set of reports per rank.

A pool whose test failed on some rank, hung or lost a process is stopped
(every worker's process group is killed) and a new one is started for the
next test, so a test always starts on healthy ranks.  Each worker runs in
its own session, so a Ctrl-C at the terminal reaches only the parent, which
then stops the pools; each worker also gets SIGTERM if the parent dies.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from nccl._launch import launcher, procgroup
from nccl.testing import outcome
from nccl.testing.worker import RANK_ENV
FAIL_GRACE_SECONDS = 3.0      # how long the other ranks may still finish after a failure
STACK_WAIT_SECONDS = 0.5      # for the stack dumps of hung ranks
CLOSE_WAIT_SECONDS = 10.0     # for a worker to end its session when asked
LOG_TAIL_BYTES = 4000
OUTPUT_BYTES = 1 << 20        # of a rank's output kept for the report (the end of it)
MAX_POOL_RANKS = 16           # processes kept alive across pools; older pools are closed


_GPU_VARIABLE = {"nccl": "CUDA_VISIBLE_DEVICES", "rccl": "HIP_VISIBLE_DEVICES"}


class PoolError(Exception):
    """The pool could not start; the message says why (with the ranks' output)."""


class _Worker:
    def __init__(self, rank: int, proc: subprocess.Popen, cmd_w: int, res_r: int,
                 log: str, stack: str):
        self.rank, self.proc, self.cmd_w, self.res_r = rank, proc, cmd_w, res_r
        self.log, self.stack = log, stack
        self.buf = b""
        self.eof = False
        self.offset = 0  # where the output of the current test starts in the log

    def send(self, message: dict) -> bool:
        data = (json.dumps(message) + "\n").encode()
        try:
            while data:
                data = data[os.write(self.cmd_w, data):]
            return True
        except OSError:  # the worker is gone
            return False

    def read(self) -> list[dict]:
        """Messages available now (call when the pipe is readable)."""
        try:
            data = os.read(self.res_r, 1 << 16)
        except OSError:
            data = b""
        if not data:
            self.eof = True
        self.buf += data
        *lines, self.buf = self.buf.split(b"\n")
        return [json.loads(line) for line in lines if line.strip()]

    def status(self) -> int | None:
        """The exit status if the process ended (it stays unreaped), else None."""
        try:
            info = os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except (ChildProcessError, AttributeError):
            return self.proc.poll()
        if info is None:
            return None
        return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status

    def log_tail(self, start: int = 0, limit: int = LOG_TAIL_BYTES) -> str:
        """The end of the worker's output from byte *start* on, at most *limit* bytes."""
        try:
            with open(self.log, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(start, f.tell() - limit))
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def mark_output(self) -> None:
        try:
            self.offset = os.path.getsize(self.log)
        except OSError:
            self.offset = 0

    def test_output(self) -> str:
        return self.log_tail(self.offset, OUTPUT_BYTES)

    def close_fds(self) -> None:
        for fd in (self.cmd_w, self.res_r):
            try:
                os.close(fd)
            except OSError:
                pass


class Pool:
    """N rank processes that run tests (see the module doc)."""

    def __init__(self, nranks: int, backend: str, args: list[str], workdir: str,
                 cwd: str, startup_timeout: float):
        self.nranks = nranks
        self.backend = backend
        self.args = args
        self.dir = tempfile.mkdtemp(prefix=f"pool{nranks}-", dir=workdir)
        # the ranks' flight records of the current test (NCCL4PY_TRACE_DIR),
        # unless the user chose a directory of their own
        self.trace_dir: str | None = None
        self.diagnosis: str | None = None  # of the last test that failed, from its records
        if not os.environ.get("NCCL4PY_TRACE_DIR"):
            self.trace_dir = os.path.join(self.dir, "trace")
        self.cwd = cwd
        self.startup_timeout = startup_timeout
        self.workers: list[_Worker] = []
        self.alive = False

    # ------------------------------------------------------------ start
    def _spawn(self, rank: int, env: dict[str, str],
               master: tuple[str, int]) -> _Worker:
        cmd_r, cmd_w = os.pipe()
        res_r, res_w = os.pipe()
        log = os.path.join(self.dir, f"rank{rank}.log")
        stack = os.path.join(self.dir, f"rank{rank}.stack")
        spec = {"rank": rank, "nranks": self.nranks, "cmd_fd": cmd_r, "res_fd": res_w,
                "stack": stack, "args": [*self.args, "--basetemp",
                                         os.path.join(self.dir, f"tmp{rank}")]}
        env = launcher.rank_environment(env, rank, self.nranks, None, master)
        env[RANK_ENV] = str(rank)
        if self.trace_dir:
            env["NCCL4PY_TRACE_DIR"] = self.trace_dir
        env["PYTHONUNBUFFERED"] = "1"  # output reaches the log even if the rank dies
        if self.backend in _GPU_VARIABLE:  # one GPU per rank
            var = _GPU_VARIABLE[self.backend]
            devices = [d for d in env.get(var, "").split(",") if d.strip()]
            env[var] = devices[rank] if rank < len(devices) else str(rank)
        preexec = procgroup.death_signal_preexec()
        try:
            with open(log, "wb") as out:
                proc = subprocess.Popen(
                    [sys.executable, "-c", "import sys; from nccl.testing.worker import main; "
                     "sys.exit(main(sys.argv[1:]))", json.dumps(spec)],
                    env=env, cwd=self.cwd, stdin=subprocess.DEVNULL, stdout=out,
                    stderr=subprocess.STDOUT, pass_fds=(cmd_r, res_w),
                    start_new_session=True, preexec_fn=preexec)
        finally:
            os.close(cmd_r)
            os.close(res_w)
        return _Worker(rank, proc, cmd_w, res_r, log, stack)

    def start(self) -> None:
        env = dict(os.environ)
        launcher.select_backend(self.backend, env)
        # as under nccl.run: torch's env:// rendezvous works in the ranks
        master = launcher.master_address()
        try:
            for rank in range(self.nranks):
                self.workers.append(self._spawn(rank, env, master))
        except OSError as exc:
            self.kill()
            raise PoolError(f"cannot start rank {len(self.workers)}: {exc}") from None
        self.alive = True
        ready: dict[int, dict] = {}

        def on_message(worker, message):
            ready[worker.rank] = message
            return True

        missing = self._wait(set(range(self.nranks)), time.monotonic() + self.startup_timeout,
                             on_message)
        problems = []
        for w in self.workers:
            message = ready.get(w.rank)
            if message is None:
                why = "did not start in time" if w.rank in missing else "ended while starting"
                problems.append(f"rank {w.rank} {why}; its output:\n{w.log_tail().rstrip()}")
            elif message.get("type") != "ready":
                problems.append(f"rank {w.rank}: {message.get('text', message)}")
        if problems:
            self.kill()
            raise PoolError("the ranks of the test could not start:\n" + "\n".join(problems))

    # -------------------------------------------------------------- run
    def _wait(self, pending: set[int], deadline: float, on_message) -> set[int]:
        """Deliver messages from the *pending* ranks to on_message(worker, message),
        which returns True when that rank is done.  A rank whose process ends is
        done too (on_message gets None).  Returns the ranks not done by *deadline*
        (or by the earlier deadline that on_message may set in self._cut)."""
        self._cut = None
        sel = selectors.DefaultSelector()
        for rank in pending:
            sel.register(self.workers[rank].res_r, selectors.EVENT_READ, self.workers[rank])
        try:
            while pending:
                end = deadline if self._cut is None else min(deadline, self._cut)
                left = end - time.monotonic()
                if left <= 0:
                    break
                for key, _ in sel.select(left):
                    worker = key.data
                    messages = worker.read()
                    done = False
                    for message in messages:
                        done = on_message(worker, message) or done
                    if worker.eof and not done:
                        on_message(worker, None)
                        done = True
                    if done or worker.eof:
                        pending.discard(worker.rank)
                        sel.unregister(worker.res_r)
        finally:
            sel.close()
        return pending

    def run(self, nodeid: str, timeout: float) -> list[outcome.RankResult]:
        """Run the test *nodeid* on every rank; one result per rank."""
        start = time.monotonic()
        deadline = start + timeout
        results: dict[int, outcome.RankResult] = {}
        uid: list[str] = []

        def on_uid(worker, message):
            if message is None:
                results[worker.rank] = self._death(worker)
            elif message.get("type") == "uid":
                uid.append(message["uid"])
            else:
                results[worker.rank] = outcome.RankResult(
                    worker.rank, "failed", text=message.get("text", str(message)))
            return True

        if not self.workers[0].send({"op": "uid"}):
            results[0] = self._death(self.workers[0])
        elif self._wait({0}, deadline, on_uid):
            results[0] = outcome.RankResult(0, "running")
        if not uid:
            return self._finish(results)

        self.diagnosis = None
        if self.trace_dir:  # only this test's records
            shutil.rmtree(self.trace_dir, ignore_errors=True)
            os.makedirs(self.trace_dir, exist_ok=True)
        for w in self.workers:
            w.mark_output()
            if not w.send({"op": "run", "nodeid": nodeid, "uid": uid[0]}):
                results[w.rank] = self._death(w)

        def on_result(worker, message):
            if message is None:
                results[worker.rank] = self._death(worker)
            elif message.get("type") == "result":
                results[worker.rank] = outcome.from_reports(worker.rank, message["reports"])
            else:
                results[worker.rank] = outcome.RankResult(
                    worker.rank, "failed", text=message.get("text", str(message)))
            if results[worker.rank].state in ("failed", "died") and self._cut is None:
                self._cut = time.monotonic() + FAIL_GRACE_SECONDS
            return True

        pending = {r for r in range(self.nranks) if r not in results}
        left = self._wait(pending, deadline, on_result)
        timed_out = time.monotonic() >= deadline
        for rank in left:
            results[rank] = outcome.RankResult(rank, "running" if timed_out else "stopped")
        return self._finish(results)

    def _finish(self, results: dict[int, outcome.RankResult]) -> list[outcome.RankResult]:
        running = [r for r, res in results.items() if res.state == "running"]
        if running:
            self._dump_stacks(running, results)
        ordered = []
        for rank in range(self.nranks):
            result = results.get(rank) or outcome.RankResult(rank, "stopped")
            if rank < len(self.workers):
                result.output = self.workers[rank].test_output()
            ordered.append(result)
        if any(res.state != "passed" for res in ordered):
            self.diagnosis = outcome.diagnose(self.trace_dir)
        if any(res.state in ("running", "stopped", "died") for res in ordered):
            self.kill()
        return ordered

    def _death(self, worker: _Worker) -> outcome.RankResult:
        end = time.monotonic() + 2.0
        status = worker.status()
        while status is None and time.monotonic() < end:
            time.sleep(0.02)
            status = worker.status()
        return outcome.died(worker.rank, status)

    def _dump_stacks(self, ranks: list[int], results: dict[int, outcome.RankResult]) -> None:
        usr1, usr2 = getattr(signal, "SIGUSR1", None), getattr(signal, "SIGUSR2", None)
        if usr2 is None:
            return
        # SIGUSR2: stacks; then SIGUSR1: the flight records of the ranks'
        # communicators (a rank that has none yet dies of it, its stack written)
        for sig in (usr2,) + ((usr1,) if self.trace_dir and usr1 is not None else ()):
            for rank in ranks:
                try:
                    os.kill(self.workers[rank].proc.pid, sig)
                except OSError:
                    pass
        time.sleep(STACK_WAIT_SECONDS)
        for rank in ranks:
            try:
                with open(self.workers[rank].stack, errors="replace") as f:
                    results[rank].stack = f.read()
            except OSError:
                pass

    # ------------------------------------------------------------- stop
    def kill(self) -> None:
        """Stop every worker and whatever it started, now."""
        for w in self.workers:
            procgroup.signal_group(w.proc.pid, signal.SIGKILL)
        procgroup.cleanup_groups([w.proc for w in self.workers], grace=0.5)
        self._release()

    def close(self) -> None:
        """Ask the workers to end their sessions; stop those that do not."""
        if not self.alive:
            return
        for w in self.workers:
            w.send({"op": "quit"})
        end = time.monotonic() + CLOSE_WAIT_SECONDS
        while time.monotonic() < end and any(w.status() is None for w in self.workers):
            time.sleep(0.02)
        procgroup.cleanup_groups([w.proc for w in self.workers])
        self._release()

    def _release(self) -> None:
        for w in self.workers:
            w.close_fds()
        self.workers = []
        self.alive = False
        shutil.rmtree(self.dir, ignore_errors=True)


class PoolManager:
    """The pools of one pytest session, by number of ranks."""

    def __init__(self, args: list[str], backend: str, cwd: str, startup_timeout: float):
        self.args = args
        self.backend = backend
        self.cwd = cwd
        self.startup_timeout = startup_timeout
        self.workdir: str | None = None
        self.pools: dict[int, Pool] = {}  # in order of use, most recent last

    def pool(self, nranks: int) -> Pool:
        pool = self.pools.pop(nranks, None)
        if pool is None or not pool.alive:
            while self.pools and nranks + sum(self.pools) > MAX_POOL_RANKS:
                self.pools.pop(next(iter(self.pools))).close()
            if self.workdir is None:
                self.workdir = tempfile.mkdtemp(prefix="nccl4py-testing-")
            pool = Pool(nranks, self.backend, self.args, self.workdir, self.cwd,
                        self.startup_timeout)
            self.pools[nranks] = pool
            pool.start()
        else:
            self.pools[nranks] = pool
        return pool

    def kill(self) -> None:
        for pool in self.pools.values():
            pool.kill()
        self.pools.clear()

    def close(self) -> None:
        for pool in self.pools.values():
            pool.close()
        self.pools.clear()
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
