"""What every command line of nccl4py shares (``python -m nccl``,
``nccl.run``, ``nccl.bench``, ``nccl.trace``): ``--version``, and a reader
that closes the pipe early (``| head``) ending the command quietly."""
from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import Callable

from nccl._version import __version__

__all__ = ["add_version", "version_text", "quiet_pipe", "BROKEN_PIPE_EXIT"]

# The status a shell reports for a command that SIGPIPE ended.
BROKEN_PIPE_EXIT = 128 + signal.SIGPIPE


def version_text() -> str:
    return f"nccl4py {__version__}"


def add_version(parser: argparse.ArgumentParser) -> None:
    """``--version``: print ``nccl4py <version>`` and exit 0."""
    parser.add_argument("--version", action="version", version=version_text(),
                        help="print the nccl4py version and exit")


def quiet_pipe(main: Callable[[], int]) -> int:
    """Run *main*; when the reader of our stdout went away, end with
    ``BROKEN_PIPE_EXIT`` instead of a ``BrokenPipeError`` traceback (also for
    the flush at exit)."""
    try:
        status = main()
        sys.stdout.flush()
        return status
    except BrokenPipeError:
        # Python flushes stdout again at exit: point it at /dev/null first.
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)
        return BROKEN_PIPE_EXIT
