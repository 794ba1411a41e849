"""``python -m nccl.bench`` on the host backend with 2 ranks: nccl-tests'
format, real correctness checks, JSON, the exit status and the plot."""
from __future__ import annotations

import json
import struct
import subprocess
import sys
import zlib

import numpy as np
import pytest

from bench_run import bench, parse
from conftest import clean_env, help_option, host_available

pytestmark = pytest.mark.skipif(not host_available(), reason="host backend not built")

HEADER = [
    "#" + " " * 62 + "out-of-place" + " " * 23 + "in-place" + " " * 10,
    "#       size         count      type   redop    root     time   algbw   busbw  #wrong "
    "    time   algbw   busbw  #wrong ",
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)         "
    "    (us)  (GB/s)  (GB/s)         ",
]
FACTORS = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
           "broadcast": lambda n: 1.0, "reduce": lambda n: 1.0,
           "reduce_scatter": lambda n: (n - 1) / n, "alltoall": lambda n: (n - 1) / n,
           "gather": lambda n: (n - 1) / n, "scatter": lambda n: (n - 1) / n,
           "sendrecv": lambda n: 1.0, "allreduce_with_bias": lambda n: 2 * (n - 1) / n,
           "alltoallv": lambda n: (n - 1) / n}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "r.json"
    p = bench("all", "-b", "1K", "-e", "64K", "-f", "8", "-n", "3", "-J", str(out))
    return p, json.loads(out.read_text()) if out.exists() else None


def test_format(sweep):
    p, _ = sweep
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.startswith("# nccl-tests version ")
    assert "nccl-library=" in p.stdout.splitlines()[0]
    blocks = parse(p.stdout)
    assert set(blocks) == {f"{c}_perf" for c in FACTORS}
    for name, b in blocks.items():
        text = "\n".join(b["lines"])
        assert "# nThread 1 nGpus 1 minBytes 1024 maxBytes 65536 step: 8(factor) warmup iters: "\
               "1 iters: 3 agg iters: 1 validation: 1 graph: 0 unalign: 0" in text
        assert "# Using devices" in text and text.count("#  Rank ") == 2
        for h in HEADER:
            assert h in b["lines"], (name, h)
        assert [r["size"] for r in b["rows"]] == [1024, 8192, 65536]
        assert b["oob"] == "0 OK"
        assert b["lines"][-1] == f"# Collective test concluded: {name}"
        halves = [r[k] for r in b["rows"] for k in ("oop", "ip")]
        assert all(h[3] == "0" for h in halves), name  # #wrong
        assert b["avg"] == pytest.approx(sum(h[2] for h in halves) / len(halves), abs=0.011)
        coll = name[:-5]
        for r in b["rows"]:
            for h in (r["oop"], r["ip"]):
                if h[1] >= 1:  # two decimals: compare where rounding is small
                    assert h[2] == pytest.approx(h[1] * FACTORS[coll](2), rel=0.02, abs=0.011)
            assert r["root"] == (0 if coll in ("broadcast", "reduce", "gather", "scatter")
                                 else -1)
            assert r["redop"] == ("sum" if coll in ("all_reduce", "reduce", "reduce_scatter",
                                                    "allreduce_with_bias") else "none")
    ar = blocks["all_reduce_perf"]["rows"][0]
    assert ar["count"] == 256 and ar["type"] == "float"
    ag = blocks["all_gather_perf"]["rows"][0]
    assert ag["size"] == 1024 and ag["count"] == 128  # per-rank count


def test_json_matches_table(sweep):
    p, doc = sweep
    assert doc is not None
    assert doc["nranks"] == 2 and doc["library"]["family"] == "host"
    table = [r for b in parse(p.stdout).values() for r in b["rows"]]
    assert len(doc["results"]) == len(table)
    for rec, row in zip(doc["results"], table):
        assert (rec["size"], rec["count"], rec["type"], rec["redop"], rec["root"]) == \
            (row["size"], row["count"], row["type"], row["redop"], row["root"])
        for key, half in (("out_of_place", row["oop"]), ("in_place", row["ip"])):
            assert f"{rec[key]['time']:.2f}"[:4] == f"{half[0]:.2f}"[:4] or \
                rec[key]["time"] == pytest.approx(half[0], rel=0.01)
            assert round(rec[key]["bus_bw"], 2) == pytest.approx(half[2], abs=0.006)
            assert rec[key]["nwrong"] == int(half[3])


