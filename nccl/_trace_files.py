"""Reading flight records (src/trace.c writes them) as untrusted data.

A record directory may be shared with other users, so a file in it may be
anything: a symbolic link, a FIFO, a huge or deeply nested document, numbers
with a million digits, a record whose fields have the wrong types or claim
10**12 calls.  :func:`read_record` reads only a regular file, opened without
following a symbolic link and without blocking, reads no more than its size,
and checks every field the analyzer uses against :data:`TOP` and
:data:`ENTRY` (types, ranges, printable text), so that the analysis is
bounded by the size of the files and a bad file is one clear line.
"""
from __future__ import annotations

import errno
import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any, Callable

__all__ = ["FORMAT", "MalformedRecord", "NotARecord", "read_record", "looks_like_record"]

FORMAT = "nccl4py-trace-1"
# how src/trace.c names records (n4p_trace_write_default)
_RECORD_NAME = re.compile(r"rank[0-9]+(\.comm[0-9]+)?\.json")
_INT_DIGITS = 20  # 2**64 has 20 digits: no field of a record needs more
_TEXT_MAX = 512   # the longest string trace.c writes (a hostname: 255)
_I32 = (-2**31, 2**31 - 1)
_U64 = (0, 2**64 - 1)
_STATES = {"free", "running", "grouped", "enqueued", "issued", "done", "failed", "aborted",
           "unknown"}


class MalformedRecord(ValueError):
    """A file that is (or claims to be) a flight record and cannot be read as one."""


class NotARecord(Exception):
    """A file that is not a flight record (not named as one, not of its format)."""


def looks_like_record(path: Path) -> bool:
    """Named as trace.c names records (``rank<R>.json``, ``rank<R>.comm<I>.json``)."""
    return _RECORD_NAME.fullmatch(path.name) is not None


# ------------------------------------------------------------ field checks

Check = Callable[[str, Any], None]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _int(lo: int, hi: int) -> Check:
    def check(name: str, v: Any) -> None:
        if type(v) is not int or not lo <= v <= hi:
            raise MalformedRecord(f'"{name}" must be an integer from {lo} to {hi}, '
                                  f"got {_short(v)}")
    return check


def _number(name: str, v: Any) -> None:
    if type(v) not in (int, float) or not math.isfinite(v):
        raise MalformedRecord(f'"{name}" must be a finite number, got {_short(v)}')


def _text(name: str, v: Any) -> None:
    if type(v) is not str or len(v) > _TEXT_MAX or not v.isprintable():
        raise MalformedRecord(f'"{name}" must be printable text of at most {_TEXT_MAX} '
                              f"characters, got {_short(v)}")


def _one_of(values: set[str]) -> Check:
    def check(name: str, v: Any) -> None:
        if type(v) is not str or v not in values:
            raise MalformedRecord(f'"{name}" must be one of {", ".join(sorted(values))}, '
                                  f"got {_short(v)}")
    return check


def _or_null(inner: Check) -> Check:
    def check(name: str, v: Any) -> None:
        if v is not None:
            inner(name, v)
    return check


def _aborted(name: str, v: Any) -> None:
    if not isinstance(v, dict):
        raise MalformedRecord(f'"{name}" must be null or an object, got {_short(v)}')
    _fields(v, ABORTED, name + ".")


