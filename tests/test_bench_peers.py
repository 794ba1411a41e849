"""``bench/host_vs_mpi.py`` with the host backend alone: every collective at
a few sizes and rank counts, results checked on every rank, the memcpy model
and the JSON output (no MPI or gloo needed; no timing is asserted)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import clean_env, host_available

pytestmark = pytest.mark.skipif(not host_available(), reason="host backend not built")

SCRIPT = Path(__file__).resolve().parent.parent / "bench" / "host_vs_mpi.py"
OPS = ("allreduce", "allgather", "reduce_scatter", "broadcast", "alltoall")


@pytest.mark.heavy("bench/host_vs_mpi.py: every collective on 2 and 3 ranks")
def test_host_alone(tmp_path):
    out = tmp_path / "r.json"
    p = subprocess.run([sys.executable, str(SCRIPT), "--peers", "--ranks", "2", "3",
                        "--sizes", "8,4K,1M", "--memcpy-bytes", "4M", "--json", str(out)],
                       env=clean_env(), capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads(out.read_text())
    rows = doc["rows"]
    assert {(r["op"], r["n"]) for r in rows} == {(o, n) for o in OPS for n in (2, 3)}
    for r in rows:
        assert r["ok"] is True, r
        assert r["time"]["ours"] > 0 and r["model_time"] > 0, r
    # sizes as in nccl-tests: the gathered size, or what each rank sends
    got = {(r["op"], r["n"], r["size"]): r["bytes"] for r in rows}
    assert got[("allgather", 3, 4096)] == 4092 and got[("alltoall", 3, 8)] == 12
    assert got[("allreduce", 2, 1 << 20)] == 1 << 20
    assert "memcpy 4MB, 2 streams at once" in p.stdout
    assert doc["layout"] == "page" and "page layout" in p.stdout
    assert "1048576" in p.stdout and "%" in p.stdout  # the model column of a 1 MiB row


def bench_module():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import host_vs_mpi
    finally:
        sys.path.pop(0)
    return host_vs_mpi


def test_page_layout_starts_every_array_at_a_page():
    import numpy as np

    placed = bench_module().placed
    for n in (1, 3, 1000, 1 << 18):
        a = np.arange(n, dtype=np.float32) + 1
        got = placed(a, "page")
        assert got.ctypes.data % 4096 == 0, n
        assert got.dtype == a.dtype and got.shape == a.shape and np.array_equal(got, a)
        assert not np.shares_memory(got, a)
        assert placed(a, "heap") is a


def test_rounds_keep_the_best_time_and_every_wrong_result():
    host_vs_mpi = bench_module()

    def run(*rows):
        return {"results": [{"op": "allreduce", "size": s, "time": t, "ok": ok}
                            for s, t, ok in rows], "all_ranks_ok": True}

    data: dict = {}
    host_vs_mpi.merge_best(data, "ours", run((8, 2.0, True), (64, 1.0, True)))
    host_vs_mpi.merge_best(data, "ours", run((8, 1.5, True), (64, 0.5, False)))
    got = {r["size"]: (r["time"], r["ok"]) for r in data["ours"]["results"]}
    assert got[8] == (1.5, True)
    assert got[64][1] is False  # a wrong result in any round is reported
    rounds = {r["size"]: r["rounds"] for r in data["ours"]["results"]}
    assert rounds == {8: [2.0, 1.5], 64: [1.0, 0.5]}  # every round's time, for the noise
    host_vs_mpi.merge_best(data, "ours", run((8, 3.0, True), (64, 0.2, True)))
    got = {r["size"]: (r["time"], r["ok"], r["rounds"]) for r in data["ours"]["results"]}
    assert got[8] == (1.5, True, [2.0, 1.5, 3.0])
    assert got[64] == (0.5, False, [1.0, 0.5, 0.2])  # a wrong round's time is not a best
    assert host_vs_mpi.spread([2e-6, 1e-6, 3e-6]) == "1.0-3.0 us"