def test_types_ops_roots_all():
    p = bench("reduce", "-b", "64", "-e", "64", "-o", "all", "-d", "all", "-r", "all",
              "-n", "1")
    assert p.returncode == 0, p.stdout + p.stderr
    rows = parse(p.stdout)["reduce_perf"]["rows"]
    assert len(rows) == 12 * 6 * 2
    assert {r["redop"] for r in rows} == {"sum", "prod", "max", "min", "avg", "mulsum"}
    assert {r["root"] for r in rows} == {0, 1}
    assert all(r["oop"][3] == "0" and r["ip"][3] == "0" for r in rows)


def test_no_check_prints_na():
    p = bench("all_reduce", "-b", "8", "-e", "8", "-c", "0", "-n", "1")
    assert p.returncode == 0, p.stderr
    row = parse(p.stdout)["all_reduce_perf"]["rows"][0]
    assert row["oop"][3] == "N/A" and row["ip"][3] == "N/A"


def test_corruption_is_detected(tmp_path):
    out = tmp_path / "bad.json"
    p = bench("all_reduce", "sendrecv", "-b", "1K", "-e", "2K", "-f", "2", "-n", "1", "-J",
              str(out), env=clean_env(NCCL4PY_BENCH_TEST_CORRUPT="1"))
    assert p.returncode != 0
    for b in parse(p.stdout).values():
        assert b["rows"] and all(r["oop"][3] == "1" and r["ip"][3] == "1" for r in b["rows"])
    doc = json.loads(out.read_text())
    assert all(r["out_of_place"]["nwrong"] == 1 for r in doc["results"])


def test_usage_errors():
    assert bench("no_such_collective").returncode == 2
    assert bench("all_reduce", "-b", "2M", "-e", "1M").returncode == 2
    assert bench("all_reduce", "-d", "complex").returncode == 2
    h = subprocess.run([sys.executable, "-m", "nccl.bench", "--help"], capture_output=True,
                       text=True)
    assert h.returncode == 0 and help_option("-b", "--minbytes", "SIZE") in h.stdout


def test_sizes_and_factors():
    from nccl.bench.cli import parse_size, sizes
    from nccl.bench.collectives import COLLECTIVES, counts

    assert parse_size("128M") == 128 << 20 and parse_size("1K") == 1024 and parse_size("8") == 8
    assert sizes(8, 128, 0, 2) == [8, 16, 32, 64, 128]
    assert sizes(1 << 20, 3 << 20, 1 << 20, 0) == [1 << 20, 2 << 20, 3 << 20]
    # per-rank counts rounded down to 16 bytes (nccl-tests)
    assert counts(COLLECTIVES["all_gather"], 1000, 7, 3) == (80, 240, 80)
    assert counts(COLLECTIVES["reduce_scatter"], 1000, 8, 3) == (120, 40, 40)  # 125 doubles: 41 per rank, even
    assert counts(COLLECTIVES["all_reduce"], 1000, 7, 3) == (250, 250, 250)


def test_each_collective_runs_a_communicator_method():
    from nccl.bench.collectives import COLLECTIVES, method_name
    from nccl.core import Communicator

    methods = {name: method_name(c, Communicator) for name, c in COLLECTIVES.items()}
    assert methods["all_reduce"] == "allreduce" and methods["reduce_scatter"] == "reduce_scatter"
    assert methods.pop("sendrecv") is None  # a send and a recv in a group
    assert all(m is not None and callable(getattr(Communicator, m)) for m in methods.values())
    # which take an op and a root: the methods' parameters say it
    flags = {name: (c.reduces, c.rooted) for name, c in COLLECTIVES.items()}
    assert flags["reduce"] == (True, True) and flags["all_reduce"] == (True, False)
    assert flags["broadcast"] == (False, True) and flags["sendrecv"] == (False, False)
    assert flags["alltoallv"] == (False, False)


def png_info(data):
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    w, h, depth, ctype = struct.unpack(">IIBB", data[16:26])
    pos, idat = 8, b""
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + n]
        pos += 12 + n
    return w, h, depth, ctype, zlib.decompress(idat)


