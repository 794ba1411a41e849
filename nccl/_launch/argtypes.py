"""Number types of the command lines (``python -m nccl.run``, ``nccl.bench``):
argparse ``type=`` functions whose errors name what was wrong."""
from __future__ import annotations

import argparse
from typing import Callable, TypeVar

__all__ = ["number"]

T = TypeVar("T", int, float)


def number(convert: Callable[[str], T], what: str, ok: Callable[[T], bool],
           rule: str) -> Callable[[str], T]:
    """A ``type=`` that converts with ``convert`` (``not <what>: 'text'`` when
    it cannot) and accepts a value for which ``ok`` is true (else
    ``<rule>: 'text'``)."""

    def parse(text: str) -> T:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"{rule}: {text!r}")
        return value

    return parse
