"""The Work objects the backend returns.

The host backend completes a collective before the call returns, so a
collective run on the calling thread has a Work that is complete when it is
made: ``wait()`` returns True at once and ``get_future()`` is a completed
future whose value is the output tensors, as ProcessGroupNCCL's.  An
``async_op`` collective runs on the group's lane (``nccl.torch.lane``): its
Work completes when the lane has run it.  A send or receive is queued (see
``nccl.torch.p2p``); its Work runs the queue when waited on, asked whether
it is complete, or asked for its future.  ``wait(timeout)`` raises
RuntimeError when the operation has not completed within the timeout, as
gloo's: the operation goes on (see docs/torch.md).
"""
from __future__ import annotations

import threading
from datetime import timedelta

import torch
import torch.distributed as dist

__all__ = ["Work", "PendingWork", "AsyncWork", "completed", "wait_seconds"]


def wait_seconds(timeout) -> float | None:
    """``Work.wait``'s timeout in seconds; None: no limit (None, or the zero
    timedelta torch's C++ passes for "no timeout")."""
    if timeout is None:
        return None
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
    return seconds if seconds > 0 else None


def timed_out(seconds: float, what: str) -> RuntimeError:
    return RuntimeError(
        f"nccl4py_host: Work.wait(timeout={seconds:g} s) timed out: {what} has not completed "
        "(a rank has not arrived); it goes on: it completes when the ranks arrive, or fails "
        "with the group's timeout; wait() again to learn which, and the group's later calls "
        "run after it")


class Work(dist._Work):
    """A completed operation; ``result()`` and the future's value are its
    output tensors."""

    _result: list = []

    def wait(self, timeout=None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True

    def is_success(self) -> bool:
        return True

    def exception(self):
        return None

    def result(self) -> list:
        return self._result

    def synchronize(self) -> None:
        pass

    def get_future(self):
        fut = torch.futures.Future()
        fut.set_result(self._result)
        return fut


def completed(result: list) -> Work:
    w = Work()
    w._result = result
    return w


class PendingWork(Work):
    """A queued send or receive: the queue runs when this is waited on (or
    asked is_completed / get_future), at the next collective of any
    nccl4py_host group of this process, or at its group's shutdown."""

    _done = False
    _error: BaseException | None = None

    def _settle(self) -> None:
        if not self._done:
            from . import p2p

            p2p.flush()  # runs this one too, or fails it (raising)

    def wait(self, timeout=None) -> bool:
        seconds = wait_seconds(timeout)
        if seconds is not None and not self._done:
            # the queue runs on a thread of its own, which goes on after a timeout
            runner = threading.Thread(target=self.is_completed, daemon=True,
                                      name="nccl4py_host sends and receives")
            runner.start()
            runner.join(seconds)
            if runner.is_alive():
                raise timed_out(seconds, "a send or receive")
        self._settle()
        if self._error is not None:
            raise self._error
        return True

    def is_completed(self) -> bool:
        try:
            self._settle()
        except Exception:
            pass  # kept in _error
        return True

    def is_success(self) -> bool:
        self.is_completed()
        return self._error is None

    def exception(self):
        self.is_completed()
        return self._error

    def synchronize(self) -> None:
        self.wait()

    def get_future(self):
        self.is_completed()
        fut = torch.futures.Future()
        if self._error is not None:
            fut.set_exception(self._error)
        else:
            fut.set_result(self._result)
        return fut


class AsyncWork(Work):
    """A collective on the group's lane: complete when the lane has run it;
    its future (made when it was issued) completes then, with the output
    tensors or the error."""

    _event: threading.Event
    _future: torch.futures.Future
    _error: BaseException | None = None

    def wait(self, timeout=None) -> bool:
        seconds = wait_seconds(timeout)
        if seconds is not None and not self._event.wait(seconds):
            raise timed_out(seconds, "an async_op collective of the group")
        self._event.wait()
        if self._error is not None:
            raise self._error
        return True

    def is_completed(self) -> bool:
        return self._event.is_set()

    def is_success(self) -> bool:
        return self._event.is_set() and self._error is None

    def exception(self):
        return self._error

    def synchronize(self) -> None:
        self.wait()

    def get_future(self):
        return self._future
