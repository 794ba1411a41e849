"""Children in their own process groups, and cleaning those groups up.

Every process the launcher (or the pytest plugin) starts is the leader of a
new session, so its process group holds the child and everything the child
starts, unless one of those moves itself to another session (``setsid``,
daemons), which no launcher can follow; mpiexec behaves the same.

A leader is waited for without being reaped (``waitid(WNOWAIT)``) until its
group has been cleaned up: while the zombie exists its pid cannot be reused,
so signalling the group can never reach an unrelated process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

CLEANUP_GRACE_SECONDS = 1.0  # between SIGTERM and SIGKILL for leftovers


def death_signal_preexec(sig: int = signal.SIGTERM):
    """A preexec_fn that has the child receive *sig* when its parent dies (Linux), or None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec():
        prctl(1, int(sig), 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent is already gone
            os._exit(1)

    return preexec


def wait_unreaped(proc: subprocess.Popen) -> int:
    """Block until *proc* exits; return its status in Popen's convention
    (negative for a signal) but leave the zombie in place, so the pid stays
    reserved until :func:`cleanup_group` reaps it."""
    waitid = getattr(os, "waitid", None)
    flags = getattr(os, "WNOWAIT", None)
    if waitid is None or flags is None:
        return proc.wait()
    while True:
        try:
            info = waitid(os.P_PID, proc.pid, os.WEXITED | flags)
        except InterruptedError:
            continue
        except ChildProcessError:  # already reaped elsewhere
            return proc.wait()
        if info is None:  # WNOHANG not given: should not happen
            continue
        if info.si_code == os.CLD_EXITED:
            return info.si_status
        return -info.si_status


def _group_members(pgid: int) -> list[int] | None:
    """Live (non-zombie) processes of group *pgid*, or None where /proc is missing."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    members = []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        # after the command: state ppid pgrp ...
        if int(fields[2]) == pgid and fields[0] != b"Z":
            members.append(int(name))
    return members


def signal_group(pgid: int, sig: int) -> bool:
    """Send *sig* to process group *pgid*; False when the group is empty."""
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def cleanup_groups(procs, grace: float = CLEANUP_GRACE_SECONDS) -> list[int]:
    """Stop what is left in each child's process group, then reap the children.

    Each child in *procs* must have been started with ``start_new_session=True``
    and must have exited (its zombie still unreaped, see :func:`wait_unreaped`),
    unless it is still running, in which case it is stopped with its group.
    Leftovers get SIGTERM, and SIGKILL after *grace* seconds.  Returns the
    pids of the processes that had to be stopped.
    """
    procs = [p for p in procs if p.returncode is None]
    stopped: list[int] = []
    for proc in procs:
        members = _group_members(proc.pid)
        if members is None:  # no /proc: signal blindly
            signal_group(proc.pid, signal.SIGTERM)
            continue
        if members:
            stopped.extend(members)
            signal_group(proc.pid, signal.SIGTERM)
    if stopped or any(_group_members(p.pid) is None for p in procs):
        end = time.monotonic() + grace
        while time.monotonic() < end:
            if all(_group_members(p.pid) == [] for p in procs):
                break
            time.sleep(0.02)
        for proc in procs:
            if _group_members(proc.pid) != []:
                signal_group(proc.pid, signal.SIGKILL)
    for proc in procs:
        try:
            proc.wait(timeout=5.0)
        except (OSError, subprocess.TimeoutExpired):
            pass
    return stopped
