"""The pytest plugin nccl.testing (@pytest.mark.nccl), run as a user would:
pytest in a subprocess on test files written to tmp_path, results read from
its JUnit XML report."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import ROOT, clean_env, host_available
from conftest import alive as _alive

pytestmark = pytest.mark.skipif(not host_available(), reason="host backend not built")
RUN_TIMEOUT = 300


def pytest_run(tmp_path: Path, *args: str, timeout: float = RUN_TIMEOUT, env=None):
    """Run pytest in tmp_path; return (completed process, {test name: (outcome, text, time)})."""
    xml = tmp_path / "report.xml"
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p",
                        "nccl.testing", f"--junitxml={xml}", *args], cwd=tmp_path,
                       capture_output=True,
                       text=True, timeout=timeout, env=env or clean_env(),
                       stdin=subprocess.DEVNULL)
    results = {}
    if xml.exists():
        for case in ET.parse(xml).iter("testcase"):
            outcome, text = "passed", ""
            for child in case:
                if child.tag in ("failure", "error", "skipped"):
                    outcome = child.tag
                    text = (child.get("message") or "") + "\n" + (child.text or "")
            results[case.get("name")] = (outcome, text, float(case.get("time")))
    return p, results


def write(tmp_path: Path, name: str, text: str) -> None:
    (tmp_path / name).write_text(textwrap.dedent(text))


def _gone(pids, timeout: float = 10.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not any(_alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return not any(_alive(p) for p in pids)


OUTCOMES = """
    import os
    import numpy as np
    import pytest
    import nccl.core as nc

    IMPORTED_IN = os.getpid()   # module-level code runs in every rank


    @pytest.mark.nccl(nranks=4)
    def test_pass(comm, rank, nranks, shared_value, tmp_path):
        assert (comm.rank, comm.nranks) == (rank, nranks) == (rank, 4)
        assert IMPORTED_IN == os.getpid() and shared_value == 42
        (tmp_path / "mine").write_text(str(rank))   # tmp_path is per rank
        x = np.full(3, rank + 1, np.float32)
        comm.allreduce(x, x, nc.SUM)
        assert (x == 10).all()


    @pytest.mark.nccl(nranks=[1, 3])
    @pytest.mark.parametrize("count", [1, 5])
    def test_param(comm, nranks, count):
        x = np.ones(count, np.int32)
        comm.allreduce(x, x, nc.SUM)
        assert (x == nranks).all()


    @pytest.mark.nccl
    @pytest.mark.parametrize("nranks", [2, 3])
    def test_param_nranks(comm, nranks):
        assert comm.nranks == nranks


    @pytest.mark.nccl(nranks=3)
    def test_one_rank_fails(rank):
        print(f"output of rank {rank}")
        assert rank != 1, "rank one disagrees"


    @pytest.mark.nccl(nranks=2)
    def test_skip_everywhere(rank):
        pytest.skip("nothing to do here")


    @pytest.mark.nccl(nranks=2)
    def test_skip_somewhere(rank):
        if rank == 0:
            pytest.skip("only rank 0 skips")


    @pytest.mark.xfail(reason="known bug")
    @pytest.mark.nccl(nranks=2)
    def test_expected_failure(rank):
        assert False


    @pytest.mark.nccl(nranks=2)
    def test_rank_dies(rank):
        if rank == 1:
            print("about to die", flush=True)
            os._exit(7)


    def test_comm_needs_the_marker(comm):
        pass
"""

CONFTEST = """
    import pytest

    @pytest.fixture
    def shared_value():
        return 42
