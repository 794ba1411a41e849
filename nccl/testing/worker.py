"""One rank of a pool (started by the parent's plugin, never by hand).

    python -m nccl.testing.worker SPEC_JSON

The worker is a pytest session: it collects the modules of the multi-rank
tests (so conftest.py files, fixtures and module-level code behave as in any
pytest run), then serves the parent's requests, one JSON line each, on a
pipe: ``uid`` (make a unique id; rank 0 only), ``run`` (run one test by node
id with the given unique id and send back its reports), ``quit``.  Every test
is torn down completely after it runs (fixtures of every scope).  Its own
output goes to a log file; SIGUSR2 writes the stacks of its threads to a
file (the parent asks for them when a test hangs); SIGTERM (sent when the
parent dies) kills the worker's process group.
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys

import pytest

RANK_ENV = "NCCL4PY_TESTING_RANK"  # set in every rank of a multi-rank test

_current: _Worker | None = None


def current() -> _Worker | None:
    """This process's worker state, or None outside a worker."""
    return _current


class _Worker:
    """The worker plugin: the request loop and the state the fixtures read."""

    def __init__(self, spec: dict):
        self.rank: int = spec["rank"]
        self.nranks: int = spec["nranks"]
        self.cmd_fd: int = spec["cmd_fd"]
        self.res_fd: int = spec["res_fd"]
        self.uid: bytes | None = None
        self.collect_errors: list[str] = []
        self._buf = b""

    # -- messages
    def send(self, message: dict) -> None:
        data = (json.dumps(message) + "\n").encode()
        while data:
            data = data[os.write(self.res_fd, data):]

    def receive(self) -> dict | None:
        while b"\n" not in self._buf:
            data = os.read(self.cmd_fd, 1 << 16)
            if not data:
                return None  # the parent is gone
            self._buf += data
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    # -- pytest hooks
    def pytest_collectreport(self, report) -> None:
        if report.failed:
            self.collect_errors.append(f"{report.nodeid}: {report.longreprtext}")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        result = yield
        report = result.get_result()
        if call.excinfo is not None and call.excinfo.errisinstance(pytest.xfail.Exception):
            report.nccl_xfail = str(call.excinfo.value.msg)
        if report.failed:
            item.stash[FAILED_KEY] = True
            report.nccl_stop = call.stop  # when it failed: the parent finds the first rank

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session) -> bool:
        from _pytest.runner import runtestprotocol

        items = {item.nodeid: item for item in session.items}
        self.send({"type": "ready", "count": len(items)})
        while True:
            request = self.receive()
            if request is None or request.get("op") == "quit":
                # Nobody reads this session's summary: skip it (its hooks can
                # take seconds, e.g. plugins that import their library there).
                reporter = session.config.pluginmanager.getplugin("terminalreporter")
                if reporter is not None:
                    session.config.pluginmanager.unregister(reporter)
                return True
            if request["op"] == "uid":
                self.send(self._make_uid())
                continue
            item = items.get(request["nodeid"])
            if item is None:
                errors = "\n".join(self.collect_errors) or "(no collection errors)"
                self.send({"type": "error", "text": (
                    f"rank {self.rank} did not collect {request['nodeid']}; its collection "
                    f"errors:\n{errors}")})
                continue
            self.uid = bytes.fromhex(request["uid"])
            os.environ["NCCL4PY_UNIQUE_ID"] = request["uid"]
            reports = runtestprotocol(item, log=False, nextitem=None)
            self.send({"type": "result", "reports": [_serialize(r) for r in reports]})

    def _make_uid(self) -> dict:
        try:
            from nccl._launch import uniqueid

            return {"type": "uid", "uid": uniqueid.create_unique_id().hex()}
        except Exception as exc:  # reported as the test's failure
            return {"type": "error", "text": (
                f"rank 0 could not create a unique id: {type(exc).__name__}: {exc}")}


FAILED_KEY = pytest.StashKey[bool]()


def _crash(report) -> str | None:
    """The one line that names a failure (``ValueError: bad value``)."""
    crash = getattr(report.longrepr, "reprcrash", None)
    text = getattr(crash, "message", None)
    if text is None and isinstance(report.longrepr, str):
        text = report.longrepr
    return text.strip().splitlines()[0] if text and text.strip() else None


def _serialize(report) -> dict:
    longrepr = None
    if report.skipped and isinstance(report.longrepr, tuple):
        longrepr = str(report.longrepr[2]).removeprefix("Skipped: ")
    elif report.longrepr is not None:
        longrepr = report.longreprtext
    return {"when": report.when, "outcome": report.outcome, "longrepr": longrepr,
            "sections": [list(s) for s in report.sections],
            "xfail": getattr(report, "nccl_xfail", None), "duration": report.duration,
            "crash": _crash(report) if report.failed else None,
            "stop": getattr(report, "nccl_stop", None)}


def main(argv: list[str] | None = None) -> int:
    global _current
    spec = json.loads((sys.argv[1:] if argv is None else argv)[0])
    for fd in (spec["cmd_fd"], spec["res_fd"]):
        os.set_inheritable(fd, False)  # not for the processes tests start
    # SIGTERM comes from a dying parent (PR_SET_PDEATHSIG): take along what
    # the tests started (this process leads its own process group).
    signal.signal(signal.SIGTERM, lambda *_: os.killpg(os.getpid(), signal.SIGKILL))
    stack_file = open(spec["stack"], "w")  # noqa: SIM115 - lives as long as the process
    # SIGUSR2: the stacks of this process's threads; SIGUSR1 stays nccl4py's
    # own (every communicator's flight record into NCCL4PY_TRACE_DIR).
    if hasattr(signal, "SIGUSR2"):
        faulthandler.register(signal.SIGUSR2, file=stack_file, all_threads=True)
    _current = _Worker(spec)
    return int(pytest.main(spec["args"], plugins=[_current]))


if __name__ == "__main__":
    # Run the copy that the plugin imports, so that current() sees the state.
    from nccl.testing import worker

    sys.exit(worker.main())
