"""A group's asynchronous collectives, run in order on a thread of their own.

The host backend completes a call before it returns.  So that the
collectives torch issues with ``async_op=True`` (DDP's gradient buckets in
backward, FSDP2's all-gathers and reduce-scatters) overlap the computation
that follows, as gloo's and NCCL's do, and so that ``Work.wait(timeout)``
can time out while a rank is late, they run on the group's lane: one
thread per group, started at the first such call, running them in the order
they were issued.  Everything else of the group runs on the calling thread
after the lane has drained, so every rank issues the group's calls to the
library in program order.

The lane completes each call's future on its thread, running the future's
callbacks there (DDP's communication hooks).  A call made from the lane's
thread (such a callback issuing another collective) runs at once, there,
also when it asked for ``async_op``: it comes right after the call whose
callback made it, on every rank, whatever the timing.
"""
from __future__ import annotations

import collections
import threading

import torch

from .work import AsyncWork

__all__ = ["Lane"]


class Lane:
    def __init__(self, name: str):
        self._cv = threading.Condition()
        self._jobs: collections.deque = collections.deque()
        self.busy = 0  # jobs queued or running (read without the lock: an int)
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()
        self.ident = self._thread.ident

    def here(self) -> bool:
        """Whether the calling thread is the lane's."""
        return threading.get_ident() == self.ident

    def submit(self, run, result: list) -> AsyncWork:
        work = AsyncWork()
        work._result = result
        work._event = threading.Event()
        work._future = torch.futures.Future()
        with self._cv:
            self._jobs.append((run, work))
            self.busy += 1
            self._cv.notify_all()
        return work

    def drain(self) -> None:
        """Wait until every job submitted so far has run (a no-op on the
        lane's own thread)."""
        if self.busy and not self.here():
            with self._cv:
                while self.busy:
                    self._cv.wait()

    def close(self) -> None:
        self.drain()
        with self._cv:
            self._jobs.append(None)
            self._cv.notify_all()
        if not self.here():
            self._thread.join()

    def _loop(self) -> None:
        while True:
            with self._cv:
                while not self._jobs:
                    self._cv.wait()
                job = self._jobs.popleft()
            if job is None:
                return
            run, work = job
            try:
                run()
            except BaseException as e:  # kept for wait(); the lane goes on
                work._error = e
            try:  # the future first: once wait() returns, it is done
                if work._error is None:
                    work._future.set_result(work._result)
                else:
                    work._future.set_exception(work._error)
            except BaseException:  # noqa: S110 - a callback's error stays in its own future
                pass
            finally:
                work._event.set()
                with self._cv:
                    self.busy -= 1
                    self._cv.notify_all()