"""


def test_outcomes(tmp_path):
    write(tmp_path, "test_outcomes.py", OUTCOMES)
    write(tmp_path, "conftest.py", CONFTEST)
    p, res = pytest_run(tmp_path, "-q")
    out = p.stdout + p.stderr
    assert p.returncode == 1, out
    passed = ["test_pass", "test_param[1ranks-1]", "test_param[1ranks-5]",
              "test_param[3ranks-1]", "test_param[3ranks-5]", "test_param_nranks[2]",
              "test_param_nranks[3]"]
    for name in passed:
        assert res[name][0] == "passed", (name, res[name])
    outcome, text, _ = res["test_one_rank_fails"]
    assert outcome == "failure"
    assert "rank 1 failed" in text and "rank one disagrees" in text
    assert "rank 0 failed" not in text and "rank 2 failed" not in text
    assert "ranks 0,2 passed" in text
    assert "Captured output (rank 1) call" in out and "output of rank 1" in out
    assert res["test_skip_everywhere"][0] == "skipped"
    assert "nothing to do here" in res["test_skip_everywhere"][1]
    outcome, text, _ = res["test_skip_somewhere"]
    assert outcome == "failure" and "a skip must happen on every rank" in text
    assert res["test_expected_failure"][0] == "skipped"  # xfailed
    outcome, text, _ = res["test_rank_dies"]
    assert outcome == "failure" and "rank 1 exited with status 7" in text
    assert "about to die" in text
    outcome, text, _ = res["test_comm_needs_the_marker"]
    assert outcome == "error" and "@pytest.mark.nccl" in text
    assert re.search(r"3 failed, 7 passed, 1 skipped, 1 xfailed, 1 error", out), out


ROOT_CAUSE = """
    import os
    import numpy as np
    import pytest
    import nccl.core as nc


    @pytest.mark.nccl(nranks=3)
    def test_rank1_raises(comm, rank):
        # rank 1 raises; ranks 0 and 2 then fail in the all-reduce it never joins
        if rank == 1:
            raise ValueError("rank one broke")
        x = np.ones(4, np.float32)
        comm.allreduce(x, x, nc.SUM)


    @pytest.mark.nccl(nranks=2)
    def test_rank0_dies(comm, rank):
        if rank == 0:
            os._exit(3)
        x = np.ones(4, np.float32)
        comm.allreduce(x, x, nc.SUM)
"""


def test_the_report_names_the_root_cause(tmp_path):
    """The short summary names the rank that failed first and its error, not
    rank 0 that only saw the consequence."""
    write(tmp_path, "test_root.py", ROOT_CAUSE)
    p, res = pytest_run(tmp_path, "-q", "-rf", "--nccl-timeout", "60",
                        env=clean_env(COLUMNS="200"))  # the summary line is not cut
    out = p.stdout + p.stderr
    summary = [ln for ln in p.stdout.splitlines() if ln.startswith("FAILED ")]
    assert len(summary) == 2, out
    line = next(ln for ln in summary if "test_rank1_raises" in ln)
    assert "rank 1 failed first: ValueError: rank one broke" in line, line
    outcome, text, _ = res["test_rank1_raises"]
    assert outcome == "failure"
    # the report starts with the cause, then rank 1's traceback before the others'
    # (ranks 0 and 2 fail after it, or are stopped if still waiting)
    head = text.index("rank 1 failed first: ValueError: rank one broke (then rank")
    first = text.index("rank 1 failed (in call)")
    others = [text.index(f"rank {r} failed (in call)") for r in (0, 2)
              if f"rank {r} failed (in call)" in text]
    assert others and head < first < min(others), text
    line = next(ln for ln in summary if "test_rank0_dies" in ln)
    assert "rank 0 died" in line and "exited with status 3" in line, line


HANG = """
    import os, subprocess, sys, time
    import numpy as np
    import pytest
    import nccl.core as nc

    PIDS = os.environ["PID_DIR"]


    @pytest.mark.nccl(nranks=2)
    def test_warm(comm):
        pass


    @pytest.mark.nccl(nranks=2, timeout=TIMEOUT)
    def test_hang(comm, rank):
        kid = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        for pid in (os.getpid(), kid.pid):
            open(os.path.join(PIDS, str(pid)), "w").close()
        if rank == 1:
            time.sleep(300)            # never joins the collective
        x = np.zeros(4, np.float32)
        comm.allreduce(x, x, nc.SUM)


    @pytest.mark.nccl(nranks=2)
    def test_after(comm, rank):
        x = np.ones(1, np.float32)
        comm.allreduce(x, x, nc.SUM)
        assert x[0] == 2
