"""Tests of the launcher (python -m nccl.run) and nccl.run.environment().

The launcher is run as a real subprocess with small rank programs written to
tmp_path.  The unique id comes from the real library (host backend) when
nccl.bindings can make one, otherwise from the launcher's test-only hook
NCCL4PY_RUN_FAKE_ID=1 (also used when pytest itself runs with that variable).
environment() is tested in-process with patched variables and fake torch and
mpi4py modules.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import pytest

from conftest import alive as _alive

try:
    import nccl.run  # noqa: F401
except ImportError:  # not installed: use the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import nccl.run
from nccl._discovery import gpus_visible
from nccl._launch import launcher, rankenv, uniqueid
from nccl.run import RankEnvironment, environment

PKG_ROOT = str(Path(nccl.run.__file__).resolve().parents[1])
RUN_TIMEOUT = 30  # seconds; no launcher test should come close

LAUNCHER_PREFIXES = ("NCCL4PY_", "OMPI_", "PMI_", "PMIX_", "SLURM_", "TORCHELASTIC_")
LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                 "MASTER_PORT", "MPI_LOCALRANKID", "PALS_LOCAL_RANKID")


def _is_launcher_var(name: str) -> bool:
    return name.startswith(LAUNCHER_PREFIXES) or name in LAUNCHER_VARS


def _base_env() -> dict[str, str]:
    # Not the recording stub the test process loads (NCCL_LIBRARY): the ranks
    # choose their library with --backend (which names a variable it drops).
    env = {k: v for k, v in os.environ.items()
           if not _is_launcher_var(k) and k != "NCCL_LIBRARY"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PKG_ROOT, os.environ.get("PYTHONPATH")]))
    return env


@pytest.fixture(scope="session")
def real_id_works() -> bool:
    """Whether nccl.bindings can make a unique id with the host backend.

    NCCL4PY_RUN_FAKE_ID=1 in the environment of pytest skips the real library.
    """
    if os.environ.get(uniqueid.FAKE_ID_ENV) == "1":
        return False
    env = _base_env()
    env["NCCL4PY_BACKEND"] = "host"
    try:
        probe = subprocess.run(
            [sys.executable, "-c",
             "from nccl._launch import uniqueid; assert len(uniqueid.create_unique_id()) == 128"],
            env=env, capture_output=True, timeout=RUN_TIMEOUT, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return False
    return probe.returncode == 0


@pytest.fixture
def run_env(real_id_works) -> dict[str, str]:
    env = _base_env()
    if not real_id_works:
        env[uniqueid.FAKE_ID_ENV] = "1"
    return env


def _launch_cmd(*args) -> list[str]:
    return [sys.executable, "-m", "nccl.run", *map(str, args)]


def run_launcher(env, *args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(_launch_cmd(*args), env=env, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT, cwd=cwd, stdin=subprocess.DEVNULL)


def script(tmp_path: Path, body: str, name: str = "prog.py") -> Path:
    path = tmp_path / name
    path.write_text("import os, sys, time, json, signal\n"
                    "RANK = int(os.environ['NCCL4PY_RANK'])\n" + textwrap.dedent(body))
    return path


def _wait_for(predicate, timeout: float = 10.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def _pids(tmp_path: Path) -> list[int]:
    # pid.N appears complete (os.replace); pid.N.tmp files are ignored
    return [int(p.read_text()) for p in tmp_path.iterdir() if re.fullmatch(r"pid\.\d+", p.name)]


WRITE_PID = """
p = f"pid.{RANK}"
with open(p + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.replace(p + ".tmp", p)
"""

# --------------------------------------------------------------- exit codes


def test_all_ranks_succeed(tmp_path, run_env):
    prog = script(tmp_path, "os.write(1, f'ok {RANK}\\n'.encode())\n")  # one write: no mixing
    res = run_launcher(run_env, "-n", 3, "--backend", "host", prog)
    assert res.returncode == 0, res.stderr
    assert sorted(res.stdout.split("\n")[:-1]) == ["ok 0", "ok 1", "ok 2"]
    assert res.stderr == ""


def test_failing_rank_stops_the_others(tmp_path, run_env):
    prog = script(tmp_path, WRITE_PID + """
if RANK == 1:
    sys.exit(3)
time.sleep(60)
""")
    start = time.monotonic()
    res = run_launcher(run_env, "-n", 3, "--backend", "host", prog, cwd=tmp_path)
    elapsed = time.monotonic() - start
    assert res.returncode == 3, res.stderr
    assert elapsed < 10
    assert "nccl.run: rank 1 exited with status 3; ranks 0,2 were stopped" in res.stderr
    assert all(_wait_for(lambda: not _alive(pid), 5) for pid in _pids(tmp_path))


def test_rank_killed_by_signal(tmp_path, run_env):
    prog = script(tmp_path, """
if RANK == 0:
    os.kill(os.getpid(), signal.SIGKILL)
time.sleep(60)
""")
    res = run_launcher(run_env, "-n", 2, "--backend", "host", prog)
    assert res.returncode == 128 + signal.SIGKILL
    assert "rank 0 was killed by signal 9 (SIGKILL); rank 1 was stopped" in res.stderr


def test_timeout(tmp_path, run_env):
    prog = script(tmp_path, "time.sleep(0 if RANK == 0 else 60)\n")
    start = time.monotonic()
    res = run_launcher(run_env, "-n", 2, "--backend", "host", "--timeout", 0.5, prog)
    assert res.returncode == 124
    assert time.monotonic() - start < 10
    assert "timeout: rank 1 still running after 0.5 s (--timeout)" in res.stderr


def test_unique_id_failure_is_reported(tmp_path, run_env):
    env = dict(run_env)
    env.pop(uniqueid.FAKE_ID_ENV, None)
    env["NCCL_LIBRARY"] = str(tmp_path / "no-such-libnccl.so")
    prog = script(tmp_path, "print('never')\n")
    res = run_launcher(env, "-n", 2, "--backend", "nccl", prog)
    assert res.returncode == 1
    assert "nccl.run: cannot create the unique id" in res.stderr
    assert "never" not in res.stdout


@pytest.mark.parametrize("args, message", [
    (["prog.py"], "-n"),
    (["-n", "2"], "no program given"),
    (["-n", "0", "prog.py"], "must be at least 1"),
    (["-n", "2", "missing.py"], "can't open file"),
    (["-n", "2", "--backend", "cuda", "prog.py"], "invalid choice"),
    (["-n", "2", "-m"], "expected one argument"),
])
def test_usage_errors(tmp_path, run_env, args, message):
    script(tmp_path, "")
    res = run_launcher(run_env, *args, cwd=tmp_path)
    assert res.returncode == 2
    assert message in res.stderr


def test_main_returns_status_for_help(capsys):
    assert nccl.run.main(["--help"]) == 0
    assert "python -m nccl.run -n N" in capsys.readouterr().out


# ------------------------------------------------------------------ output


def test_tag_output(tmp_path, run_env):
    prog = script(tmp_path, """
for i in range(200):
    print(f"{RANK}" + "x" * 3000)
    print(f"e{RANK}", file=sys.stderr)
sys.stdout.write(f"tail{RANK}")  # no newline at the end
""")
    res = run_launcher(run_env, "-n", 3, "-t", "--backend", "host", prog)
    assert res.returncode == 0, res.stderr
    out = res.stdout.split("\n")
    assert out[-1] == ""
    out = out[:-1]
    assert len(out) == 3 * 201
    for line in out:
        m = re.fullmatch(r"\[(\d)\]: (?:(\d)x{3000}|tail(\d))", line)
        assert m, line[:80]
        assert m.group(1) == (m.group(2) or m.group(3))
    err = res.stderr.split("\n")[:-1]
    assert sorted(set(err)) == ["[0]: e0", "[1]: e1", "[2]: e2"]
    assert len(err) == 600


def test_untagged_output_is_passed_through_whole_lines(tmp_path, run_env):
    prog = script(tmp_path, """
for i in range(200):
    print(f"{RANK}" + "x" * 3000)  # unbuffered print: text and newline are two writes
""")
    env = dict(run_env, PYTHONUNBUFFERED="1")
    res = run_launcher(env, "-n", 3, "--backend", "host", prog)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) == 600
    assert all(re.fullmatch(r"\dx{3000}", line) for line in lines)


# ------------------------------------------------------------ environment


def test_environment_contract(tmp_path, run_env):
    prog = script(tmp_path, """
import nccl.run
names = ["NCCL4PY_RANK", "NCCL4PY_NRANKS", "NCCL4PY_LOCAL_RANK", "NCCL4PY_LOCAL_SIZE",
         "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NCCL4PY_UNIQUE_ID",
         "NCCL4PY_BACKEND"]
env = nccl.run.environment()
seen = {n: os.environ.get(n) for n in names}
seen["env"] = [env.rank, env.nranks, env.local_rank, env.unique_id.hex(), env.launcher]
seen["argv"] = sys.argv[1:]
with open(f"rank{RANK}.json", "w") as f:
    json.dump(seen, f)
""")
    res = run_launcher(run_env, "-n", 3, "--backend", "host", prog, "-n", "--x", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    ids = set()
    for rank in range(3):
        seen = json.loads((tmp_path / f"rank{rank}.json").read_text())
        for name in ("NCCL4PY_RANK", "RANK", "LOCAL_RANK", "NCCL4PY_LOCAL_RANK"):
            assert seen[name] == str(rank)
        for name in ("NCCL4PY_NRANKS", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NCCL4PY_LOCAL_SIZE"):
            assert seen[name] == "3"
        assert seen["NCCL4PY_BACKEND"] == "host"
        assert re.fullmatch(r"[0-9a-f]{256}", seen["NCCL4PY_UNIQUE_ID"])
        assert seen["env"] == [rank, 3, rank, seen["NCCL4PY_UNIQUE_ID"], "nccl.run"]
        assert seen["argv"] == ["-n", "--x"]
        ids.add(seen["NCCL4PY_UNIQUE_ID"])
    assert len(ids) == 1


def test_real_unique_id(tmp_path, real_id_works):
    if not real_id_works:
        pytest.skip("nccl.bindings cannot make a unique id with the host backend yet")
    env = _base_env()
    prog = script(tmp_path, "uid = bytes.fromhex(os.environ['NCCL4PY_UNIQUE_ID'])\n"
                            "os.write(1, b'%d\\n' % len(uid))\n")
    res = run_launcher(env, "-n", 2, "--backend", "host", prog)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["128", "128"]


def test_module_mode_and_double_dash(tmp_path, run_env):
    pkg = tmp_path / "mods" / "mypkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text(
        "import os, sys\nos.write(1, f\"{os.environ['RANK']} {sys.argv[1:]}\\n\".encode())\n")
    env = dict(run_env)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "mods"), env["PYTHONPATH"]])
    res = run_launcher(env, "-n", 2, "--backend", "host", "-m", "mypkg.mod", "a", "-t", "-n")
    assert res.returncode == 0, res.stderr
    assert sorted(res.stdout.splitlines()) == [
        "0 ['a', '-t', '-n']", "1 ['a', '-t', '-n']"]
    prog = script(tmp_path, "print(sys.argv[1:])\n", name="-odd.py")
    res = run_launcher(run_env, "-n", 1, "--backend", "host", "--", prog.name, "-n", "5",
                       cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout == "['-n', '5']\n"


# ---------------------------------------------------------------- signals


def _start_sleepers(tmp_path, env, nranks, extra=""):
    prog = script(tmp_path, extra + WRITE_PID + "time.sleep(60)\n")
    out = open(tmp_path / "launcher.err", "w+")
    proc = subprocess.Popen(_launch_cmd("-n", nranks, "--backend", "host", prog), env=env,
                            cwd=tmp_path, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=out)
    try:
        assert _wait_for(lambda: len(_pids(tmp_path)) == nranks, RUN_TIMEOUT)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return proc, out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_is_forwarded(tmp_path, run_env, sig):
    proc, err = _start_sleepers(tmp_path, run_env, 2)
    try:
        proc.send_signal(sig)
        assert proc.wait(timeout=RUN_TIMEOUT) == 128 + sig
    finally:
        if proc.poll() is None:
            proc.kill()
    err.seek(0)
    assert f"received {signal.Signals(sig).name}; forwarding it" in err.read()
    assert all(_wait_for(lambda: not _alive(pid), 5) for pid in _pids(tmp_path))


def test_second_signal_kills(tmp_path, run_env):
    proc, err = _start_sleepers(tmp_path, run_env, 2,
                                "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n")
    try:
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        assert proc.poll() is None  # the ranks ignore the first one
        proc.send_signal(signal.SIGTERM)
        # the status names the signal the launcher received, not how the ranks ended
        assert proc.wait(timeout=RUN_TIMEOUT) == 128 + signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
    err.seek(0)
    assert "received SIGTERM again; killing the ranks" in err.read()
    assert all(_wait_for(lambda: not _alive(pid), 5) for pid in _pids(tmp_path))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux")
def test_ranks_die_with_a_killed_launcher(tmp_path, run_env):
    proc, _ = _start_sleepers(tmp_path, run_env, 2)
    proc.kill()
    proc.wait(timeout=RUN_TIMEOUT)
    # Orphans are reaped by init (or a subreaper), so they disappear.
    assert all(_wait_for(lambda: not _alive(pid), 5) for pid in _pids(tmp_path))


# ---------------------------------------------------------- launcher units


@pytest.mark.parametrize("argv, expected", [
    (["-n", "2", "p.py", "-n", "3"], (["-n", "2"], None, ["p.py", "-n", "3"])),
    (["-n2", "-t", "p.py"], (["-n2", "-t"], None, ["p.py"])),
    (["--nranks=2", "--timeout", "5", "p.py"], (["--nranks=2", "--timeout", "5"], None, ["p.py"])),
    (["-n", "2", "-m", "a.b", "-t"], (["-n", "2"], "a.b", ["-t"])),
    (["-n", "2", "-ma.b", "x"], (["-n", "2"], "a.b", ["x"])),
    (["-n", "2", "--", "-p.py"], (["-n", "2"], None, ["-p.py"])),
    (["-n", "2"], (["-n", "2"], None, [])),
])
def test_split_command(argv, expected):
    assert launcher.split_command(argv) == expected


def test_split_command_skips_the_value_of_every_option_the_parser_has():
    """Each option of the parser that takes a value (and only those) is
    followed by its value, never taken for the program."""
    parser = launcher.build_parser()
    for action in parser._actions:
        for opt in action.option_strings:
            if opt == "-m":
                continue
            argv = [opt, "4", "prog.py"] if action.nargs != 0 else [opt, "prog.py"]
            assert launcher.split_command(argv) == (argv[:-1], None, ["prog.py"]), opt
    # an option added to the parser is known at once
    parser.add_argument("--new-value", metavar="V")
    assert "--new-value" in launcher.value_options(parser)
    assert launcher.value_options(launcher.build_parser()) == launcher._VALUE_OPTIONS


def test_select_backend(tmp_path):
    nodev = tmp_path / "empty"
    nodev.mkdir()
    env = {"NCCL_LIBRARY": "/x/libnccl.so.2"}
    assert launcher.select_backend("host", env, str(nodev)) == "host"
    assert env == {"NCCL4PY_BACKEND": "host"}
    env = {"NCCL4PY_BACKEND": "host", "NCCL_LIBRARY": "/x"}
    assert launcher.select_backend("rccl", env) == "rccl"
    assert env == {"NCCL4PY_PLATFORM": "rocm", "NCCL_LIBRARY": "/x"}
    env = {}
    launcher.select_backend("nccl", env)
    assert env == {"NCCL4PY_PLATFORM": "cuda"}
    # auto: explicit settings win (as in the loader), then GPUs, then the host backend
    for preset in ({"NCCL_LIBRARY": "/x"}, {"NCCL4PY_BACKEND": "other"},
                   {"NCCL4PY_PLATFORM": "cuda"}):
        env = dict(preset)
        notes: list[str] = []
        launcher.select_backend("auto", env, str(nodev), notes)
        assert env == preset and notes == []
    # an explicit --backend names the variables of the caller it overrides
    notes = []
    env = {"NCCL_LIBRARY": "/x", "NCCL4PY_PLATFORM": "cuda"}
    launcher.select_backend("host", env, str(nodev), notes)
    assert env == {"NCCL4PY_BACKEND": "host", "NCCL4PY_PLATFORM": "cuda"}
    assert len(notes) == 2 and "NCCL_LIBRARY=/x is dropped" in notes[0]
    assert "NCCL4PY_PLATFORM=cuda does not apply" in notes[1]
    notes = []
    env = {"NCCL4PY_BACKEND": "host", "NCCL4PY_PLATFORM": "cuda"}
    launcher.select_backend("rccl", env, None, notes)
    assert env == {"NCCL4PY_PLATFORM": "rocm"}
    assert notes == ["--backend rccl: NCCL4PY_BACKEND=host is dropped",
                     "--backend rccl: NCCL4PY_PLATFORM=cuda becomes NCCL4PY_PLATFORM=rocm"]
    notes = []
    launcher.select_backend("nccl", {"NCCL4PY_PLATFORM": "cuda"}, None, notes)
    assert notes == []
    env = {}
    assert launcher.select_backend("auto", env, str(nodev)) == "host"
    assert env == {"NCCL4PY_BACKEND": "host"}
    gpu = tmp_path / "gpu"
    gpu.mkdir()
    (gpu / "nvidia0").touch()
    env = {}
    assert launcher.select_backend("auto", env, str(gpu)) == "gpu"
    assert env == {}
    with pytest.raises(ValueError):
        launcher.select_backend("cuda", {})


def test_gpus_visible(tmp_path):
    nv = tmp_path / "nv"
    nv.mkdir()
    (nv / "nvidiactl").touch()
    assert not gpus_visible({}, str(nv))  # a control node is not a GPU
    (nv / "nvidia3").touch()
    assert gpus_visible({}, str(nv))
    assert gpus_visible({"CUDA_VISIBLE_DEVICES": "0,1"}, str(nv))
    assert gpus_visible({"HIP_VISIBLE_DEVICES": ""}, str(nv))
    for hidden in ("", "-1", " -1,0"):
        assert not gpus_visible({"CUDA_VISIBLE_DEVICES": hidden}, str(nv))
    amd = tmp_path / "amd"
    amd.mkdir()
    (amd / "kfd").touch()
    assert gpus_visible({}, str(amd))
    for name in ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        assert not gpus_visible({name: "-1"}, str(amd))


def test_rank_environment_and_hex():
    uid = bytes(range(128))
    env = launcher.rank_environment({"PATH": "/bin"}, 1, 4, uniqueid.encode(uid))
    assert env["PATH"] == "/bin"
    assert (env["RANK"], env["WORLD_SIZE"], env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"]) == \
        ("1", "4", "1", "4")
    assert uniqueid.decode(env["NCCL4PY_UNIQUE_ID"]) == uid
    assert "MASTER_ADDR" not in env
    addr, port = launcher.master_address()
    assert addr == "127.0.0.1" and 0 < port < 65536
    env = launcher.rank_environment({"MASTER_PORT": "1"}, 0, 2, None, (addr, port))
    assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == (addr, str(port))
    with pytest.raises(ValueError):
        uniqueid.encode(b"short")


def test_fake_id_hook(monkeypatch):
    monkeypatch.setenv(uniqueid.FAKE_ID_ENV, "1")
    a, b = uniqueid.launcher_unique_id(), uniqueid.launcher_unique_id()
    assert len(a) == len(b) == 128 and a != b
    for bad in ("yes", "0", "true", " 1"):
        monkeypatch.setenv(uniqueid.FAKE_ID_ENV, bad)
        with pytest.raises(ValueError, match=f"NCCL4PY_RUN_FAKE_ID={bad!r}"):
            uniqueid.launcher_unique_id()
    monkeypatch.setenv(uniqueid.FAKE_ID_ENV, "")
    assert not uniqueid.fake_id_requested()


def test_bad_fake_id_value_starts_nothing(tmp_path, run_env):
    prog = script(tmp_path, "open(f'started.{RANK}', 'w').close()\n")
    run_env[uniqueid.FAKE_ID_ENV] = "yes"
    p = run_launcher(run_env, "-n", 2, prog, cwd=tmp_path)
    assert p.returncode == 2 and "NCCL4PY_RUN_FAKE_ID='yes'" in p.stderr, p.stderr
    assert not list(tmp_path.glob("started.*"))


def test_create_unique_id_checks_the_binding(monkeypatch):
    fake = types.ModuleType("nccl.bindings")
    monkeypatch.setitem(sys.modules, "nccl.bindings", fake)
    monkeypatch.setattr(nccl, "bindings", fake, raising=False)
    with pytest.raises(ImportError, match="nccl.bindings is not available"):
        uniqueid.create_unique_id()
    fake.get_unique_id = lambda: 128  # an int must not turn into 128 zero bytes
    with pytest.raises(TypeError):
        uniqueid.create_unique_id()
    fake.get_unique_id = lambda: b"x" * 64
    with pytest.raises(ValueError, match="64 bytes"):
        uniqueid.create_unique_id()

    class UniqueId:
        def __bytes__(self):
            return b"\x07" * 128

    fake.get_unique_id = UniqueId
    assert uniqueid.create_unique_id() == b"\x07" * 128


# ------------------------------------------------------------ environment()


@pytest.fixture
def clean_env(monkeypatch):
    for name in list(os.environ):
        if _is_launcher_var(name):
            monkeypatch.delenv(name)
    return monkeypatch


@pytest.fixture
def fixed_id(monkeypatch):
    uid = bytes(range(128))
    monkeypatch.setattr(uniqueid, "create_unique_id", lambda: uid)
    return uid


def _setenv(mp, **values):
    for k, v in values.items():
        mp.setenv(k, str(v))


def test_environment_none_is_one_rank(clean_env, fixed_id, capsys, monkeypatch):
    """Without a launcher (python prog.py) the process is rank 0 of 1, as under
    mpi4py, with a one-line note the first time only."""
    monkeypatch.setattr(rankenv, "_noted", False)
    assert rankenv.detect() is None
    assert capsys.readouterr().err == ""
    assert environment() == RankEnvironment(0, 1, 0, fixed_id, "none")
    note = capsys.readouterr().err
    assert note.count("\n") == 1 and "rank 0 of 1" in note and "python -m nccl.run" in note
    assert environment(exchange_id=False) == RankEnvironment(0, 1, 0, None, "none")
    assert capsys.readouterr().err == ""


def test_plain_python_from_env_program_runs_as_one_rank(tmp_path):
    """examples/core_allreduce.py (Communicator.from_env()) started with plain python."""
    env = _base_env()
    env["NCCL4PY_BACKEND"] = "host"
    example = Path(PKG_ROOT) / "examples" / "core_allreduce.py"
    if not example.exists():
        pytest.skip("examples/ is not next to the package")
    p = subprocess.run([sys.executable, str(example)], env=env, capture_output=True, text=True,
                       timeout=RUN_TIMEOUT, cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    assert "rank=0/1" in p.stdout and "sum 1, max 1" in p.stdout, p.stdout
    assert p.stderr.count("\n") == 1 and "rank 0 of 1" in p.stderr, p.stderr


def test_environment_nccl_run(clean_env):
    uid = os.urandom(128)
    _setenv(clean_env, NCCL4PY_RANK=2, NCCL4PY_NRANKS=4, NCCL4PY_LOCAL_RANK=1,
            NCCL4PY_UNIQUE_ID=uid.hex().upper(), RANK=9, WORLD_SIZE=10, OMPI_COMM_WORLD_RANK=5)
    env = environment()
    assert env == RankEnvironment(2, 4, 1, uid, "nccl.run")
    assert environment(exchange_id=False) == RankEnvironment(2, 4, 1, None, "nccl.run")
    assert "unique_id=<128 bytes>" in repr(env)
    with pytest.raises(AttributeError):
        env.rank = 3  # frozen
    clean_env.delenv("NCCL4PY_LOCAL_RANK")
    assert environment().local_rank == 2


@pytest.mark.parametrize("values, message", [
    ({"NCCL4PY_UNIQUE_ID": "ab" * 127}, "256 hex digits"),
    ({"NCCL4PY_UNIQUE_ID": "zz" * 128}, "not a hex string"),
    ({"NCCL4PY_UNIQUE_ID": None}, "NCCL4PY_UNIQUE_ID is not set"),
    ({"NCCL4PY_NRANKS": None}, "NCCL4PY_NRANKS is not set"),
    ({"NCCL4PY_RANK": "two"}, "is not an integer"),
    ({"NCCL4PY_RANK": "0x1"}, "is not an integer"),
    ({"NCCL4PY_RANK": "1_0"}, "is not an integer"),
    ({"NCCL4PY_RANK": "+1"}, "is not an integer"),
    ({"NCCL4PY_RANK": 4}, "outside 0..3"),
    ({"NCCL4PY_NRANKS": 0}, "at least 1"),
    ({"NCCL4PY_LOCAL_SIZE": "abc"}, "NCCL4PY_LOCAL_SIZE='abc' is not an integer"),
    ({"NCCL4PY_LOCAL_SIZE": 5}, "NCCL4PY_LOCAL_SIZE=5 is outside 1..4"),
    ({"NCCL4PY_LOCAL_SIZE": 0}, "NCCL4PY_LOCAL_SIZE=0 is outside 1..4"),
    ({"NCCL4PY_LOCAL_RANK": 2, "NCCL4PY_LOCAL_SIZE": 2},
     "NCCL4PY_LOCAL_RANK=2 is not below NCCL4PY_LOCAL_SIZE=2"),
    ({"NCCL4PY_LOCAL_RANK": 4}, "NCCL4PY_LOCAL_RANK=4 is not below NCCL4PY_LOCAL_SIZE=4"),
])
def test_environment_nccl_run_errors(clean_env, values, message):
    _setenv(clean_env, NCCL4PY_RANK=1, NCCL4PY_NRANKS=4, NCCL4PY_UNIQUE_ID="00" * 128)
    for k, v in values.items():
        if v is None:
            clean_env.delenv(k)
        else:
            clean_env.setenv(k, str(v))
    with pytest.raises(ValueError, match=message):
        environment()


def test_environment_torchrun_parsing(clean_env):
    _setenv(clean_env, RANK=3, WORLD_SIZE=8, LOCAL_RANK=1, OMPI_COMM_WORLD_RANK=0)
    assert environment(exchange_id=False) == RankEnvironment(3, 8, 1, None, "torchrun")
    with pytest.raises(RuntimeError, match="MASTER_ADDR/MASTER_PORT"):
        environment()
    _setenv(clean_env, MASTER_ADDR="127.0.0.1", MASTER_PORT=29500)
    clean_env.setitem(sys.modules, "torch", None)
    clean_env.setitem(sys.modules, "torch.distributed", None)
    with pytest.raises(RuntimeError, match="pip install torch"):
        environment()


@pytest.mark.parametrize("values, message", [
    ({"MASTER_PORT": 99999}, "MASTER_PORT=99999 is outside 1..65535"),
    ({"MASTER_PORT": 65536}, "MASTER_PORT=65536 is outside 1..65535"),
    ({"MASTER_PORT": -1}, "MASTER_PORT=-1 is outside 1..65535"),
    ({"MASTER_PORT": 0}, "MASTER_PORT=0 is outside 1..65535"),
    ({"MASTER_PORT": "abc"}, "MASTER_PORT='abc' is not an integer"),
    ({"MASTER_ADDR": "10.0.0.1 x"}, "MASTER_ADDR='10.0.0.1 x' is not a host name"),
    ({"MASTER_ADDR": "host\x01"}, "MASTER_ADDR=.* is not a host name"),
    ({"RANK": -1}, "rank -1 is outside 0..0"),
    ({"WORLD_SIZE": 0}, "at least 1"),
    ({"WORLD_SIZE": 2**31, "RANK": 0}, "WORLD_SIZE=2147483648 is above 2147483647"),
    ({"LOCAL_RANK": -1}, "local rank must not be negative"),
    ({"LOCAL_RANK": 1}, "LOCAL_RANK=1 is not below the number of ranks, 1"),
    ({"TORCHELASTIC_USE_AGENT_STORE": "True", "TORCHELASTIC_RESTART_COUNT": "x"},
     "TORCHELASTIC_RESTART_COUNT='x' is not an integer"),
    ({"TORCHELASTIC_USE_AGENT_STORE": "True", "TORCHELASTIC_RESTART_COUNT": -1},
     "TORCHELASTIC_RESTART_COUNT=-1 is negative"),
])
def test_environment_torchrun_values_are_checked_before_torch(clean_env, values, message):
    """Every torchrun variable environment() reads is checked against its
    documented range before torch is imported: a ValueError naming it (torch is
    made unimportable here, so the check cannot lean on torch's own errors)."""
    _setenv(clean_env, RANK=0, WORLD_SIZE=1, MASTER_ADDR="127.0.0.1", MASTER_PORT=29500)
    _setenv(clean_env, **values)
    clean_env.setitem(sys.modules, "torch", None)
    clean_env.setitem(sys.modules, "torch.distributed", None)
    with pytest.raises(ValueError, match=message):
        environment()


@pytest.mark.parametrize("values, message", [
    ({"NCCL4PY_NRANKS": 2**31, "NCCL4PY_LOCAL_SIZE": 1},
     "NCCL4PY_NRANKS=2147483648 is above 2147483647"),
    ({"SLURM_PROCID": 0, "SLURM_NTASKS": 2, "SLURM_LOCALID": 2},
     "SLURM_LOCALID=2 is not below the number of ranks, 2"),
    ({"OMPI_COMM_WORLD_RANK": 0, "OMPI_COMM_WORLD_SIZE": 10**20},
     "OMPI_COMM_WORLD_SIZE=100000000000000000000 is above 2147483647"),
])
def test_environment_rank_numbers_fit_the_library(clean_env, values, message):
    """The number of ranks is a C int in the library, and a local rank is an
    index among the job's ranks: values beyond either are a ValueError naming
    the variable."""
    if "NCCL4PY_NRANKS" in values:
        _setenv(clean_env, NCCL4PY_RANK=0, NCCL4PY_UNIQUE_ID="00" * 128)
    _setenv(clean_env, **values)
    with pytest.raises(ValueError, match=message):
        environment(exchange_id=False)


class FakeStore:
    """Just enough of torch.distributed.TCPStore / PrefixStore."""

    data: dict = {}
    created: list = []

    def __init__(self, *args, **kwargs):
        FakeStore.created.append((type(self).__name__, args, kwargs))
        self.prefix = ""

    def set(self, key, value):
        FakeStore.data[self.prefix + key] = value if isinstance(value, bytes) else value.encode()

    def get(self, key):
        return FakeStore.data[self.prefix + key]

    def wait(self, keys, timeout=None):
        missing = [k for k in keys if self.prefix + k not in FakeStore.data]
        if missing:
            raise RuntimeError(f"Socket Timeout waiting for {missing}")


class FakePrefixStore(FakeStore):
    def __init__(self, prefix, store):
        super().__init__(prefix, store)
        self.prefix = prefix + "/"


@pytest.fixture
def fake_torch(clean_env):
    FakeStore.data = {}
    FakeStore.created = []
    torch = types.ModuleType("torch")
    dist = types.ModuleType("torch.distributed")
    dist.TCPStore, dist.PrefixStore = FakeStore, FakePrefixStore
    torch.distributed = dist
    clean_env.setitem(sys.modules, "torch", torch)
    clean_env.setitem(sys.modules, "torch.distributed", dist)
    _setenv(clean_env, MASTER_ADDR="10.0.0.1", MASTER_PORT=29400, WORLD_SIZE=2, LOCAL_RANK=0)
    return clean_env


def test_environment_torchrun_exchange(fake_torch, fixed_id):
    fake_torch.setenv("RANK", "1")
    # rank 0 publishes under the next key; pretend it already did
    key = f"nccl4py/unique_id/{next(rankenv._exchange_counter) + 1}"
    FakeStore.data[key] = b"\0" + b"\x05" * 128
    env = environment()
    assert env == RankEnvironment(1, 2, 0, b"\x05" * 128, "torchrun")
    assert FakeStore.data[key + "/read/1"] == b"1"
    name, args, kwargs = FakeStore.created[-1]
    assert args == ("10.0.0.1", 29400) and kwargs["is_master"] is False
    assert kwargs["multi_tenant"] is True

    # rank 0: creates the id, publishes it and waits for the other rank
    fake_torch.setenv("RANK", "0")
    key = f"nccl4py/unique_id/{next(rankenv._exchange_counter) + 1}"
    FakeStore.data[key + "/read/1"] = b"1"
    assert environment().unique_id == fixed_id
    assert FakeStore.data[key] == b"\0" + fixed_id
    assert FakeStore.created[-1][2]["is_master"] is True

    # a rank that never reads the id turns into a clear error on rank 0
    with pytest.raises(RuntimeError, match="exchanging the unique id through the TCPStore"):
        environment()


def test_environment_torchrun_agent_store(fake_torch, fixed_id):
    _setenv(fake_torch, RANK=0, WORLD_SIZE=1, TORCHELASTIC_USE_AGENT_STORE="True",
            TORCHELASTIC_RESTART_COUNT=2)
    assert environment().unique_id == fixed_id
    assert [c[0] for c in FakeStore.created] == ["FakeStore", "FakePrefixStore"]
    assert FakeStore.created[0][2]["is_master"] is False
    assert any(k.startswith("/worker/attempt_2/nccl4py/unique_id/") for k in FakeStore.data)


def test_environment_torchrun_rank0_failure(fake_torch, monkeypatch):
    def broken():
        raise ImportError("no library")

    monkeypatch.setattr(uniqueid, "create_unique_id", broken)
    _setenv(fake_torch, RANK=0, WORLD_SIZE=1)
    with pytest.raises(ImportError, match="no library"):
        environment()
    # the other ranks learn why instead of waiting for the timeout
    published = [v for k, v in FakeStore.data.items() if k.startswith("nccl4py/unique_id/")]
    fake_torch.setenv("RANK", "1")
    fake_torch.setenv("WORLD_SIZE", "2")
    key = f"nccl4py/unique_id/{next(rankenv._exchange_counter) + 1}"
    FakeStore.data[key] = published[-1]
    with pytest.raises(RuntimeError,
                       match="rank 0 could not create the unique id: ImportError: no library"):
        environment()


@pytest.mark.parametrize("values, expected", [
    ({"OMPI_COMM_WORLD_RANK": 1, "OMPI_COMM_WORLD_SIZE": 4, "OMPI_COMM_WORLD_LOCAL_RANK": 0,
      "SLURM_PROCID": 3}, (1, 4, 0)),
    ({"PMI_RANK": 2, "PMI_SIZE": 3, "MPI_LOCALRANKID": 1}, (2, 3, 1)),
    ({"PMI_RANK": 2, "PMI_SIZE": 3}, (2, 3, 2)),
    ({"PMIX_RANK": 5, "SLURM_NTASKS": 8, "SLURM_LOCALID": 1, "SLURM_PROCID": 5}, (5, 8, 1)),
])
def test_environment_mpi_parsing(clean_env, values, expected):
    _setenv(clean_env, **values)
    assert environment(exchange_id=False) == RankEnvironment(*expected, None, "mpi")


def test_environment_mpi_errors(clean_env):
    _setenv(clean_env, PMIX_RANK=0)
    with pytest.raises(ValueError, match="how many ranks"):
        environment(exchange_id=False)
    clean_env.setitem(sys.modules, "mpi4py", None)
    with pytest.raises(RuntimeError, match="pip install mpi4py"):
        environment()
    _setenv(clean_env, OMPI_COMM_WORLD_RANK=0, OMPI_COMM_WORLD_SIZE="x")
    with pytest.raises(ValueError, match="OMPI_COMM_WORLD_SIZE='x' is not an integer"):
        environment(exchange_id=False)


class FakeComm:
    def __init__(self, rank, size, root_value=None, local=0):
        self.rank, self.size, self.root_value, self.local = rank, size, root_value, local
        self.freed = False

    def Get_rank(self):
        return self.rank

    def Get_size(self):
        return self.size

    def bcast(self, obj, root=0):
        assert root == 0
        return obj if self.rank == 0 else self.root_value

    def Split_type(self, kind):
        assert kind == "shared"
        return FakeComm(self.local, self.size)

    def Free(self):
        self.freed = True


def _fake_mpi(mp, comm):
    mpi = types.SimpleNamespace(COMM_WORLD=comm, COMM_TYPE_SHARED="shared")
    mp.setitem(sys.modules, "mpi4py", types.SimpleNamespace(MPI=mpi))


def test_environment_mpi_exchange(clean_env, fixed_id):
    _setenv(clean_env, OMPI_COMM_WORLD_RANK=0, OMPI_COMM_WORLD_SIZE=2)
    _fake_mpi(clean_env, FakeComm(0, 2, local=0))
    assert environment() == RankEnvironment(0, 2, 0, fixed_id, "mpi")
    _setenv(clean_env, OMPI_COMM_WORLD_RANK=1, OMPI_COMM_WORLD_LOCAL_RANK=1)
    _fake_mpi(clean_env, FakeComm(1, 2, root_value=b"\x09" * 128))
    assert environment() == RankEnvironment(1, 2, 1, b"\x09" * 128, "mpi")
    # rank 0 failed: the others get its message
    _fake_mpi(clean_env, FakeComm(1, 2, root_value="ImportError: no library"))
    with pytest.raises(RuntimeError, match="rank 0 could not create the unique id"):
        environment()
    # an MPI that disagrees with the environment (e.g. a singleton MPI_Init)
    _fake_mpi(clean_env, FakeComm(0, 1))
    with pytest.raises(RuntimeError, match="MPI says this is rank 0 of 1"):
        environment()


def test_environment_pmix_asks_mpi(clean_env, fixed_id):
    _setenv(clean_env, PMIX_RANK=0)
    _fake_mpi(clean_env, FakeComm(0, 3, local=0))
    assert environment() == RankEnvironment(0, 3, 0, fixed_id, "mpi")


def test_environment_slurm(clean_env, fixed_id):
    _setenv(clean_env, SLURM_PROCID=3, SLURM_NTASKS=4, SLURM_LOCALID=1)
    assert environment(exchange_id=False) == RankEnvironment(3, 4, 1, None, "slurm")
    _fake_mpi(clean_env, FakeComm(3, 4, root_value=b"\x01" * 128))
    assert environment() == RankEnvironment(3, 4, 1, b"\x01" * 128, "slurm")
    clean_env.setitem(sys.modules, "mpi4py", None)
    with pytest.raises(RuntimeError, match="started by srun.*pip install mpi4py"):
        environment()
    clean_env.delenv("SLURM_NTASKS")
    with pytest.raises(ValueError, match="SLURM_NTASKS is not set"):
        environment(exchange_id=False)


# ------------------------------------------------------------------ limits


@pytest.mark.parametrize("args, message", [
    (["-n", "1025", "--backend", "host"], "more than the host backend supports (1024 ranks)"),
    (["-n", "9", "--backend", "host"], "pass --oversubscribe"),
])
def test_nranks_is_checked_before_anything_starts(monkeypatch, capsys, args, message):
    started = []
    monkeypatch.setattr(launcher.Launcher, "run", lambda self: started.append(self.nranks) or 0)
    monkeypatch.setattr(os, "environ", {uniqueid.FAKE_ID_ENV: "1"})
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert nccl.run.main([*args, __file__]) == 2
    assert message in capsys.readouterr().err
    assert started == []


def test_oversubscribe_gives_consent(monkeypatch):
    started = []
    monkeypatch.setattr(launcher.Launcher, "run", lambda self: started.append(self.nranks) or 0)
    monkeypatch.setattr(os, "environ", {uniqueid.FAKE_ID_ENV: "1"})
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert nccl.run.main(["-n", "9", "--oversubscribe", "--backend", "host", __file__]) == 0
    assert started == [9]


def test_nranks_limit_rules():
    from nccl._launch.limits import check_nranks

    ok = dict(host_max=1024, cpus=2, nproc=None)
    assert check_nranks(8, host=True, oversubscribe=False, **ok) is None
    assert "--oversubscribe" in check_nranks(9, host=True, oversubscribe=False, **ok)
    assert check_nranks(9, host=True, oversubscribe=True, **ok) is None
    assert check_nranks(1025, host=False, oversubscribe=True, **ok) is None  # NCCL: no host cap
    assert "1024 ranks" in check_nranks(1025, host=True, oversubscribe=True, **ok)
    msg = check_nranks(50, host=False, oversubscribe=True, host_max=None, cpus=64, nproc=100,
                       running=60)
    assert "RLIMIT_NPROC 100, 60 already running" in msg
    assert check_nranks(40, host=False, oversubscribe=True, cpus=64, nproc=100, running=60) is None


def test_huge_nranks_starts_nothing(tmp_path, run_env):
    prog = script(tmp_path, "open(f'started.{RANK}', 'w').close()\n")
    start = time.monotonic()
    res = run_launcher(run_env, "-n", 100000, "--backend", "host", prog, cwd=tmp_path)
    assert res.returncode == 2
    assert "nccl.run: error: -n 100000 is more than the host backend supports" in res.stderr
    assert not list(tmp_path.glob("started.*"))
    assert time.monotonic() - start < RUN_TIMEOUT


# ---------------------------------------------------------- bounded output

HUGE_LINE = """
def hwm():
    with open(f"/proc/{os.getppid()}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmHWM:"))
before = hwm()
chunk = b"x" * (1 << 20)
for _ in range(200):
    os.write(1, chunk)
with open("hwm.json", "w") as f:
    json.dump([before, hwm()], f)
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc")
@pytest.mark.parametrize("tag", [False, True])
def test_a_huge_line_keeps_the_launcher_small(tmp_path, run_env, tag):
    prog = script(tmp_path, HUGE_LINE)
    proc = subprocess.Popen(_launch_cmd("-n", 1, *(["-t"] if tag else []), "--backend", "host",
                                        prog), env=run_env, cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    total, lines, tail = 0, 0, b""
    try:
        while True:
            data = proc.stdout.read(1 << 20)
            if not data:
                break
            total += len(data)
            lines += data.count(b"\n")
            tail = (tail + data)[-16:]
            body = data.replace(b"[0]: ", b"").replace(b"\n", b"") if tag else data.rstrip(b"\n")
            assert body.strip(b"x") == b"", body[:80]
        assert proc.wait(timeout=RUN_TIMEOUT) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()
        proc.stderr.close()
    before, after = json.loads((tmp_path / "hwm.json").read_text())
    if "libasan" not in os.environ.get("LD_PRELOAD", ""):  # ASan's quarantine holds freed memory
        assert after - before < 16 * 1024, (before, after)  # kB: bounded, not 200 MiB
    assert tail.endswith(b"x\n")
    if tag:  # pieces of at most 64 KiB, each its own tagged line
        assert lines == 200 * 16
        assert total == 200 * (1 << 20) + lines * len(b"[0]: \n")
    else:
        assert total == 200 * (1 << 20) + 1 and lines == 1


def test_output_splitter():
    s = launcher._Splitter(b"[1]: ", limit=8)
    assert s.feed(b"ab") == b""                       # an unfinished short line waits
    assert s.feed(b"c\r10%\r") == b"[1]: abc\r[1]: 10%\r"
    assert s.feed(b"\nx\r") == b"\n[1]: x\r"        # "\r\n" split across reads
    assert s.feed(b"\n") == b"\n"
    assert s.feed(b"0123456789") == b"[1]: 01234567\n"  # long: pieces of at most 8
    assert s.finish() == b"[1]: 89\n"
    plain = launcher._Splitter(b"", limit=4)
    assert plain.feed(b"abcdef") == b"abcd"
    assert plain.feed(b"gh") == b"efgh"
    assert plain.finish() == b"\n"                     # the open line is ended
    assert plain.feed(b"ok\n") == b"ok\n" and plain.finish() == b""


@pytest.mark.parametrize("tag", [False, True])
def test_carriage_return_lines_are_not_held_back(tmp_path, run_env, tag):
    prog = script(tmp_path, """
sys.stdout.write("step 1\\r")
sys.stdout.flush()
for _ in range(400):
    if os.path.exists("go"):
        break
    time.sleep(0.05)
print("done")
""")
    proc = subprocess.Popen(_launch_cmd("-n", 1, *(["-t"] if tag else []), "--backend", "host",
                                        prog), env=run_env, cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    expected = b"[0]: step 1\r" if tag else b"step 1\r"
    seen = b""
    try:
        os.set_blocking(proc.stdout.fileno(), False)
        end = time.monotonic() + 10
        while expected not in seen and time.monotonic() < end:
            try:
                seen += os.read(proc.stdout.fileno(), 4096)
            except BlockingIOError:
                time.sleep(0.02)
        assert expected in seen, seen
    finally:
        (tmp_path / "go").touch()
        proc.wait(timeout=RUN_TIMEOUT)
        os.set_blocking(proc.stdout.fileno(), True)
        seen += proc.stdout.read()
        proc.stdout.close()
    assert seen == expected + (b"[0]: done\n" if tag else b"done\n")


# ------------------------------------------------------------------ cleanup

GRANDCHILD = """
import subprocess
kid = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], {redirect})
with open(f"kid.{{RANK}}.tmp", "w") as f:
    f.write(str(kid.pid))