def test_plot(tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "bw.png"
    p = bench("all_reduce", "all_gather", "-b", "1K", "-e", "256K", "-f", "4", "-n", "2",
              "--plot", str(png))
    assert p.returncode == 0, p.stdout + p.stderr
    data = png.read_bytes()
    assert 10_000 < len(data) < 5_000_000
    w, h, depth, ctype, raw = png_info(data)
    assert 400 <= w <= 4000 and 300 <= h <= 4000 and depth == 8
    channels = {2: 3, 6: 4}[ctype]
    stride = w * channels + 1
    colours = set()
    for y in range(0, h, 7):
        line = raw[y * stride + 1:(y + 1) * stride]  # filtered bytes still vary with colour
        colours.update(line[i:i + 3] for i in range(0, len(line), channels * 5))
    assert len(colours) > 1


def test_plot_without_matplotlib(tmp_path):
    env = clean_env(PYTHONPATH=str(tmp_path))
    (tmp_path / "matplotlib").mkdir()
    (tmp_path / "matplotlib" / "__init__.py").write_text("raise ImportError('no')\n")
    p = bench("all_reduce", "-b", "8", "-e", "8", "--plot", str(tmp_path / "x.png"), env=env)
    # find_spec sees the package; the import fails: a clear message, no traceback
    assert p.returncode != 0
    assert "matplotlib" in p.stderr and "Traceback" not in p.stderr


def _reference(coll, rank, nranks, root, op, sc, rc, pc):
    """The whole expected result from every rank's whole input (the checks'
    semantics written out once more, on full arrays)."""
    from nccl.bench.collectives import pattern, reduce_values
    ins = [pattern(r, sc, op, nranks) for r in range(nranks)]
    name = coll.name
    if name in ("reduce", "gather") and rank != root:
        return None
    if name in ("all_reduce", "allreduce_with_bias", "reduce"):
        return reduce_values(ins, op, nranks)
    if name == "reduce_scatter":
        return reduce_values([x[rank * pc:(rank + 1) * pc] for x in ins], op, nranks)
    if name in ("all_gather", "gather"):
        return np.concatenate(ins)
    if name == "broadcast":
        return ins[root]
    if name == "scatter":
        return ins[root][rank * pc:(rank + 1) * pc]
    if name in ("alltoall", "alltoallv"):
        return np.concatenate([x[rank * pc:(rank + 1) * pc] for x in ins])
    assert name == "sendrecv"
    return ins[(rank - 1) % nranks]


@pytest.mark.parametrize("nranks", [1, 2, 3, 4])
def test_expected_values_block_by_block_are_the_whole_result(nranks):
    from nccl.bench.collectives import COLLECTIVES, counts, expected_range, pattern
    size = 4 * 1000  # 1000 float32: blocks cross the ranks' pieces at odd places
    for coll in COLLECTIVES.values():
        sc, rc, pc = counts(coll, size, 7, nranks)
        for op in ([None] if coll.name in ("broadcast", "all_gather", "gather", "scatter",
                                           "alltoall", "alltoallv", "sendrecv")
                   else ["sum", "prod", "avg", "mulsum"]):
            for rank in range(nranks):
                ref = _reference(coll, rank, nranks, 1 % nranks, op, sc, rc, pc)
                for blk in (1, 7, 64, pc or 1, rc + 5):
                    parts = [expected_range(coll, rank, nranks, 1 % nranks, op, pc,
                                            lambda r, a, b: pattern(r, b - a, op, nranks,
                                                                    start=a),
                                            lo, min(rc, lo + blk))
                             for lo in range(0, rc, blk)]
                    if ref is None:
                        assert all(p is None for p in parts), (coll.name, rank)
                        continue
                    got = np.concatenate(parts) if parts else np.zeros(0)
                    assert got.shape == ref.shape and np.array_equal(got, ref), \
                        (coll.name, op, rank, blk)


def test_a_large_check_needs_no_more_than_the_buffers():
    """16 MiB of fp8 on 2 ranks: the check compares block by block (its
    float64 references of every rank's input took 740 MiB a rank), and a
    byte flipped in the last block is found."""
    pytest.importorskip("ml_dtypes")
    probe = (
        "import resource, subprocess, sys\n"
        "p = subprocess.run([sys.executable, '-m', 'nccl.bench', 'reduce_scatter', '--nranks',"
        " '2', '--backend', 'host', '-b', '16M', '-e', '16M', '-d', 'f8e4m3', '-o', 'mulsum',"
        " '-n', '1', '-w', '0'], capture_output=True, text=True)\n"
        "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        "print(p.stdout)\n")
    for corrupt in (None, "1"):
        env = clean_env(NCCL4PY_BENCH_TEST_CORRUPT=corrupt) if corrupt else clean_env()
        p = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                           text=True, timeout=300)
        head, out = p.stdout.split("\n", 1)
        rc, rss_kib = (int(x) for x in head.split())
        row = parse(out)["reduce_scatter_perf"]["rows"][0]
        assert rss_kib < 400 * 1024, rss_kib
        if corrupt:
            assert rc != 0 and row["oop"][3] == "1" and row["ip"][3] == "1", out
        else:
            assert rc == 0 and row["oop"][3] == "0" and row["ip"][3] == "0", out