"""


def _pids(path: Path) -> list[int]:
    return [int(p.name) for p in path.iterdir()]


def test_hang_fails_within_the_timeout_and_leaves_nothing(tmp_path):
    timeout = 3
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    write(tmp_path, "test_hang.py", HANG.replace("TIMEOUT", str(timeout)))
    p, res = pytest_run(tmp_path, "-q", env=clean_env(PID_DIR=str(pid_dir)))
    pids = _pids(pid_dir)
    try:
        assert len(pids) == 4  # two ranks, each with a child
        assert _gone(pids), [pid for pid in pids if _alive(pid)]
    finally:
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
    outcome, text, took = res["test_hang"]
    assert outcome == "failure", p.stdout
    # rank 1 sleeps, rank 0 waits for it in the all-reduce: both are named,
    # each with the line where it was
    assert "ranks 0,1 of 2 did not finish within the timeout of 3 s" in text
    lines = [int(n) for n in re.findall(r'test_hang.py", line (\d+) in test_hang', text)]
    source = HANG.splitlines()
    assert len(lines) >= 2, text
    assert "comm.allreduce" in source[lines[0] - 1] and "time.sleep" in source[lines[1] - 1]
    # the flight records name the rank that never entered the collective
    assert "diagnosis (flight records):" in text, text
    assert "rank 1 did not call allreduce #1" in text, text
    assert took < timeout + 10, took  # the timeout plus stopping the ranks, under load
    assert res["test_warm"][0] == res["test_after"][0] == "passed"  # a fresh pool after it


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_interrupted_or_killed_pytest_leaves_nothing(tmp_path, sig):
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    write(tmp_path, "test_hang.py", HANG.replace("TIMEOUT", "300"))
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p",
                             "nccl.testing", "-q", "test_hang.py::test_hang"], cwd=tmp_path,
                            env=clean_env(PID_DIR=str(pid_dir)), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
    pids: list[int] = []
    try:
        end = time.monotonic() + RUN_TIMEOUT
        while len(_pids(pid_dir)) < 4 and time.monotonic() < end and proc.poll() is None:
            time.sleep(0.05)
        pids = _pids(pid_dir)
        assert len(pids) == 4
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=60)
        if sig == signal.SIGINT:
            assert proc.returncode == 2, out  # interrupted
            assert "KeyboardInterrupt" in out
        assert _gone(pids), [pid for pid in pids if _alive(pid)]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


SELECTION = """
    import pytest

    @pytest.mark.nccl(nranks=2)
    def test_first(rank):
        assert rank < 0, "first"

    @pytest.mark.nccl(nranks=2)
    def test_second(rank):
        assert rank < 0, "second"

    @pytest.mark.nccl(nranks=2)
    def test_third(comm):
        assert comm.nranks == 2
"""


def test_exitfirst_and_keyword_selection(tmp_path):
    write(tmp_path, "test_sel.py", SELECTION)
    p, res = pytest_run(tmp_path, "-x", "-q")
    assert p.returncode == 1
    assert list(res) == ["test_first"] and res["test_first"][0] == "failure"
    assert "stopping after 1 failures" in p.stdout
    p, res = pytest_run(tmp_path, "-k", "second or third", "-q")
    assert sorted(res) == ["test_second", "test_third"]
    assert res["test_second"][0] == "failure" and res["test_third"][0] == "passed"


MASTER = """
    import os
    import numpy as np
    import pytest
    import nccl.core as nc


    @pytest.mark.nccl(nranks=3)
    def test_rendezvous_address(comm):
        assert os.environ["MASTER_ADDR"] == "127.0.0.1"
        port = np.full(1, int(os.environ["MASTER_PORT"]), np.int64)
        lo, hi = port.copy(), port.copy()
        comm.allreduce(lo, lo, nc.MIN)
        comm.allreduce(hi, hi, nc.MAX)
        assert 0 < lo[0] == hi[0] < 65536      # one address for all ranks


    @pytest.mark.nccl(nranks=2)
    def test_torch_env_rendezvous(rank, nranks):
        dist = pytest.importorskip("torch.distributed")
        import torch
        dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=nranks)
        try:
            t = torch.ones(2)
            dist.all_reduce(t)
            assert t.tolist() == [2.0, 2.0]
        finally:
            dist.destroy_process_group()