os.replace(f"kid.{{RANK}}.tmp", f"kid.{{RANK}}")
"""


@pytest.mark.parametrize("redirect", ["stdout=subprocess.DEVNULL", "stdin=subprocess.DEVNULL"])
@pytest.mark.parametrize("fail", [False, True])
def test_processes_left_by_ranks_are_stopped(tmp_path, run_env, redirect, fail):
    prog = script(tmp_path, GRANDCHILD.format(redirect=redirect) + """
if RANK == 1:
    for _ in range(600):  # rank 0 has started its child too
        if os.path.exists("kid.0"):
            break
        time.sleep(0.05)
    sys.exit(3 if FAIL else 0)
time.sleep(60 if FAIL else 0)
""".replace("FAIL", str(fail)))
    start = time.monotonic()
    res = run_launcher(run_env, "-n", 2, "--backend", "host", prog, cwd=tmp_path)
    kids = [int(p.read_text()) for p in tmp_path.glob("kid.[0-9]")]
    try:
        assert res.returncode == (3 if fail else 0), res.stderr
        assert len(kids) == 2
        assert all(_wait_for(lambda: not _alive(pid), 5) for pid in kids)
        assert time.monotonic() - start < RUN_TIMEOUT
    finally:
        for pid in kids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            children.setdefault(ppid, []).append(int(name))
    found, todo = set(), [pid]
    while todo:
        for kid in children.get(todo.pop(), []):
            if kid not in found:
                found.add(kid)
                todo.append(kid)
    return found


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_bench_forwards_signals_to_the_whole_job(tmp_path, run_env, sig):
    env = dict(run_env)
    env.pop(uniqueid.FAKE_ID_ENV, None)
    out = open(tmp_path / "bench.out", "w+")
    proc = subprocess.Popen([sys.executable, "-m", "nccl.bench", "all_reduce", "--nranks", "2",
                             "--backend", "host", "-b", "8", "-e", "64M", "-f", "2", "-n",
                             "10000", "-w", "0", "-c", "0"], env=env, stdin=subprocess.DEVNULL,
                            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    job: set[int] = set()

    def ranks_running():
        job.update(_descendants(proc.pid))
        ranks = [p for p in job if _alive(p) and "--worker" in _cmdline(p)
                 and "nccl.run" not in _cmdline(p)]
        out.seek(0)  # the first result row: both ranks are inside the benchmark
        return len(ranks) == 2 and re.search(r"^ +8 +2 +float", out.read(), re.M)

    try:
        assert _wait_for(ranks_running, 2 * RUN_TIMEOUT), "the ranks did not start"
        proc.send_signal(sig)
        status = proc.wait(timeout=RUN_TIMEOUT)
        assert all(_wait_for(lambda: not _alive(pid), 10) for pid in job), job
    finally:
        for pid in [proc.pid, *job]:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        proc.wait()
    out.seek(0)
    text = out.read()
    assert status == 128 + sig, text
    assert "Traceback" not in text, text


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


# ------------------------------------------------- among other launchers


def test_np_is_mpiruns_spelling_of_n(tmp_path, run_env):
    prog = script(tmp_path, "print('rank', RANK, os.environ['WORLD_SIZE'])\n")
    p = run_launcher(run_env, "-np", 3, prog)
    assert p.returncode == 0, p.stderr
    assert sorted(p.stdout.split("\n")[:3]) == ["rank 0 3", "rank 1 3", "rank 2 3"]


def test_callers_platform_is_kept_or_its_override_named(tmp_path, run_env):
    """With --backend auto and no GPU, a caller's NCCL4PY_PLATFORM is kept (as
    the loader keeps it), not silently replaced by NCCL4PY_BACKEND=host."""
    nodev = tmp_path / "dev"
    nodev.mkdir()
    prog = script(tmp_path, "print(RANK, os.environ.get('NCCL4PY_BACKEND'), "
                            "os.environ.get('NCCL4PY_PLATFORM'))\n")
    env = dict(run_env, NCCL4PY_PLATFORM="cuda", NCCL4PY_TEST_DEV_DIR=str(nodev),
               **{uniqueid.FAKE_ID_ENV: "1"})  # the id is not what this is about
    p = run_launcher(env, "-n", 2, prog)
    assert p.returncode == 0, p.stderr
    assert sorted(p.stdout.splitlines()) == ["0 None cuda", "1 None cuda"]
    assert "note" not in p.stderr
    p = run_launcher(env, "-n", 1, "--backend", "host", prog)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["0 host cuda"]
    assert "nccl.run: note: --backend host: NCCL4PY_PLATFORM=cuda does not apply" in p.stderr


def test_master_addr_and_port_for_torch_env_init(tmp_path, run_env):
    """torch.distributed.init_process_group() with env:// works under nccl.run
    as under torchrun (gloo, CPU)."""
    pytest.importorskip("torch")
    prog = script(tmp_path, """
        import torch, torch.distributed as dist
        dist.init_process_group("gloo", timeout=__import__("datetime").timedelta(seconds=20))
        t = torch.tensor([float(dist.get_rank() + 1)])
        dist.all_reduce(t)
        print(dist.get_rank(), dist.get_world_size(), int(t.item()), flush=True)
        dist.destroy_process_group()
        """)
    p = subprocess.run(_launch_cmd("-n", 3, prog), env=run_env, capture_output=True,
                       text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr[-3000:]
    assert sorted(p.stdout.splitlines()) == ["0 3 6", "1 3 6", "2 3 6"]


TRACEBACK_PROGRAM = """
import traceback
START = float(sys.argv[1])


