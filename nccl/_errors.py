"""The exceptions of nccl4py: one family under :class:`Nccl4pyError`.

::

    Nccl4pyError                   anything nccl4py raises on its own account
    ├── NCCLError                  the library returned an error status
    │   └── NcclTimeoutError       the watchdog timed a call out
    ├── NcclInvalid                invalid use, found before any library call
    ├── NotSupportedError          no library could be loaded (a RuntimeError)
    ├── FunctionNotFoundError      the library lacks a C function (a NotImplementedError)
    └── GpuRuntimeError            a HIP/CUDA runtime call failed (a RuntimeError)

Upstream's names and bases are kept (``NCCLError`` and ``NcclInvalid`` are
``Exception`` subclasses there, and still are).  Every class is public in
``nccl.core`` (and the library's ones in ``nccl.bindings``) but
:class:`GpuRuntimeError`, which is in ``nccl._runtime``; their
``__module__`` says where, which is what tracebacks print and where
pickle finds them.  Kept in plain Python so that they pickle by reference and
can be re-created in a process that has no library loaded.
"""
from __future__ import annotations

__all__ = ["Nccl4pyError", "NCCLError", "NcclTimeoutError", "NotSupportedError",
           "FunctionNotFoundError", "NcclInvalid", "GpuRuntimeError"]

# The public module of every class below (tracebacks, repr, pickle).
_PUBLIC_MODULE = "nccl.core"

# Used only when the library itself cannot be asked (e.g. after unpickling in
# a process without it).
_FALLBACK_TEXT = {
    0: "no error",
    1: "unhandled GPU runtime error",
    2: "system error",
    3: "internal error",
    4: "invalid argument",
    5: "invalid usage",
    6: "remote process exited or there was a network error",
    7: "operation in progress",
    8: "operation timed out",
}


def _describe(status: int) -> str:
    from ._enums import Result

    try:
        name = Result(status).name
    except ValueError:
        name = "UnknownResult"
    try:
        from . import _nccl

        text = _nccl.get_error_string(status)
        last = _nccl.get_last_error(0)
    except Exception:
        text = _FALLBACK_TEXT.get(status, "unknown result code")
        last = ""
    msg = f"{name} ({status}): {text}"
    if last:
        msg += f" [last error: {last.strip()}]"
    return msg


class Nccl4pyError(Exception):
    """The root of nccl4py's exceptions: ``except Nccl4pyError`` catches a
    failing library call, a refused argument, a missing library or a missing
    C function alike.  Errors of Python itself (``TypeError`` for an argument
    of the wrong type, ``ValueError``, ``OSError``) stay what they are."""


class NCCLError(Nccl4pyError):
    """A call into NCCL/RCCL returned an error status.

    ``.status`` is the ``ncclResult_t`` value; the message is
    ``"<Name> (<value>): <ncclGetErrorString>"`` followed by the library's
    ``ncclGetLastError`` text when it has one.
    """

    def __init__(self, status: int, message: str | None = None):
        self.status = int(status)
        if message is None:
            message = _describe(self.status)
        super().__init__(message)

    @property
    def result(self):
        from ._enums import Result

        try:
            return Result(self.status)
        except ValueError:
            return self.status

    def __reduce__(self):
        return (type(self), (self.status, str(self)))


class NcclTimeoutError(NCCLError):
    """An operation did not complete within the communicator's watchdog
    timeout (``NCCL4PY_WATCHDOG_TIMEOUT``, ``Communicator.init(...,
    timeout=...)``), or the library reported an asynchronous error while it
    was in flight: the watchdog wrote the flight record and aborted the
    communicator.  Raised by the blocked call and by every later use.

    ``.operation``, ``.seq`` (its number among the communicator's
    collectives, or among its sends and receives) and ``.waited`` (seconds)
    say which call; ``.status`` is ``Result.Timeout`` (8) or the async error.
    """

    def __init__(self, status: int, message: str | None = None, operation: str | None = None,
                 seq: int | None = None, waited: float | None = None):
        super().__init__(status, message)
        self.operation = operation
        self.seq = seq
        self.waited = waited

    def __reduce__(self):
        return (type(self), (self.status, str(self), self.operation, self.seq, self.waited))


class NotSupportedError(Nccl4pyError, RuntimeError):
    """No usable NCCL/RCCL library could be loaded."""


class FunctionNotFoundError(Nccl4pyError, NotImplementedError):
    """The loaded library does not export the C function a wrapper needs."""


class NcclInvalid(Nccl4pyError):
    """Invalid use of the high-level API (``nccl.core``), found before any
    library call: a bad buffer, dtype, count, device or state."""

    def __init__(self, msg: str):
        self.msg = msg
        super().__init__(msg)

    def __reduce__(self):
        return (type(self), (self.msg,))

    def __repr__(self):
        return f"<NcclInvalid: {self.msg}>"


class GpuRuntimeError(Nccl4pyError, RuntimeError):
    """A HIP or CUDA runtime call failed (or no runtime could be loaded).

    The message is the runtime's own; ``.status`` is the runtime's status code
    and ``.function`` the runtime function that returned it (both ``None``
    when no runtime call failed, e.g. when none could be loaded).  Raised by
    the C core (src/gpu_runtime.c) for ``nccl._runtime``, the cuda.core shim
    and ``nccl.core``'s device helpers.  Still a ``RuntimeError``, as before
    it joined the family.
    """

    status: int | None = None
    function: str | None = None


GpuRuntimeError.__module__ = "nccl._runtime"

for _cls in (Nccl4pyError, NCCLError, NcclTimeoutError, NotSupportedError,
             FunctionNotFoundError, NcclInvalid):
    _cls.__module__ = _PUBLIC_MODULE
del _cls
