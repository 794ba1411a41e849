"""One outcome for a test from the reports of its N ranks.

The test passes only when every rank passes; it is skipped (or xfailed) only
when every rank skipped (or xfailed); anything else fails, with each rank's
part labelled ``rank R``.  The report starts with the root cause: a rank
whose process died, else the rank that failed first (the others usually fail
because of it: a peer that left, an aborted communicator), with its error, so
that pytest's short summary names it.
"""

from __future__ import annotations

import io
import re
import signal
import time
from dataclasses import dataclass, field

import pytest


class RanksFailed(Exception):
    """A multi-rank test failed; the message is the whole report."""


@dataclass
class RankResult:
    """What one rank did with one test.

    state: ``passed``, ``failed``, ``skipped``, ``xfailed`` (the rank's own
    report), or ``running`` (still at it at the timeout), ``stopped`` (stopped
    after another rank failed) or ``died`` (its process ended).
    """

    rank: int
    state: str
    reports: list[dict] = field(default_factory=list)
    text: str = ""        # the failure / skip reason / how it died
    stack: str = ""       # where it was at the timeout (faulthandler)
    output: str = ""      # what the rank printed during the test (stdout and stderr)
    crash: str = ""       # one line naming the failure ("ValueError: ...")
    at: float | None = None  # when it failed or was found dead (time.time())


def from_reports(rank: int, reports: list[dict]) -> RankResult:
    """A rank's result from its pytest reports (setup, call, teardown)."""
    failed = [r for r in reports if r["outcome"] == "failed"]
    for rep in failed:
        if rep["when"] == "call" and rep.get("xfail") is not None and len(failed) == 1:
            return RankResult(rank, "xfailed", reports, rep["xfail"])
    if failed:
        text = "\n".join(f"--- {r['when']} ---\n{r['longrepr']}" if len(failed) > 1
                         else f"(in {r['when']})\n{r['longrepr']}" for r in failed)
        first = failed[0]
        return RankResult(rank, "failed", reports, text, crash=first.get("crash") or "",
                          at=first.get("stop"))
    for rep in reports:
        if rep["outcome"] == "skipped":
            return RankResult(rank, "skipped", reports, rep["longrepr"] or "")
    return RankResult(rank, "passed", reports)


def died(rank: int, returncode: int | None) -> RankResult:
    if returncode is None:
        how = "closed its connection"
    elif returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        how = f"was killed by signal {-returncode} ({name})"
    else:
        how = f"exited with status {returncode}"
    return RankResult(rank, "died", text=f"the process of rank {rank} {how} during the test",
                      crash=f"its process {how}", at=time.time())


def diagnose(trace_dir: str | None) -> str | None:
    """What ``python -m nccl.trace`` finds in the flight records the ranks
    left in *trace_dir* (their ``comm`` fixtures at the end of the test, or
    nccl4py itself when asked with SIGUSR1 at a hang): which rank skipped or
    reordered a collective, mismatched arguments; None when nothing is wrong."""
    if not trace_dir:
        return None
    from nccl import trace

    records = trace.load(trace_dir)
    if not records:
        return None
    result = trace.analyze(records)
    if not result["problem"]:
        return None
    out = io.StringIO()
    trace._print(result, out)
    return out.getvalue()


def _ranks(ranks: list[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ",".join(map(str, ranks))


_SECTION = re.compile(r"Captured (.+) (setup|call|teardown)")


def add_sections(item: pytest.Item, results: list[RankResult]) -> list[tuple[str, str]]:
    """Attach every rank's captured output to *item*'s report; return them."""
    added = []
    for res in results:
        if res.output:
            item.add_report_section("call", f"output (rank {res.rank})", res.output)
            added.append((f"output (rank {res.rank})", res.output))
        if not res.reports:
            continue
        # each phase's report repeats the sections of the phases before it
        last = res.reports[-1]
        for title, content in last.get("sections", []):
            m = _SECTION.fullmatch(title)
            key, when = (m.group(1), m.group(2)) if m else (title, last["when"])
            item.add_report_section(when, f"{key} (rank {res.rank})", content)
            added.append((f"{key} (rank {res.rank}, {when})", content))
    return added


def trim_stack(text: str) -> str:
    """A faulthandler dump (most recent call first) without the frames of
    pytest's own machinery below the test."""
    out: list[str] = []
    skipping = False
    for line in text.splitlines():
        frame = line.startswith("  File ")
        if frame and ("/_pytest/" in line or "/pluggy/" in line):
            skipping = True
        elif not frame:
            skipping = False
        if not skipping:
            out.append(line)
    return "\n".join(out)


def conclude(nodeid: str, nranks: int, timeout: float, results: list[RankResult],
             diagnosis: str | None = None) -> None:
    """Return when the test passed; raise the skip, xfail or failure otherwise."""
    states = {r.state for r in results}
    if states == {"passed"}:
        return
    if states == {"skipped"}:
        raise pytest.skip.Exception(results[0].text or "skipped on every rank", _use_item_location=True)
    if states == {"xfailed"}:
        raise pytest.xfail.Exception(results[0].text)
    raise RanksFailed(_failure_text(nranks, timeout, results, diagnosis))


def root_causes(results: list[RankResult]) -> list[RankResult]:
    """The ranks that failed or died, the likely root cause first: ranks whose
    process died (a crash is where trouble starts), then the others in the
    order they failed (a rank that fails after a peer usually fails because
    of it)."""
    bad = [r for r in results if r.state in ("failed", "died")]
    return sorted(bad, key=lambda r: (r.state != "died",
                                      r.at if r.at is not None else float("inf"), r.rank))


def _headline(causes: list[RankResult]) -> str:
    first, rest = causes[0], causes[1:]
    verb = "died" if first.state == "died" else "failed"
    line = f"rank {first.rank} {verb} first" if rest else f"rank {first.rank} {verb}"
    if first.crash:
        line += f": {first.crash}"
    if rest:
        line += f" (then {_ranks([r.rank for r in rest])})"
    return line


def _failure_text(nranks: int, timeout: float, results: list[RankResult],
                  diagnosis: str | None) -> str:
    by_state: dict[str, list[int]] = {}
    for r in results:
        by_state.setdefault(r.state, []).append(r.rank)
    parts = []
    causes = root_causes(results)
    if causes:
        parts.append(_headline(causes))
    running = by_state.get("running", [])
    if running:
        parts.append(f"{_ranks(running)} of {nranks} did not finish within the timeout of "
                     f"{timeout:g} s and {'was' if len(running) == 1 else 'were'} stopped")
    for r in causes:
        if r.state == "failed":
            parts.append(f"rank {r.rank} failed {r.text}")
        else:
            tail = r.output[-2000:].rstrip()
            parts.append(r.text + (f"; the end of its output:\n{tail}" if tail else ""))
    if by_state.get("skipped") and len(by_state) > 1:
        for r in results:
            if r.state == "skipped":
                parts.append(f"rank {r.rank} skipped ({r.text}) but not every rank did: "
                             "a skip must happen on every rank")
    summary = [f"{_ranks(ranks)} {state}" for state, ranks in sorted(by_state.items())
               if state in ("passed", "xfailed", "stopped")]
    if by_state.get("stopped"):
        summary.append("(stopped: still running after another rank failed)")
    if summary:
        parts.append("; ".join(summary))
    for r in results:
        if r.stack:
            parts.append(f"rank {r.rank} at the timeout:\n{trim_stack(r.stack).rstrip()}")
    if diagnosis:
        parts.append(f"diagnosis (flight records):\n{diagnosis.rstrip()}")
    return "\n\n".join(parts)
