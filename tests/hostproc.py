"""Helpers for tests that drive host-backend ranks as separate processes and
follow what they print (one JSON object per line)."""
from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time

from conftest import clean_env


def host_env(**kw: str) -> dict[str, str]:
    return clean_env(NCCL4PY_BACKEND="host", **kw)


class Rank:
    """A Python process running `code` with `args`; its stdout lines are
    collected by a thread so that tests can wait for them with a deadline."""

    def __init__(self, code: str, *args: str, env: dict[str, str] | None = None):
        self.proc = subprocess.Popen([sys.executable, "-c", code, *args], env=env or host_env(),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.err: list[str] = []
        threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines.put),
                         daemon=True).start()
        threading.Thread(target=self._pump, args=(self.proc.stderr, self.err.append),
                         daemon=True).start()

    @staticmethod
    def _pump(stream, put):
        for line in stream:
            put(line)

    def event(self, timeout: float = 60) -> dict:
        """The next JSON line printed; fails the test after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                line = self.lines.get(timeout=max(left, 0.01))
            except queue.Empty:
                raise AssertionError(f"no output within {timeout} s; stderr: "
                                     f"{''.join(self.err)[-3000:]}") from None
            line = line.strip()
            if line.startswith("{"):
                return json.loads(line)

    def wait(self, timeout: float = 60) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"rank did not exit within {timeout} s; stderr: "
                                 f"{''.join(self.err)[-3000:]}") from None

    def stderr(self) -> str:
        return "".join(self.err)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def wait_for(cond, timeout: float = 30, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def exists(path: str) -> bool:
    return os.path.exists(path)
