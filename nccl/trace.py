"""Read the flight records of all ranks and say where they diverge.

``python -m nccl.trace DIR`` reads the ``*.json`` records that the ranks
wrote into DIR (``NCCL4PY_TRACE_DIR``: on a watchdog timeout, on an error,
on SIGUSR1, at exit, or ``Communicator.dump_trace()``) and prints, per
communicator:

- the first collective number where the ranks diverge: which ranks never
  called it and how long the others waited in it;
- collectives whose operation, dtype, reduction op, root or count differ
  between ranks;
- calls that failed, were aborted or never completed;
- ranks of which no record exists;
- the last completed collective of each rank.

``--json`` prints the same as one JSON object.  The exit status is 1 when a
problem was found, 0 when none (2 for a usage error: no records).  See
docs/debugging-hangs.md for a worked example.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["load", "analyze", "main"]

FORMAT = "nccl4py-trace-1"
# states of an entry that completed (or that nobody tracks further)
_COMPLETE = {"done", "issued"}
# operations whose send count must be the same on every rank
_SAME_COUNT = {"allreduce", "reduce", "reduce_scatter", "allgather", "gather", "alltoall",
               "allreduce_with_bias"}


def load(directory: str | Path) -> list[dict[str, Any]]:
    """The records in directory (files that are not records are skipped)."""
    records = []
    for path in sorted(Path(directory).glob("*.json")):
        try:
            rec = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(rec, dict) and rec.get("format") == FORMAT:
            rec["_path"] = str(path)
            records.append(rec)
    return records


def _ranks(ranks) -> str:
    ranks = sorted(ranks)
    return ("rank " if len(ranks) == 1 else "ranks ") + ",".join(map(str, ranks))


def _call(e: dict) -> str:
    extra = f" (root {e['root']})" if e.get("root", -1) >= 0 else ""
    return f"{e['op']} #{e['seq']}{extra}"


def _waited(e: dict, rec: dict) -> float:
    end = e.get("end") or rec.get("time") or e["enqueue"]
    return max(0.0, end - e["enqueue"])


def _group(records: list[dict]) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = {}
    for rec in records:
        key = rec.get("comm_hash") or f"comm{rec.get('comm_index', 0)}-of-{rec.get('nranks')}"
        groups.setdefault(key, []).append(rec)
    return groups


def _analyze_comm(key: str, recs: list[dict]) -> dict[str, Any]:
    nranks = max(r.get("nranks", 0) for r in recs)
    by_rank: dict[int, dict] = {}
    for rec in recs:  # one record per rank: the newest
        old = by_rank.get(rec["rank"])
        if old is None or rec.get("time", 0) >= old.get("time", 0):
            by_rank[rec["rank"]] = rec
    coll = {r: {e["seq"]: e for e in rec["entries"] if e["kind"] == "coll"}
            for r, rec in by_rank.items()}
    messages: list[str] = []
    out: dict[str, Any] = {"comm_hash": key, "nranks": nranks, "ranks": sorted(by_rank),
                           "missing_records": [r for r in range(nranks) if r not in by_rank],
                           "diverged": None, "mismatches": [], "failed": [],
                           "last_completed": {}}
    if out["missing_records"]:
        messages.append(f"no record from {_ranks(out['missing_records'])} (the process may have "
                        "died before writing one)")

    # divergence: the first number that some ranks called and others did not
    top = {r: rec.get("calls", max(coll[r], default=0)) for r, rec in by_rank.items()}
    low = max((min(c) for c in coll.values() if c), default=1)  # older entries left the rings
    for seq in range(low, max(top.values(), default=0) + 1):
        absent = [r for r in by_rank if top[r] < seq]
        present = [r for r in by_rank if seq in coll[r]]
        if not absent or not present:
            continue
        e = coll[present[0]][seq]
        waits = [_waited(coll[r][seq], by_rank[r]) for r in present]
        exited = [r for r in absent if by_rank[r].get("reason") == "exit"]
        msg = (f"{_ranks(absent)} did not call {_call(e)}; {_ranks(present)} waited "
               f"{max(waits):.1f} s")
        if exited:
            msg += f" ({_ranks(exited)}: the process ended after its last call, #{top[exited[0]]})"
        messages.append(msg)
        out["diverged"] = {"seq": seq, "op": e["op"], "missing": absent, "waiting": present,
                           "waited": round(max(waits), 3)}
        break

    # mismatches: the same number, different calls
    for seq in sorted(set().union(*[set(c) for c in coll.values()])):
        have = {r: coll[r][seq] for r in coll if seq in coll[r]}
        if len(have) < 2:
            continue
        for field in ("op", "dtype", "redop", "root", "count"):
            if field == "count" and not all(e["op"] in _SAME_COUNT for e in have.values()):
                continue
            values: dict[Any, list[int]] = {}
            for r, e in have.items():
                values.setdefault(e.get(field), []).append(r)
            if len(values) > 1:
                what = "; ".join(f"{_ranks(rs)}: {v}" for v, rs in values.items())
                messages.append(f"mismatched {field} at collective #{seq}: {what}")
                out["mismatches"].append({"seq": seq, "field": field,
                                          "values": {str(v): rs for v, rs in values.items()}})
                break  # the first differing field says it

    # calls that failed or did not complete, and the last completed one
    for r, rec in sorted(by_rank.items()):
        last = None
        for e in rec["entries"]:
            if e["state"] in _COMPLETE:
                if e["kind"] == "coll":
                    last = e
                continue
            kind = "" if e["kind"] == "coll" else f" (peer {e['peer']})"
            what = {"failed": f"failed with status {e['status']}",
                    "aborted": "was aborted",
                    "running": "had not returned",
                    "grouped": "was queued in a group that had not ended",
                    "enqueued": "had not completed on the GPU"}.get(e["state"], e["state"])
            out["failed"].append({"rank": r, "seq": e["seq"], "kind": e["kind"], "op": e["op"],
                                  "state": e["state"], "status": e["status"],
                                  "waited": round(_waited(e, rec), 3)})
            messages.append(f"rank {r}: {_call(e)}{kind} {what} after "
                            f"{_waited(e, rec):.1f} s")
        aborted = rec.get("aborted")
        if aborted:
            why = "timeout" if aborted["status"] == 8 else f"async error {aborted['status']}"
            who = f", waiting for ranks {aborted['waiting_for']}" if aborted.get(
                "waiting_for") else ""
            messages.append(f"rank {r}: the watchdog aborted the communicator ({why} in "
                            f"{aborted['op']} #{aborted['seq']} after {aborted['waited']:.1f} s"
                            f"{who})")
        out["last_completed"][r] = {"seq": last["seq"], "op": last["op"]} if last else None
    out["problem"] = bool(messages)
    out["messages"] = messages
    return out


def analyze(records: list[dict]) -> dict[str, Any]:
    comms = [_analyze_comm(k, v) for k, v in _group(records).items()]
    return {"records": len(records), "communicators": comms,
            "problem": any(c["problem"] for c in comms)}


def _print(result: dict, out) -> None:
    for c in result["communicators"]:
        print(f"communicator {c['comm_hash']} ({c['nranks']} ranks; records from "
              f"{_ranks(c['ranks'])})", file=out)
        for m in c["messages"]:
            print(f"  {m}", file=out)
        if not c["messages"]:
            print("  no problem found: every rank made the same calls and all completed",
                  file=out)
        for r, last in sorted(c["last_completed"].items()):
            done = f"{last['op']} #{last['seq']}" if last else "none"
            print(f"  rank {r}: last completed collective: {done}", file=out)
    print("problem found" if result["problem"] else "no problem", file=out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m nccl.trace",
                                description="Diagnose a hang or mismatch from the flight records "
                                "of all ranks (NCCL4PY_TRACE_DIR).")
    p.add_argument("dir", help="directory with the ranks' rank<R>.json records")
    p.add_argument("--json", action="store_true", help="print the diagnosis as JSON")
    args = p.parse_args(argv)
    records = load(args.dir)
    if not records:
        print(f"python -m nccl.trace: no flight records (*.json) in {args.dir}", file=sys.stderr)
        return 2
    result = analyze(records)
    if args.json:
        json.dump(result, sys.stdout, indent=1)
        print()
    else:
        _print(result, sys.stdout)
    return 1 if result["problem"] else 0


if __name__ == "__main__":
    sys.exit(main())
