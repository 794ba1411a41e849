"""Point-to-point operations, queued and run together in one NCCL group.

torch.distributed hands a Python process group its sends and receives one
at a time (``isend``, ``irecv``, and ``batch_isend_irecv``, which calls them
in turn).  Run one by one, a large send would wait for a receive its peer
has not been given yet: two ranks exchanging 16 MiB would each block in
their send.  So they are queued, and the queue runs as one NCCL group (the
library progresses all of a group's sends and receives together, also
across communicators) when one of them is waited on (or asked
``is_completed()`` / ``get_future()``), when a collective of any
nccl4py_host group of this process starts, or when a group shuts down.
One queue per process, guarded by a lock: torch may call from any thread.
"""
from __future__ import annotations

import threading

import nccl.core as nc

from .work import PendingWork

__all__ = ["queue", "submit", "flush", "discard"]

SEND, RECV = 0, 1

queue: list = []  # (process group, SEND/RECV, Staged, peer, PendingWork, last of its work)
running = 0  # queues being run (a wait that timed out leaves one running on its thread)
_lock = threading.RLock()


def submit(pg, kind: int, staged: list, peer: int) -> PendingWork:
    """Queue the sends (or receives) of ``staged`` with ``peer`` of ``pg``."""
    work = PendingWork()
    work._result = [s.tensor for s in staged]
    with _lock:
        for s in staged:
            queue.append((pg, kind, s, peer, work))
    return work


def flush() -> None:
    """Run every queued operation; on failure every one of them fails.  The
    lock is held while they run: a flush waits for one running elsewhere."""
    global running
    with _lock:
        if not queue:
            return
        ops = queue[:]
        del queue[:]
        running += 1
        try:
            for pg in {id(op[0]): op[0] for op in ops}.values():
                pg._drain()  # their lanes' collectives come first
            with nc.group():
                for pg, kind, s, peer, _ in ops:
                    if s.buf.numel() == 0:
                        continue  # both sides know the count: nothing to match
                    if kind == SEND:
                        pg._comm.send(s.buf, peer)
                    else:
                        pg._comm.recv(s.buf, peer)
            for _, kind, s, _, _ in ops:
                if kind == RECV:
                    s.back()
        except BaseException as e:
            for pg, _, _, _, work in ops:
                work._error = e
                work._done = True
                pg._failed = True
            raise
        finally:
            running -= 1
        for _, _, _, _, work in ops:
            work._done = True


def discard(pg, why: str) -> None:
    """Fail the queued operations of ``pg`` (it is shutting down or aborted)."""
    with _lock:
        mine = [op for op in queue if op[0] is pg]
        if not mine:
            return
        queue[:] = [op for op in queue if op[0] is not pg]
    err = RuntimeError(f"nccl4py_host: a send or receive of this group never ran: {why}; "
                       "wait() on isend/irecv works before destroying the group")
    for _, _, _, _, work in mine:
        work._error = err
        work._done = True