# name: (check, required).  What trace.c writes; other fields are ignored.
TOP: dict[str, tuple[Check, bool]] = {
    "format": (_one_of({FORMAT}), True),
    "rank": (_int(0, _I32[1]), True),
    "nranks": (_int(1, _I32[1]), True),
    "entries": (lambda n, v: None, True),  # checked entry by entry
    "calls": (_int(*_U64), False),
    "p2p_calls": (_int(*_U64), False),
    "time": (_number, False),
    "timeout": (_number, False),
    "buffer": (_int(*_U64), False),
    "reason": (_text, False),
    "host": (_text, False),
    "pid": (_int(*_I32), False),
    "comm_hash": (_text, False),
    "comm_index": (_int(0, _I32[1]), False),
    "backend": (_text, False),
    "aborted": (_or_null(_aborted), False),
}
ABORTED: dict[str, tuple[Check, bool]] = {
    "status": (_int(*_I32), True),
    "op": (_text, True),
    "seq": (_int(*_U64), True),
    "waited": (_number, True),
    "waiting_for": (_text, False),
}
ENTRY: dict[str, tuple[Check, bool]] = {
    "seq": (_int(1, _U64[1]), True),
    "kind": (_one_of({"coll", "p2p"}), True),
    "op": (_text, True),
    "state": (_one_of(_STATES), True),
    "enqueue": (_number, True),
    "status": (_int(*_I32), True),
    "start": (_number, False),
    "end": (_or_null(_number), False),
    "count": (_int(-1, 2**63 - 1), False),
    "recvcount": (_int(-1, 2**63 - 1), False),
    "dtype": (_text, False),
    "redop": (_or_null(_text), False),
    "root": (_int(-1, _I32[1]), False),
    "peer": (_int(-1, _I32[1]), False),
    "group_depth": (_int(0, _I32[1]), False),
    "sendbuf": (_text, False),
    "recvbuf": (_text, False),
    "stream": (_text, False),
}


def _fields(obj: dict, spec: dict[str, tuple[Check, bool]], prefix: str = "") -> None:
    for name, (check, required) in spec.items():
        if name in obj:
            check(prefix + name, obj[name])
        elif required:
            raise MalformedRecord(f'"{prefix}{name}" is missing')


def check_record(rec: Any) -> None:
    """Raise MalformedRecord unless rec is a record the analyzer can read."""
    if not isinstance(rec, dict):
        raise MalformedRecord("not a JSON object")
    _fields(rec, TOP)
    if rec["rank"] >= rec["nranks"]:
        raise MalformedRecord(f'"rank" {rec["rank"]} is not below "nranks" {rec["nranks"]}')
    entries = rec["entries"]
    if not isinstance(entries, list):
        raise MalformedRecord(f'"entries" must be a list, got {_short(entries)}')
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise MalformedRecord(f'"entries"[{i}] must be an object, got {_short(e)}')
        _fields(e, ENTRY, f"entries[{i}].")


# ----------------------------------------------------------------- reading

def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > _INT_DIGITS:
        raise MalformedRecord(f"an integer of {len(text)} digits")
    return int(text)


def _parse_constant(text: str) -> float:
    raise MalformedRecord(f"{text} is not a number a record holds")


def _read_bytes(path: Path) -> bytes:
    """The bytes of path if it is a regular file: never through a symbolic
    link, never blocking on a FIFO, no more than its size."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise MalformedRecord("a symbolic link: not followed") from None
        raise MalformedRecord(f"cannot be opened: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise MalformedRecord("not a regular file")
        chunks, left = [], st.st_size
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 24))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError as e:
        raise MalformedRecord(f"cannot be read: {e.strerror}") from None
    finally:
        os.close(fd)


def read_record(path: Path) -> dict[str, Any]:
    """The record in path; NotARecord for a file that is neither named as a
    record nor holds one; MalformedRecord (its message says why) for a file
    that is one of them but cannot be read as a record."""
    named = looks_like_record(path)
    try:
        data = _read_bytes(path)
        rec = json.loads(data.decode("utf-8"), parse_int=_parse_int,
                         parse_constant=_parse_constant)
    except MalformedRecord:
        if named:
            raise
        raise NotARecord(str(path)) from None
    except (ValueError, RecursionError) as e:  # JSON, UTF-8
        if not named:
            raise NotARecord(str(path)) from None
        what = "not UTF-8" if isinstance(e, UnicodeDecodeError) else \
            "nested too deeply" if isinstance(e, RecursionError) else "not valid JSON"
        raise MalformedRecord(what) from None
    if not named and not (isinstance(rec, dict) and rec.get("format") == FORMAT):
        raise NotARecord(str(path))
    check_record(rec)
    return rec
