"""How many ranks a job on this machine may have, checked before anything starts.

Three limits apply to ``-n``:

* the host backend's own maximum (``nccl4pyHostMaxRanks()`` of the bundled
  library), when the ranks use the host backend;
* ``RLIMIT_NPROC``: the ranks plus the processes this user already runs must
  fit (not enforced by the kernel for root, so not checked there);
* the CPUs this process may run on: more than ``OVERSUBSCRIBE_FACTOR`` ranks
  per CPU (and more than ``OVERSUBSCRIBE_MIN``) need explicit consent
  (``--oversubscribe``), because such a job mostly waits for the scheduler.
"""

from __future__ import annotations

import os

OVERSUBSCRIBE_FACTOR = 4
OVERSUBSCRIBE_MIN = 8


def host_max_ranks() -> int | None:
    """The bundled host backend's largest communicator, or None if it cannot be read."""
    try:
        import ctypes

        from nccl import _discovery

        lib = ctypes.CDLL(_discovery.host_backend_path())
        fn = lib.nccl4pyHostMaxRanks
    except (OSError, AttributeError, ImportError):
        return None
    fn.restype = ctypes.c_int
    fn.argtypes = []
    return int(fn())


def cpu_count() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def oversubscribe_limit(cpus: int) -> int:
    return max(OVERSUBSCRIBE_MIN, OVERSUBSCRIBE_FACTOR * cpus)


def user_processes() -> int | None:
    """Processes (threads count as processes for RLIMIT_NPROC) of this user, if known."""
    uid = os.getuid()
    total = 0
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    for name in names:
        if not name.isdigit():
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid != uid:
                continue
            total += len(os.listdir(f"/proc/{name}/task"))
        except OSError:
            continue
    return total


def nproc_limit() -> int | None:
    """The soft RLIMIT_NPROC, or None when unlimited, unknown or not enforced (root)."""
    try:
        import resource
    except ImportError:
        return None
    if os.geteuid() == 0:
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def check_nranks(nranks: int, *, host: bool, oversubscribe: bool,
                 host_max: int | None = None, cpus: int | None = None,
                 nproc: int | None = None, running: int | None = None) -> str | None:
    """Why *nranks* ranks cannot be started here, or None when they can.

    The keyword arguments after *oversubscribe* default to this machine's
    values (they are parameters so that the rule can be tested anywhere).
    """
    if host:
        host_max = host_max_ranks() if host_max is None else host_max
        if host_max is not None and nranks > host_max:
            return (f"-n {nranks} is more than the host backend supports "
                    f"({host_max} ranks)")
    nproc = nproc_limit() if nproc is None else nproc
    if nproc is not None:
        running = (user_processes() or 0) if running is None else running
        if nranks + running > nproc:
            return (f"-n {nranks} would exceed this user's process limit "
                    f"(RLIMIT_NPROC {nproc}, {running} already running)")
    cpus = cpu_count() if cpus is None else cpus
    limit = oversubscribe_limit(cpus)
    if nranks > limit and not oversubscribe:
        return (f"-n {nranks} is more than {limit} ranks for {cpus} CPU"
                f"{'' if cpus == 1 else 's'} (at most {OVERSUBSCRIBE_FACTOR} per CPU, "
                f"or {OVERSUBSCRIBE_MIN}); pass --oversubscribe to start them anyway")
    return None
