"""nccl-tests' text output (preamble, table, footer) and the JSON records.

The layout follows nccl-tests' documented format strings: the header is
``# %10s  %12s  %8s  %6s  %6s`` followed by ``  %7s  %6s  %6s  %6s`` for each
of the out-of-place and in-place halves; rows are ``%12li  %12li  %8s  %6s
%6i`` then ``  %7s  %6.2f  %6.2f  %6g`` per half (``N/A`` when unchecked).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["Half", "Row", "format_time", "format_row", "header_lines", "footer_lines",
           "preamble_lines", "row_record"]


@dataclass
class Half:
    time_us: float
    algbw: float
    busbw: float
    nwrong: int | None  # None: not checked (-c 0)


@dataclass
class Row:
    collective: str
    size: int
    count: int
    type: str
    redop: str
    root: int
    out_of_place: Half
    in_place: Half
    extra: dict[str, Any] = field(default_factory=dict)


def format_time(usec: float) -> str:
    """Average time in µs in 7 columns: two decimals, then fewer, then an exponent."""
    if usec < 100.0:
        return f"{usec:7.2f}"
    if usec < 10000.0:
        return f"{usec:7.1f}"
    if usec < 1e7:
        return f"{usec:7.0f}"
    return f"{usec:7.1e}"


def _half(h: Half) -> str:
    wrong = "   N/A" if h.nwrong is None else f"{h.nwrong:6g}"
    return f"  {format_time(h.time_us)}  {h.algbw:6.2f}  {h.busbw:6.2f}  {wrong}"


def format_row(r: Row) -> str:
    return (f"{r.size:12d}  {r.count:12d}  {r.type:>8s}  {r.redop:>6s}  {r.root:6d}"
            + _half(r.out_of_place) + _half(r.in_place))


_HDR = "# %10s  %12s  %8s  %6s  %6s" + "  %7s  %6s  %6s  %6s" * 2 + " "


def header_lines() -> list[str]:
    return [
        "#",
        "#" + " " * 62 + "out-of-place" + " " * 23 + "in-place" + " " * 10,
        _HDR % ("size", "count", "type", "redop", "root",
                "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong"),
        _HDR % ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "",
                "(us)", "(GB/s)", "(GB/s)", ""),
    ]


def preamble_lines(*, version: str, library_code: int, abi: int, binary: str, nranks: int,
                   min_bytes: int, max_bytes: int, step: str, warmup: int, iters: int,
                   agg: int, check: int, devices: list[str]) -> list[str]:
    out = [
        f"# nccl-tests version nccl4py-bench-{version} nccl-headers={abi} "
        f"nccl-library={library_code}",
        f"# Collective test starting: {binary}",
        f"# nThread 1 nGpus 1 minBytes {min_bytes} maxBytes {max_bytes} step: {step} "
        f"warmup iters: {warmup} iters: {iters} agg iters: {agg} validation: "
        f"{1 if check else 0} graph: 0 unalign: 0",
        "#",
        "# Using devices",
    ]
    out += devices
    return out


def footer_lines(binary: str, out_of_bounds: int, avg_busbw: float) -> list[str]:
    return [
        f"# Out of bounds values : {out_of_bounds} {'OK' if out_of_bounds == 0 else 'FAILED'}",
        f"# Avg bus bandwidth    : {avg_busbw:g} ",
        "#",
        f"# Collective test concluded: {binary}",
    ]


def row_record(r: Row) -> dict[str, Any]:
    """One JSON record: nccl-tests' fields plus the collective's name."""
    def half(h: Half) -> dict[str, Any]:
        d = asdict(h)
        return {"time": d["time_us"], "alg_bw": d["algbw"], "bus_bw": d["busbw"],
                "nwrong": d["nwrong"]}

    return {"collective": r.collective, "size": r.size, "count": r.count, "type": r.type,
            "redop": r.redop, "root": r.root, "out_of_place": half(r.out_of_place),
            "in_place": half(r.in_place)}
