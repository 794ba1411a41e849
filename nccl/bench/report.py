"""nccl-tests' text output (preamble, table, footer) and the JSON records.

The layout follows nccl-tests' documented format strings: the header is
``# %10s  %12s  %8s  %6s  %6s`` followed by ``  %7s  %6s  %6s  %6s`` for each
of the out-of-place and in-place halves; rows are ``%12li  %12li  %8s  %6s
%6i`` then ``  %7s  %6.2f  %6.2f  %6g`` per half (``N/A`` when unchecked).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["Half", "Row", "Summary", "format_time", "format_row", "header_lines",
           "footer_lines", "preamble_lines", "row_record", "summary_lines", "UNITS"]

# The units of the JSON records' fields (also written into the JSON file).
UNITS = {"size": "B", "count": "elements", "time": "us", "alg_bw": "GB/s", "bus_bw": "GB/s",
         "avg_busbw": "GB/s", "max_busbw": "GB/s"}


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


@dataclass
class Summary:
    """One collective's results over the whole sweep."""
    binary: str
    rows: int
    avg_busbw: float    # the footer's average: over every half of every row
    max_busbw: float
    nwrong: int | None  # None: not checked (-c 0)
    out_of_bounds: int
    below_min_bw: bool = False  # the average is under 0.9 x NCCL_TESTS_MIN_BW

    @classmethod
    def of(cls, binary: str, rows: list[Row], out_of_bounds: int,
           min_bw: float | None = None) -> "Summary":
        halves = [h for r in rows for h in (r.out_of_place, r.in_place)]
        avg = sum(h.busbw for h in halves) / len(halves) if halves else 0.0
        checked = [h.nwrong for h in halves if h.nwrong is not None]
        return cls(binary, len(rows), avg, max((h.busbw for h in halves), default=0.0),
                   sum(checked) if checked or not halves else None, out_of_bounds,
                   min_bw is not None and avg < 0.9 * min_bw)

    @property
    def failed(self) -> bool:
        return bool(self.nwrong or self.out_of_bounds or self.below_min_bw)

    def record(self) -> dict[str, Any]:
        return {"rows": self.rows, "avg_busbw": self.avg_busbw, "max_busbw": self.max_busbw,
                "nwrong": self.nwrong, "out_of_bounds": self.out_of_bounds,
                "below_min_bw": self.below_min_bw}


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


def footer_lines(binary: str, out_of_bounds: int, avg_busbw: float,
                 checked: bool = True) -> list[str]:
    if not checked:
        verdict = "not checked (-c 0)"
    else:
        verdict = "OK" if out_of_bounds == 0 else "FAILED"
    return [
        f"# Out of bounds values : {out_of_bounds} {verdict}",
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


def summary_lines(summaries: list[Summary], elapsed_s: float) -> list[str]:
    """The end-of-run summary across collectives (comment lines, after the last block)."""
    out = ["#", f"# Summary of {len(summaries)} collective test(s) in {elapsed_s:.1f} s",
           "# %-26s  %5s  %10s  %10s  %8s  %13s" % ("collective", "sizes", "avg busbw",
                                                    "max busbw", "#wrong", "out of bounds"),
           "# %-26s  %5s  %10s  %10s  %8s  %13s" % ("", "", "(GB/s)", "(GB/s)", "", "")]
    for s in summaries:
        wrong = "N/A" if s.nwrong is None else str(s.nwrong)
        out.append("# %-26s  %5d  %10.3f  %10.3f  %8s  %13d%s" % (
            s.binary, s.rows, s.avg_busbw, s.max_busbw, wrong, s.out_of_bounds,
            "  below NCCL_TESTS_MIN_BW" if s.below_min_bw else ""))
    bad = sum((s.nwrong or 0) + s.out_of_bounds for s in summaries)
    failed = [s.binary for s in summaries if s.failed]
    if failed:
        out.append(f"# Result: FAILED ({', '.join(failed)}): {bad} wrong or out-of-bounds "
                   "values")
    elif summaries and all(s.nwrong is None for s in summaries):
        out.append("# Result: not checked (-c 0): the results were not compared with the "
                   "expected values")
    else:
        out.append(f"# Result: OK: {bad} wrong or out-of-bounds values")
    return out
