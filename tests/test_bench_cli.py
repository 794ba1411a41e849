"""``python -m nccl.bench`` behaves like nccl-tests for a user: every mistake
that can be found before the ranks start is reported then (nothing runs),
nccl-tests' -g/-t/-G/-z/-N/-C are accepted, a progress line with the time
left ticks on stderr, the run ends with a summary, the JSON says what its
numbers mean, and plots have one panel per collective and can be redrawn
from a saved file."""
from __future__ import annotations

import datetime
import json
import re
import subprocess
import sys

import pytest

from conftest import clean_env, help_option, host_available
from bench_run import bench, parse

needs_host = pytest.mark.skipif(not host_available(), reason="host backend not built")


def bench_cmd(*args, env=None, timeout=120):
    """The bench without the test's default --nranks/--backend."""
    return subprocess.run([sys.executable, "-m", "nccl.bench", *args], env=env or clean_env(),
                          capture_output=True, text=True, timeout=timeout)


# ------------------------------------------------------------ pre-flight checks

@pytest.mark.parametrize("args,message", [
    (["-J", "{tmp}/no/such/dir/r.json"], "-J '{tmp}/no/such/dir/r.json': the directory"),
    (["-J", "{tmp}"], "-J '{tmp}' is a directory"),
    (["--plot", "{tmp}/missing/bw.png"], "--plot '{tmp}/missing/bw.png': the directory"),
    (["-r", "2"], "-r 2: the root must be a rank, 0..1 with 2 ranks"),
    (["-r", "-1"], "-r -1: the root must be a rank"),
    (["-r", "one"], "-r 'one': a root is a rank number or 'all'"),
    (["-b", "2M", "-e", "1M"], "-b 2097152 is larger than -e 1048576"),
    (["-b", "0", "-e", "0"], "-e 0: the largest size must be at least 1 byte"),
    (["-b", "8", "-e", "1M", "-i", "0"], "-i 0 without a factor"),
    (["-b", "1", "-e", "1G", "-i", "1"], "gives 1073741824 sizes (at most 4096)"),
    (["-g", "2"], "-g 2: each rank drives one GPU here; for 2 ranks use --nranks 2"),
    (["-t", "4"], "-t 4: each rank drives one GPU here; for 4 ranks use --nranks 4"),
    # sizes are read exactly, and must fit in a buffer and in this machine
    (["-b", "99999999999999999999"], "too large: '99999999999999999999' (at most "
                                     "9223372036854775807 bytes"),
    (["-e", "8E"], "not a size: '8E'"),
    (["-b", "1.3"], "not a whole number of bytes: '1.3'"),
    (["-b", "1T", "-e", "1T"], "-e 1099511627776: the 2 ranks need 4 TiB for their buffers "
                               "(2 of 1 TiB each), more than this machine's"),
    # every count has a range, named with its flag
    (["-m", "30000000"], "argument -m/--agg_iters: must be from 1 to 10000: '30000000'"),
    (["-m", "99999999999"], "argument -m/--agg_iters: must be from 1 to 10000"),
    (["-n", "1" + "0" * 20], "argument -n/--iters: must be from 0 to 1000000"),
    (["-w", "1" + "0" * 20], "argument -w/--warmup_iters: must be from 0 to 1000000"),
    (["-c", "1" + "0" * 20], "argument -c/--check: must be from 0 to 1000"),
    (["-T", "0"], "argument -T/--timeout: must be from 1 to 31536000: '0'"),
    (["-T", "1" + "0" * 20], "argument -T/--timeout: must be from 1 to 31536000"),
    (["-f", "1" + "0" * 20], "argument -f/--stepfactor: must be from 0 to 9223372036854775807"),
    (["-N", "1" + "0" * 20], "argument -N/--run_cycles: must be from 0 to 2147483647"),
    (["--progress-every", "1e300"], "argument --progress-every: must be from 0 to 31536000 "
                                    "seconds"),
    (["--nranks", "1" + "0" * 20], "argument --nranks/--np: must be from 1 to 2147483647"),
    (["-n", "1000000", "-m", "100"], "-n 1000000 -m 100 -w 1: 100000001 operations per size "
                                     "(-n x -m + -w; at most 10000000)"),
    # more ranks than python -m nccl.run starts here (any machine has fewer than 25000 CPUs)
    (["--nranks", "100000", "-b", "8", "-e", "8", "-r", "all"],
     "--nranks 100000: python -m nccl.run refuses it: -n 100000 is more than"),
    # mpirun's -np is not nccl-tests' -n (iterations)
    (["-np", "2"], "-np 2: here, as in nccl-tests, -n is the number of iterations; to start "
                   "2 ranks use --nranks 2"),
    (["-np4"], "-np4: here, as in nccl-tests, -n is the number of iterations; to start "
               "4 ranks use --nranks 4"),
])
def test_mistakes_are_reported_before_any_rank_starts(tmp_path, args, message):
    args = [a.format(tmp=tmp_path) for a in args]
    p = bench(*args)
    assert p.returncode == 2, p.stdout + p.stderr
    assert message.format(tmp=tmp_path) in p.stderr, p.stderr
    assert p.stdout == ""  # no rank ran: no table at all
    assert "Traceback" not in p.stderr
    assert sorted(x.name for x in tmp_path.iterdir()) == []  # nothing left behind


