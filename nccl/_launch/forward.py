"""Run one child (such as ``python -m nccl.run``) that gets our signals.

The child runs in a process group of its own, so a Ctrl-C at the terminal
reaches it once, through us, and not a second time from the terminal.  While
it runs, SIGINT, SIGTERM and SIGHUP sent to us are passed on to it instead of
ending us; it also gets SIGTERM if we die without a chance to pass anything
on (Linux).  The caller reports ``128 + N`` after signal N, as a shell does.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Iterator

from nccl._launch import procgroup

FORWARDED = ("SIGINT", "SIGTERM", "SIGHUP")


@contextlib.contextmanager
def catching_signals(handler) -> Iterator[None]:
    """Route SIGINT, SIGTERM and SIGHUP to *handler* inside the block (main
    thread only).  A signal that is ignored (nohup, background jobs) stays
    ignored, and so do children started meanwhile."""
    old = {}
    if threading.current_thread() is threading.main_thread():
        for name in FORWARDED:
            signum = getattr(signal, name, None)
            if signum is not None and signal.getsignal(signum) is not signal.SIG_IGN:
                old[signum] = signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, previous in old.items():
            signal.signal(signum, previous)


class Forwarder:
    """Passes the signals we receive to one child process."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.received: list[int] = []

    def _handler(self, signum, frame) -> None:
        self.received.append(signum)
        if self.proc is not None and self.proc.returncode is None:
            try:
                self.proc.send_signal(signum)
            except OSError:
                pass

    def attach(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        for signum in self.received:  # arrived while the child was starting
            proc.send_signal(signum)

    def status(self, returncode: int) -> int:
        """The exit status to report: 128+N after our first signal N, else the child's."""
        if self.received:
            return 128 + self.received[0]
        return 128 - returncode if returncode < 0 else returncode


def _preexec():
    deathsig = procgroup.death_signal_preexec()

    def preexec():
        os.setpgid(0, 0)
        if deathsig is not None:
            deathsig()

    return preexec


@contextlib.contextmanager
def forwarding_signals(cmd: list[str], **popen_kwargs) -> Iterator[tuple[subprocess.Popen,
                                                                         Forwarder]]:
    """Start *cmd* and yield ``(proc, forwarder)``; our signals go to *proc* meanwhile.

    On leaving the block the child is waited for (and sent SIGTERM first when
    the block ends with an exception while it still runs).
    """
    fwd = Forwarder()
    with catching_signals(fwd._handler):
        proc = subprocess.Popen(cmd, preexec_fn=_preexec(), **popen_kwargs)
        fwd.attach(proc)
        try:
            yield proc, fwd
        except BaseException:
            if proc.poll() is None:
                proc.terminate()
            raise
        finally:
            proc.wait()