class SlowStderr:
    # a traceback written a line at a time, each a little late: a busy machine
    def write(self, text):
        sys.__stderr__.write(text)
        sys.__stderr__.flush()
        time.sleep(0.004)

    def flush(self):
        pass


def hook(*exc):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the first rank's exit stops the others
    traceback.print_exception(*exc, file=SlowStderr())


sys.excepthook = hook


def deep(n):
    if n == 0:
        raise ValueError(f"rank {RANK} fails")
    deep(n - 1)


while time.time() < START:  # every rank fails at the same moment
    time.sleep(0.001)
deep(12)
"""


def test_tracebacks_of_several_failing_ranks_stay_whole(tmp_path, run_env):
    prog = script(tmp_path, TRACEBACK_PROGRAM)
    p = subprocess.run(_launch_cmd("-n", 3, prog, time.time() + 2.0), env=run_env,
                       capture_output=True, text=True, timeout=RUN_TIMEOUT,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 1
    lines = [ln for ln in p.stderr.splitlines() if not ln.startswith("nccl.run:")]
    blocks = "\n".join(lines).split("Traceback (most recent call last):")[1:]
    # each block is one rank's traceback, whole: its frames, then its own error
    for block in blocks:
        errors = re.findall(r"ValueError: rank (\d) fails", block)
        assert len(errors) == 1, p.stderr
        assert block.rstrip().endswith(f"ValueError: rank {errors[0]} fails"), p.stderr
        assert block.count('in deep') == 4, block  # 3 frames, then "[Previous line repeated"
    assert len(blocks) == 3, p.stderr