"""


def test_ranks_get_a_rendezvous_address_as_under_nccl_run(tmp_path):
    write(tmp_path, "test_master.py", MASTER)
    p, res = pytest_run(tmp_path, "-q")
    assert res["test_rendezvous_address"][0] == "passed", p.stdout + p.stderr
    assert res["test_torch_env_rendezvous"][0] in ("passed", "skipped"), p.stdout + p.stderr


def test_xdist(tmp_path):
    pytest.importorskip("xdist")
    write(tmp_path, "test_x.py", """
        import numpy as np
        import pytest
        import nccl.core as nc

        @pytest.mark.nccl(nranks=2)
        @pytest.mark.parametrize("i", range(6))
        def test_sum(comm, rank, nranks, i):
            x = np.array([rank + i], np.int64)
            comm.allreduce(x, x, nc.SUM)
            assert x[0] == sum(range(nranks)) + i * nranks

        def test_plain():
            pass
    """)
    p, res = pytest_run(tmp_path, "-n", "2", "-q")
    assert p.returncode == 0, p.stdout + p.stderr
    assert len(res) == 7 and all(r[0] == "passed" for r in res.values()), res


def test_under_coverage(tmp_path):
    pytest.importorskip("coverage")
    write(tmp_path, "test_cov.py", SELECTION.replace("rank < 0", "rank >= 0"))
    p = subprocess.run([sys.executable, "-m", "coverage", "run", "-m", "pytest", "-q",
                        "-p", "no:cacheprovider"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=RUN_TIMEOUT, env=clean_env(), stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "3 passed" in p.stdout


def test_the_documented_example(tmp_path):
    doc = (ROOT / "docs" / "testing.md").read_text()
    code = re.search(r"## A complete example.*?```python\n(.*?)```", doc, re.S).group(1)
    (tmp_path / "test_sharded_sum.py").write_text(code)
    p, res = pytest_run(tmp_path, "-q", "test_sharded_sum.py")
    assert p.returncode == 0, p.stdout + p.stderr
    assert len(res) == 6 and all(r[0] == "passed" for r in res.values()), res


def test_bad_settings_are_reported(tmp_path):
    write(tmp_path, "test_bad.py", """
        import pytest

        @pytest.mark.nccl(nranks=0)
        def test_zero(rank):
            pass

        @pytest.mark.nccl(nranks=2000)
        def test_too_many(rank):
            pass

        @pytest.mark.nccl(nranks=2, timeout=-1)
        def test_timeout(rank):
            pass
    """)
    p, res = pytest_run(tmp_path, "-q", "test_bad.py")
    assert p.returncode == 1 and sorted(r[0] for r in res.values()) == ["failure"] * 3, res
    assert "nranks must be a positive integer, got 0" in res["test_zero"][1]
    assert "more than the host backend supports (1024 ranks)" in res["test_too_many"][1]
    assert "timeout must be a positive number of seconds, got -1" in res["test_timeout"][1]
    p, _ = pytest_run(tmp_path, "-q", "--nccl-timeout", "0")
    assert p.returncode == 4 and "--nccl-timeout must be positive" in p.stderr


def test_plugin_is_registered_by_the_package():
    import importlib.metadata

    try:
        importlib.metadata.distribution("nccl4py")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("nccl4py is not installed (a source tree on PYTHONPATH)")
    p = subprocess.run([sys.executable, "-m", "pytest", "--markers"], capture_output=True,
                       text=True, timeout=RUN_TIMEOUT, env=clean_env(), cwd=ROOT / "docs")
    assert "@pytest.mark.nccl(nranks=2, timeout=None)" in p.stdout