def test_the_memory_estimate_counts_the_queued_operations():
    """-m operations queued in a group hold host memory in every rank, on
    every backend; the buffers of -e count on the host backend only."""
    from nccl.bench.checks import QUEUED_OP_BYTES, memory_problem

    assert memory_problem(8, 4, 4 * 100 * QUEUED_OP_BYTES + 64, agg=100) is None
    assert memory_problem(8, 4, 100 << 10, agg=100) == (
        "-m 100: the 4 ranks need 200 KiB for the operations they queue (100 of about 512 B "
        "each) and their buffers, more than this machine's 100 KiB of memory")
    assert memory_problem(1 << 40, 2, 1 << 30, agg=1000, host=False) is None
    assert memory_problem(8, 2, 1 << 20, agg=10000, host=False) == (
        "-m 10000: the 2 ranks need 9.77 MiB for the operations they queue (10000 of about "
        "512 B each), more than this machine's 1 MiB of memory")
    assert memory_problem(1 << 30, 2, 1 << 30, agg=10).startswith(
        "-e 1073741824: the 2 ranks need 4 GiB for their buffers")


def test_sizes_are_exact():
    from nccl.bench.cli import parse_size

    assert parse_size("1.5K") == 1536 and parse_size("64KiB") == 65536
    assert parse_size("9223372036854775807") == (1 << 63) - 1  # not rounded through a float
    assert parse_size("4611686018427387905") == (1 << 62) + 1


def test_every_mistake_is_listed_at_once(tmp_path):
    p = bench("-b", "2M", "-e", "1M", "-r", "7", "-J", str(tmp_path / "x" / "r.json"))
    assert p.returncode == 2
    assert len([ln for ln in p.stderr.splitlines() if ": error: " in ln]) == 3, p.stderr


@pytest.mark.parametrize("var,value", [("NCCL_TESTS_MIN_BW", "fast"),
                                       ("NCCL_TESTS_MIN_BW", "-1"),
                                       ("NCCL4PY_BENCH_TEST_CORRUPT", "yes")])
def test_bad_variables_are_reported_before_any_rank_starts(var, value):
    p = bench("-b", "8", "-e", "8", env=clean_env(**{var: value}))
    assert p.returncode == 2 and f"{var}={value!r}" in p.stderr and p.stdout == "", p.stderr


def test_size_count_matches_the_sizes():
    from nccl.bench.checks import size_count
    from nccl.bench.cli import sizes

    for b, e, i, f in [(8, 128, 0, 2), (0, 64, 0, 4), (1, 1 << 30, 0, 2), (7, 1000, 3, 0),
                       (1 << 20, 3 << 20, 1 << 20, 0), (5, 5, 0, 0), (0, 1, 0, 8)]:
        assert size_count(b, e, i, f) == len(sizes(b, e, i, f)), (b, e, i, f)


def test_existing_output_file_is_kept_by_the_check(tmp_path):
    from nccl.bench.checks import writable

    out = tmp_path / "r.json"
    out.write_text("old")
    assert writable(str(out), "-J") is None and out.read_text() == "old"
    assert writable(str(tmp_path / "new.json"), "-J") is None
    assert not (tmp_path / "new.json").exists()


# ----------------------------------------------------------- nccl-tests habits

