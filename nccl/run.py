"""Run a program as N ranks, and find out which rank you are.

Command line::

    python -m nccl.run -n 4 prog.py args...
    python -m nccl.run -n 2 -t -m package.module args...

starts the ranks on this machine with one shared unique id (see
``python -m nccl.run --help``).  Inside the program::

    import nccl.run
    env = nccl.run.environment()
    # env.rank, env.nranks, env.local_rank, env.unique_id (128 bytes)

:func:`environment` also understands torchrun, mpirun/mpiexec and srun.
"""

from __future__ import annotations

import sys

from nccl._launch.rankenv import RankEnvironment, environment

__all__ = ["RankEnvironment", "environment", "main"]


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m nccl.run`` (and the ``nccl4py-run`` script).

    Returns the exit status: 0 when every rank succeeded, the first failing
    rank's status otherwise, 124 on ``--timeout``, 128+N after the launcher
    received signal N (passed on to every rank), 2 for usage errors and for
    an ``-n`` over the machine's limits.  Processes the ranks leave running
    are stopped at the end.  See docs/launcher.md.
    """
    from nccl._cli import quiet_pipe
    from nccl._launch.launcher import main as launcher_main

    def run() -> int:
        try:
            return launcher_main(argv)
        except SystemExit as exc:  # argparse: --help, --version, usage errors
            code = exc.code
            return code if isinstance(code, int) else (0 if code is None else 2)

    return quiet_pipe(run)


if __name__ == "__main__":
    sys.exit(main())
