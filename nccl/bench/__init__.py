"""``python -m nccl.bench`` (also ``nccl4py-bench``): nccl-tests' benchmarks in Python.

    python -m nccl.bench all_reduce --nranks 4 -b 8 -e 128M -f 2

Same flags, output and bandwidth formulas as NVIDIA's nccl-tests; the ranks
are started through ``python -m nccl.run`` (or the bench runs as one rank
of mpirun / torchrun / srun).  See ``python -m nccl.bench --help``.
"""
from __future__ import annotations

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    from .cli import main as _main

    return _main(argv)