@needs_host
def test_nccl_tests_flags_are_accepted():
    p = bench("all_reduce", "-b", "8", "-e", "8", "-n", "1", "-g", "1", "-t", "1", "-G", "5",
              "-z", "1", "-N", "2", "-C", "1")
    assert p.returncode == 0, p.stdout + p.stderr
    notes = [ln for ln in p.stderr.splitlines() if ": note: " in ln]
    assert [n.split(": note: ")[1].split()[0] for n in notes] == ["-G", "-z", "-N", "-C"]
    assert all("is not applicable here" in n and n.endswith("ignored") for n in notes)
    assert parse(p.stdout)["all_reduce_perf"]["rows"]


def test_help_explains_ranks_and_the_flags():
    p = bench_cmd("--help")
    assert p.returncode == 0
    text = " ".join(p.stdout.split())
    assert "-g and -t accept only 1 (nccl-tests' -g 8 is --nranks 8 here)" in text
    for flag in (help_option("-G", "--cudagraph", "N"), help_option("-z", "--blocking", "N"),
                 help_option("-N", "--run_cycles", "N"), help_option("-C", "--report_cputime", "N"),
                 "--plot-from JSON", "--progress-every SECONDS"):
        assert flag in p.stdout, flag
    # every number's range is stated
    for rule in ("0 to 2^63-1 bytes", "timed iterations per size, 0 to 1000000",
                 "warm-up iterations, 0 to 1000000", "one group per iteration, 1 to 10000",
                 "-n x -m + -w at most 10000000", "N times per size, 0 to 1000",
                 "after SECONDS, 1 to 31536000", "0 to 31536000 (default 10",
                 "(0 to 2147483647)", "python -m nccl.run -n allows"):
        assert rule in text, rule


