"""The progress line of ``python -m nccl.bench`` on stderr.

The bench's parent process reads rank 0's table as it is printed and knows
the plan (collectives, types, ops, roots, sizes), so it can say how far the
sweep is and estimate the time left.  A thread ticks while one size runs
for a long time.  On a terminal the line is redrawn in place (twice a
second); otherwise a plain line is written every ``every`` seconds.
"""
from __future__ import annotations

import threading
import time
from typing import IO

__all__ = ["Progress", "row_weight", "format_seconds", "format_size"]

# A row's cost is taken as proportional to its size plus this many bytes
# (the per-call latency expressed as bytes); good enough for an estimate.
_OVERHEAD_BYTES = 32 << 10
_TTY_PERIOD = 0.5


def row_weight(size: int) -> float:
    return float(size + _OVERHEAD_BYTES)


def format_seconds(s: float) -> str:
    if s < 60:
        return f"{s:.1f} s" if s < 10 else f"{s:.0f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60):02d} s"
    return f"{int(s // 3600)} h {int(s % 3600 // 60):02d} min"


def format_size(n: int) -> str:
    """8, 1K, 64K, 1M, 1.5M, 2G (powers of 1024, as -b/-e accept them)."""
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift:
            v = n / (1 << shift)
            return f"{v:g}{unit}" if v == int(v) else f"{v:.3g}{unit}"
    return str(n)


class Progress:
    """Feed it rank 0's output lines; it keeps stderr informed."""

    def __init__(self, stream: IO[str], plan: list[tuple[str, list[int]]], *, tty: bool,
                 every: float) -> None:
        """*plan*: for each collective's block, in order, the size of each row it prints."""
        self.stream, self.tty, self.every = stream, tty, every
        self.plan = plan
        self.total_rows = sum(len(rows) for _, rows in plan)
        self.total_weight = sum(row_weight(s) for _, rows in plan for s in rows) or 1.0
        self.block = 0          # index into plan of the block being printed
        self.rows_in_block = 0
        self.done_rows = 0
        self.done_weight = 0.0
        self.t0 = self.t_last_row = time.monotonic()
        self.t_rows: float | None = None  # when the first block started (after start-up)
        self.lock = threading.Lock()
        self.shown = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------ the plan

    def _block_rows(self) -> list[int]:
        return self.plan[self.block][1] if self.block < len(self.plan) else []

    def _finish_block(self) -> None:
        """Resynchronise at the end of a block (rows may have been skipped)."""
        rows = self._block_rows()
        for size in rows[self.rows_in_block:]:
            self.done_rows += 1
            self.done_weight += row_weight(size)
        self.block += 1
        self.rows_in_block = 0

    def feed(self, line: str) -> None:
        """One line of rank 0's standard output."""
        with self.lock:
            if line.startswith("# Collective test starting: "):
                if self.t_rows is None:
                    self.t_rows = self.t_last_row = time.monotonic()
                name = line.split(": ", 1)[1].strip()
                while self.block < len(self.plan) and self.plan[self.block][0] != name:
                    self._finish_block()  # skipped collectives (not in this library)
            elif line.startswith("# Collective test concluded: "):
                self._finish_block()
            elif line.strip() and not line.startswith("#"):
                rows = self._block_rows()
                if self.rows_in_block < len(rows):
                    self.done_weight += row_weight(rows[self.rows_in_block])
                    self.done_rows += 1
                self.rows_in_block += 1
                self.t_last_row = time.monotonic()

    # ------------------------------------------------------------ the text

    def text(self, now: float | None = None) -> str:
        now = time.monotonic() if now is None else now
        elapsed = now - self.t0
        rows = self._block_rows()
        name = self.plan[self.block][0] if self.block < len(self.plan) else "finishing"
        current = ""
        weight = self.done_weight
        # seconds per unit of weight, from the rows done (start-up excluded)
        rate = (self.t_last_row - (self.t_rows if self.t_rows is not None else self.t0)) \
            / self.done_weight if self.done_weight > 0 else 0.0
        if self.t_rows is None:
            current = ", starting the ranks"
        elif self.rows_in_block < len(rows):
            size = rows[self.rows_in_block]
            current = f", size {format_size(size)} for {format_seconds(now - self.t_last_row)}"
            expected = rate * row_weight(size)
            if expected > 0:  # credit for the row that is running
                weight += row_weight(size) * min(0.95, (now - self.t_last_row) / expected)
        if rate > 0:
            eta = "ETA " + format_seconds(rate * (self.total_weight - weight))
        else:
            eta = "ETA unknown"
        pct = 100.0 * weight / self.total_weight
        return (f"[{self.done_rows}/{self.total_rows} rows, {pct:.0f}%, "
                f"{format_seconds(elapsed)} elapsed, {eta}] {name}{current}")

    # ------------------------------------------------------------ output

    def clear(self) -> None:
        """Before a line of the table is written to stdout (terminal only)."""
        with self.lock:
            if self.tty and self.shown:
                self.stream.write("\r\033[K")
                self.stream.flush()
                self.shown = False

    def _tick(self) -> None:
        with self.lock:
            if self.tty:
                self.stream.write("\r\033[K" + self.text())
                self.shown = True
            else:
                self.stream.write("nccl.bench progress: " + self.text() + "\n")
            self.stream.flush()

    def _run(self) -> None:
        period = _TTY_PERIOD if self.tty else self.every
        while not self._stop.wait(period):
            self._tick()

    def start(self) -> None:
        if self.tty or self.every > 0:
            self._thread = threading.Thread(target=self._run, name="nccl.bench progress",
                                            daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.clear()