@pytest.mark.heavy("an all-reduce sweep to 64 MiB long enough for progress ticks")
@needs_host
def test_progress_ticks_with_an_eta():
    p = bench("all_reduce", "-b", "16M", "-e", "64M", "-f", "4", "-n", "20",
              "--progress-every", "0.2", timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    ticks = [ln for ln in p.stderr.splitlines() if ln.startswith("nccl.bench progress: [")]
    assert ticks and ticks[0].endswith("starting the ranks"), ticks[:3]
    # the last size runs for a while: several ticks during it, each later than the one
    # before, all with an estimate of the time left
    during = [t for t in ticks if t.startswith("nccl.bench progress: [1/2 rows")]
    assert len(during) >= 2, p.stderr
    assert all("all_reduce_perf, size 64M for " in t and re.search(r"ETA \d", t)
               for t in during), during
    times = [float(re.search(r"size 64M for ([\d.]+) s", t).group(1)) for t in during]
    assert times == sorted(times) and times[-1] > times[0]
    assert "\r" not in p.stderr and "\033" not in p.stderr  # plain lines when not a terminal


@needs_host
def test_no_progress_lines_with_zero():
    p = bench("all_reduce", "-b", "8", "-e", "8", "-n", "1", "--progress-every", "0")
    assert p.returncode == 0 and "progress" not in p.stderr, p.stderr


def test_progress_estimate():
    import io

    from nccl.bench.progress import Progress, format_seconds, format_size

    out = io.StringIO()
    plan = [("all_reduce_perf", [1 << 20, 4 << 20]), ("alltoallv_perf", [1 << 20]),
            ("sendrecv_perf", [1 << 20])]
    bar = Progress(out, plan, tty=False, every=0)
    assert bar.total_rows == 4
    assert bar.text().endswith("starting the ranks")
    bar.feed("# Collective test starting: all_reduce_perf")
    bar.t_rows -= 10  # the first row took ten seconds
    bar.feed("     1048576   262144  float  sum  -1  1 1 1 0  1 1 1 0")
    assert bar.done_rows == 1
    text = bar.text(now=bar.t_last_row)
    assert text.startswith("[1/4 rows, ") and "all_reduce_perf, size 4M for 0.0 s" in text
    assert re.search(r"ETA \d", text)
    # a collective the library lacks is skipped by the ranks: the count resynchronises
    bar.feed("     4194304  1048576  float  sum  -1  1 1 1 0  1 1 1 0")
    bar.feed("# Collective test concluded: all_reduce_perf")
    bar.feed("# Collective test starting: sendrecv_perf")
    assert bar.done_rows == 3 and bar.text().startswith("[3/4 rows")
    assert format_size(8) == "8" and format_size(64 << 10) == "64K" and \
        format_size(3 << 19) == "1.5M" and format_size(2 << 30) == "2G"
    assert format_seconds(5) == "5.0 s" and format_seconds(125) == "2 min 05 s"


# ------------------------------------------------------------ summary and JSON

@pytest.fixture(scope="module")
def two_collectives(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench-json") / "r.json"
    args = ("all_reduce", "broadcast", "-b", "1K", "-e", "16K", "-f", "4", "-n", "2", "-J",
            str(out))
    p = bench(*args)
    return p, (json.loads(out.read_text()) if out.exists() else None), args


@needs_host
def test_summary_across_collectives(two_collectives):
    p, _, _ = two_collectives
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    start = lines.index(next(ln for ln in lines if ln.startswith("# Summary of 2 collective")))
    assert start > max(i for i, ln in enumerate(lines) if ln.startswith("# Collective test "
                                                                          "concluded"))
    blocks = parse(p.stdout)
    rows = {ln.split()[1]: ln.split() for ln in lines[start:] if ln.startswith("# ")
            and ln.split()[1].endswith("_perf")}
    assert set(rows) == {"all_reduce_perf", "broadcast_perf"}
    for name, f in rows.items():
        assert int(f[2]) == len(blocks[name]["rows"])
        assert float(f[3]) == pytest.approx(blocks[name]["avg"], abs=0.002)
        assert f[5:7] == ["0", "0"]
    assert lines[-1] == "# Result: OK: 0 wrong or out-of-bounds values"


@needs_host
def test_json_says_what_its_numbers_mean(two_collectives):
    p, doc, args = two_collectives
    assert doc is not None, p.stderr
    assert doc["units"] == {"size": "B", "count": "elements", "time": "us", "alg_bw": "GB/s",
                            "bus_bw": "GB/s", "avg_busbw": "GB/s", "max_busbw": "GB/s"}
    assert doc["hostname"] and doc["command_line"].startswith("python -m nccl.bench ")
    assert doc["command_line"].endswith(" ".join(args))
    stamp = datetime.datetime.fromisoformat(doc["timestamp"])
    assert stamp.tzinfo is not None
    assert abs((datetime.datetime.now(datetime.timezone.utc) - stamp).total_seconds()) < 3600
    blocks = parse(p.stdout)
    assert set(doc["summary"]) == {"all_reduce", "broadcast"}
    for name, s in doc["summary"].items():
        assert s["avg_busbw"] == pytest.approx(blocks[f"{name}_perf"]["avg"], abs=0.002)
        halves = [r[h]["bus_bw"] for r in doc["results"] if r["collective"] == name
                  for h in ("out_of_place", "in_place")]
        assert s["avg_busbw"] == pytest.approx(sum(halves) / len(halves))
        assert s["max_busbw"] == max(halves) and s["nwrong"] == 0
    assert doc["failed"] is False


# ------------------------------------------------------------------ plots

def _doc(collectives, sizes=(1024, 65536, 1 << 20), redops=("sum",)):
    results = []
    for c in collectives:
        for op in redops:
            for i, s in enumerate(sizes):
                half = {"time": 1.0, "alg_bw": 0.5 + i, "bus_bw": 1.0 + i, "nwrong": 0}
                results.append({"collective": c, "size": s, "count": s // 4, "type": "float",
                                "redop": op, "root": -1, "out_of_place": half,
                                "in_place": dict(half, bus_bw=2.0 + i)})
    return {"results": results, "library": {"family": "host", "version_code": 23004},
            "nranks": 2, "array": "numpy"}


def test_plot_has_one_panel_per_collective():
    pytest.importorskip("matplotlib")
    from nccl.bench.plot import figure

    names = ["all_reduce", "all_gather", "broadcast", "alltoall"]
    fig = figure(_doc(names))
    panels = [a for a in fig.axes if a.get_visible()]
    assert [a.get_title() for a in panels] == [f"{n}: bus bandwidth" for n in names]
    for ax in panels:
        styles = [line.get_linestyle() for line in ax.get_lines()]
        assert styles == ["-", "--"]  # out-of-place solid, in-place dashed
        fig.canvas.draw()
        labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
        assert {"1K", "64K", "1M"} <= set(labels), labels
        assert [t.get_text() for t in ax.get_legend().get_texts()] == ["out-of-place",
                                                                      "in-place"]
    one = figure(_doc(["all_reduce"], redops=("sum", "max")))
    assert [a.get_title() for a in one.axes] == ["algorithm bandwidth (algbw)",
                                                 "bus bandwidth (busbw)"]
    lines = one.axes[1].get_lines()
    assert len({(ln.get_color(), ln.get_linestyle()) for ln in lines}) == 4


@needs_host
def test_unchecked_results_are_not_called_ok():
    p = bench("-b", "8", "-e", "64", "-f", "8", "-n", "1", "-c", "0")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert "# Out of bounds values : 0 not checked (-c 0)" in lines
    assert lines[-1] == ("# Result: not checked (-c 0): the results were not compared with "
                         "the expected values")
    assert not [ln for ln in lines if ln.endswith(" OK") or "Result: OK" in ln]


def test_many_panels_are_drawn_in_one_pass(tmp_path):
    """What made plots of `all` slow: tight_layout (a second, measuring
    render), titles placed by measuring the axes, and minor ticks on every
    axis.  The figure is laid out by fixed margins instead."""
    pytest.importorskip("matplotlib")
    from nccl.bench.plot import figure

    fig = figure(_doc(["all_reduce", "all_gather", "broadcast", "alltoall", "reduce"]))
    assert fig.get_layout_engine() is None
    from matplotlib.ticker import NullLocator

    for ax in (a for a in fig.axes if a.get_visible()):
        assert isinstance(ax.xaxis.get_minor_locator(), NullLocator)
        assert isinstance(ax.yaxis.get_minor_locator(), NullLocator)
        assert not ax._autotitlepos  # placed, not measured at every draw
    fig.canvas.draw()
    boxes = [a.get_tightbbox() for a in fig.axes if a.get_visible()]
    width, height = fig.bbox.width, fig.bbox.height
    for box in boxes:  # nothing is cut off at the edges
        assert box.x0 >= 0 and box.y0 >= 0 and box.x1 <= width and box.y1 <= height, box
    for i, a in enumerate(boxes):  # panels (with their labels) do not overlap
        for b in boxes[i + 1:]:
            assert not a.overlaps(b), (a, b)


def test_plot_says_it_is_drawing(tmp_path):
    pytest.importorskip("matplotlib")
    saved = tmp_path / "r.json"
    saved.write_text(json.dumps(_doc(["all_reduce", "broadcast"])))
    png = tmp_path / "bw.png"
    p = bench_cmd("--plot-from", str(saved), str(png))
    assert p.returncode == 0, p.stderr
    lines = p.stderr.splitlines()
    assert lines[0] == f"# drawing 2 collectives into {png} ...", p.stderr
    assert lines[-1] == f"# plot written to {png}"


@needs_host
def test_plot_from_redraws_saved_results(two_collectives, tmp_path):
    pytest.importorskip("matplotlib")
    _, doc, _ = two_collectives
    saved = tmp_path / "saved.json"
    saved.write_text(json.dumps(doc))
    png = tmp_path / "again.png"
    p = bench_cmd("--plot-from", str(saved), str(png))
    assert p.returncode == 0, p.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stdout == ""


def test_plot_from_mistakes(tmp_path):
    good = tmp_path / "r.json"
    good.write_text(json.dumps(_doc(["all_reduce"])))
    bad = tmp_path / "bad.json"
    bad.write_text('{"results": 3}')
    for args, message in (
            ([str(tmp_path / "none.json"), "x.png"], "cannot be read"),
            ([str(bad), str(tmp_path / "x.png")], "is not a result file"),
            ([str(good)], "needs exactly one output file"),
            ([str(good), str(tmp_path / "no" / "x.png")], "the directory")):
        p = bench_cmd("--plot-from", *args)
        assert p.returncode == 2 and message in p.stderr, (args, p.stderr)
        assert "Traceback" not in p.stderr


def test_plot_from_without_matplotlib(tmp_path):
    fake = tmp_path / "fake"
    (fake / "matplotlib").mkdir(parents=True)
    (fake / "matplotlib" / "__init__.py").write_text("raise ImportError('no matplotlib')\n")
    good = tmp_path / "r.json"
    good.write_text(json.dumps(_doc(["all_reduce"])))
    p = bench_cmd("--plot-from", str(good), str(tmp_path / "x.png"),
                  env=clean_env(PYTHONPATH=str(fake)))
    assert p.returncode == 2 and "pip install matplotlib" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr and not (tmp_path / "x.png").exists()
