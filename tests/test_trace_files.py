"""Flight records as data written and read across users: the writer never
follows a symbolic link and refuses a directory that other users could
write to; `python -m nccl.trace` bounds its work by the files' size and
reports a malformed record as one line naming the file, with exit status 3
(not 1, "problem found")."""
from __future__ import annotations

import copy
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nccl.core as nc
from conftest import host_available
from hostproc import host_env
from nccl import trace
from stub_comm import COMM

needs_host = pytest.mark.skipif(not host_available(), reason="host backend not built")

ENTRY = {"seq": 1, "kind": "coll", "op": "allreduce", "count": 4, "recvcount": 4,
         "dtype": "float32", "redop": "sum", "root": -1, "peer": -1, "sendbuf": "0x1",
         "recvbuf": "0x1", "stream": "0x0", "group_depth": 0, "enqueue": 10.0, "start": 10.0,
         "end": 10.5, "state": "done", "status": 0}
RECORD = {"format": "nccl4py-trace-1", "reason": "exit", "rank": 0, "nranks": 2, "host": "h",
          "pid": 1, "comm_hash": "abc", "comm_index": 0, "backend": "host", "time": 11.0,
          "timeout": 0.0, "buffer": 2000, "calls": 1, "p2p_calls": 0, "aborted": None,
          "entries": [ENTRY]}


def record(rank: int, **changes) -> dict:
    rec = copy.deepcopy(RECORD)
    rec["rank"] = rank
    rec.update(changes)
    return rec


def analyse(directory, capsys) -> tuple[int, str, str]:
    rc = trace.main([str(directory)])
    out, err = capsys.readouterr()
    return rc, out, err


# ---------------------------------------------------------------- writing

def test_dump_never_follows_a_symlink(stub, tmp_path):
    """Neither at the record's name nor at the temporary name the writer used
    to derive from it (path.tmp<pid>): another user could plant either."""
    victim = tmp_path / "victim"
    victim.write_text("precious")
    out = tmp_path / "rank0.json"
    (tmp_path / f"rank0.json.tmp{os.getpid()}").symlink_to(victim)
    comm = nc.Communicator(COMM)
    x = np.ones(4, np.float32)
    comm.allreduce(x, x, nc.SUM)
    assert comm.dump_trace(str(out)) == str(out)
    assert victim.read_text() == "precious"
    assert not out.is_symlink() and json.loads(out.read_text())["format"] == "nccl4py-trace-1"
    out.unlink()
    out.symlink_to(victim)  # a symlink at the record's own name is replaced, not followed
    comm.dump_trace(str(out))
    assert victim.read_text() == "precious" and not out.is_symlink()
    assert json.loads(out.read_text())["entries"][0]["op"] == "allreduce"
    leftovers = sorted(p.name for p in tmp_path.iterdir())
    assert leftovers == ["rank0.json", f"rank0.json.tmp{os.getpid()}", "victim"], leftovers


RANK = r"""
import os, sys
import numpy as np
import nccl.core as nc
if len(sys.argv) > 1:
    os.umask(int(sys.argv[1], 8))
try:
    comm = nc.Communicator.init(1, 0, nc.get_unique_id())
except ValueError as e:
    print("refused:", e)
    raise SystemExit(0)
x = np.ones(4, np.float32)
comm.allreduce(x, x, nc.SUM)
comm.destroy()
print("ok")
"""


def run_rank(tdir, *args):
    p = subprocess.run([sys.executable, "-c", RANK, *args], capture_output=True, text=True,
                       env=host_env(NCCL4PY_TRACE_DIR=str(tdir)), timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


@needs_host
@pytest.mark.parametrize("mode", [0o777, 0o775, 0o757, 0o773])
def test_a_directory_others_can_write_is_refused(tmp_path, mode):
    tdir = tmp_path / "shared"
    tdir.mkdir()
    tdir.chmod(mode)
    out = run_rank(tdir)
    assert out.startswith(f"refused: NCCL4PY_TRACE_DIR={tdir} is refused: other users can "
                          f"write to it (mode {mode:04o}) and it has no sticky bit"), out
    assert "chmod go-w" in out and list(tdir.iterdir()) == []


@needs_host
@pytest.mark.parametrize("mode", [0o700, 0o755, 0o1777, 0o1770])
def test_a_private_or_sticky_directory_is_used(tmp_path, mode):
    tdir = tmp_path / "dir"
    tdir.mkdir()
    tdir.chmod(mode)
    assert run_rank(tdir) == "ok"
    assert json.loads((tdir / "rank0.json").read_text())["reason"] == "exit"


@needs_host
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a directory to another user")
def test_a_directory_of_another_user_is_refused(tmp_path):
    tdir = tmp_path / "theirs"
    tdir.mkdir()
    tdir.chmod(0o1777)
    os.chown(tdir, 12345, 12345)
    out = run_rank(tdir)
    assert out.startswith(f"refused: NCCL4PY_TRACE_DIR={tdir} is refused: it belongs to "
                          "another user (uid 12345)"), out


@needs_host
def test_a_missing_directory_is_created_private_to_writing(tmp_path):
    tdir = tmp_path / "new"
    assert run_rank(tdir, "0") == "ok"  # umask 0: what mkdir's mode alone gives
    assert stat.S_IMODE(tdir.stat().st_mode) == 0o755
    assert (tdir / "rank0.json").exists()


# ---------------------------------------------------------------- reading

def _raw(text):
    return text.encode() if isinstance(text, str) else text


MALFORMED = [
    ("empty", b""),
    ("not JSON", b"{"),
    ("not UTF-8", b'{"format": "\xff"}'),
    ("a list", json.dumps([RECORD])),
    ("nested too deeply", b"[" * 200000),
    ("other format", json.dumps(record(0, format="nccl4py-trace-9"))),
    ("no rank", json.dumps({k: v for k, v in RECORD.items() if k != "rank"})),
    ("rank as text", json.dumps({**record(0), "rank": "0"})),
    ("rank as bool", json.dumps({**record(0), "rank": False})),
    ("rank beyond nranks", json.dumps(record(2))),
    ("nranks 10**11", json.dumps(record(0, nranks=10**11))),
    ("nranks 0", json.dumps(record(0, nranks=0))),
    ("calls negative", json.dumps(record(0, calls=-1))),
    ("calls as float", json.dumps(record(0, calls=1.5))),
    ("calls of 30 digits", json.dumps(record(0)).replace('"calls": 1', '"calls": ' + "9" * 30)),
    ("calls of a million digits", json.dumps(record(0)).replace('"calls": 1',
                                                                '"calls": ' + "7" * 10**6)),
    ("time NaN", json.dumps(record(0)).replace('"time": 11.0', '"time": NaN')),
    ("time infinite", json.dumps(record(0)).replace('"time": 11.0', '"time": 1e400')),
    ("entries an object", json.dumps(record(0, entries={"seq": 1}))),
    ("entry a number", json.dumps(record(0, entries=[5]))),
    ("entry without seq", json.dumps(record(0, entries=[{k: v for k, v in ENTRY.items()
                                                          if k != "seq"}]))),
    ("entry seq 0", json.dumps(record(0, entries=[{**ENTRY, "seq": 0}]))),
    ("entry seq as text", json.dumps(record(0, entries=[{**ENTRY, "seq": "1"}]))),
    ("entry kind unknown", json.dumps(record(0, entries=[{**ENTRY, "kind": "both"}]))),
    ("entry state a list", json.dumps(record(0, entries=[{**ENTRY, "state": ["done"]}]))),
    ("entry enqueue as text", json.dumps(record(0, entries=[{**ENTRY, "enqueue": "soon"}]))),
    ("entry end as text", json.dumps(record(0, entries=[{**ENTRY, "end": "later"}]))),
    ("entry count below -1", json.dumps(record(0, entries=[{**ENTRY, "count": -2}]))),
    ("entry root a list", json.dumps(record(0, entries=[{**ENTRY, "root": [0]}]))),
    ("entry redop an object", json.dumps(record(0, entries=[{**ENTRY, "redop": {}}]))),
    ("entry op with a terminal escape", json.dumps(record(0, entries=[{**ENTRY,
                                                                       "op": "\x1b[2J"}]))),
    ("entry op too long", json.dumps(record(0, entries=[{**ENTRY, "op": "x" * 1000}]))),
    ("aborted as text", json.dumps(record(0, aborted="yes"))),
    ("aborted without op", json.dumps(record(0, aborted={"status": 8, "seq": 1,
                                                         "waited": 1.0}))),
    ("aborted waited as text", json.dumps(record(0, aborted={"status": 8, "op": "allreduce",
                                                             "seq": 1, "waited": "long"}))),
    ("comm_hash a number", json.dumps(record(0, comm_hash=7))),
]


@pytest.mark.parametrize("what, content", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_a_malformed_record_is_one_line_naming_the_file(tmp_path, capsys, what, content):
    bad = tmp_path / "rank0.json"
    bad.write_bytes(_raw(content))
    (tmp_path / "rank1.json").write_text(json.dumps(record(1)))
    rc, out, err = analyse(tmp_path, capsys)
    assert rc == trace.MALFORMED == 3, (out, err)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"python -m nccl.trace: {bad}: not a readable flight record: "), err
    assert "Traceback" not in err and "\x1b" not in err
    # the readable record is still analysed (rank 0's is missing)
    assert "no record from rank 0" in out and "records from rank 1" in out, out


def test_links_fifos_and_directories_named_as_records_are_not_read(tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text(json.dumps(record(0)))
    d = tmp_path / "dir"
    d.mkdir()
    (d / "rank0.json").symlink_to(elsewhere)
    os.mkfifo(d / "rank1.json")  # opened without O_NONBLOCK, reading it would block
    (d / "rank2.json").mkdir()
    (d / "rank3.json").write_text(json.dumps(record(3, nranks=4)))
    rc, out, err = analyse(d, capsys)
    assert rc == 3, err
    assert err.splitlines() == [
        f"python -m nccl.trace: {d / 'rank0.json'}: not a readable flight record: a symbolic "
        "link: not followed",
        f"python -m nccl.trace: {d / 'rank1.json'}: not a readable flight record: not a "
        "regular file",
        f"python -m nccl.trace: {d / 'rank2.json'}: not a readable flight record: not a "
        "regular file"], err
    assert "no record from ranks 0-2" in out


def test_other_json_files_are_skipped(tmp_path, capsys):
    (tmp_path / "notes.json").write_text("[1, 2]")
    (tmp_path / "garbage.json").write_bytes(b"\x00\xff{")
    (tmp_path / "rank0.json").write_text(json.dumps(record(0, nranks=1)))
    rc, out, err = analyse(tmp_path, capsys)
    assert (rc, err) == (0, ""), err
    assert "no problem" in out


def test_only_malformed_records(tmp_path, capsys):
    (tmp_path / "rank0.json").write_text("{")
    rc, out, err = analyse(tmp_path, capsys)
    assert rc == 3 and out == "" and len(err.splitlines()) == 1
    assert trace.main([str(tmp_path), "--json"]) == 3
    out, err = capsys.readouterr()
    (line,) = json.loads(out)["malformed"]
    assert err == f"python -m nccl.trace: {line}\n" and line.endswith(": not valid JSON")


def test_not_a_directory(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    rc, out, err = analyse(tmp_path / "file", capsys)
    assert rc == 2 and "is not a directory" in err
    rc, out, err = analyse(tmp_path / "none", capsys)
    assert rc == 2 and "no such directory" in err


@pytest.mark.parametrize("older, why", [
    ({"pid": 7}, "pid 7 and 1"),
    ({"host": "other"}, "host 'other' and 'h'"),
    ({"entries": [{**ENTRY, "op": "broadcast", "root": 0}]},
     "coll #1: op 'broadcast' and 'allreduce'"),
    ({"entries": [{**ENTRY, "count": 8}]}, "coll #1: count 8 and 4"),
], ids=["pid", "host", "op", "count"])
def test_conflicting_records_of_one_rank_are_reported(tmp_path, capsys, older, why):
    """Two records of the same rank of one communicator that cannot both be
    true: the report names the rank and both files, says which one it used,
    and counts it as a problem (the newer one used to win silently)."""
    newer = tmp_path / "rank0.json"
    stale = tmp_path / "copy-of-rank0.json"  # a record by its format, whatever its name
    newer.write_text(json.dumps(record(0, nranks=1, time=20.0)))
    stale.write_text(json.dumps(record(0, nranks=1, time=11.0, **older)))
    rc, out, err = analyse(tmp_path, capsys)
    assert (rc, err) == (1, ""), (out, err)
    assert (f"rank 0: conflicting records {stale} and {newer} ({why}); the newest, {newer}, "
            "is analysed") in out, out
    assert trace.main([str(tmp_path), "--json"]) == 1
    (comm,) = json.loads(capsys.readouterr().out)["communicators"]
    assert comm["conflicts"] == [{"rank": 0, "used": str(newer), "ignored": str(stale),
                                  "why": why}]


def test_an_earlier_record_of_the_same_process_is_no_conflict(tmp_path, capsys):
    """A snapshot the same process wrote earlier (SIGUSR1, then the exit):
    the same calls, further along in the newer one."""
    running = {**ENTRY, "state": "running", "end": None}
    (tmp_path / "rank0.json").write_text(json.dumps(record(
        0, nranks=1, time=20.0, calls=2, entries=[ENTRY, {**ENTRY, "seq": 2}])))
    (tmp_path / "rank0.sigusr1.json").write_text(json.dumps(record(
        0, nranks=1, time=10.2, entries=[running])))
    rc, out, err = analyse(tmp_path, capsys)
    assert (rc, err) == (0, ""), out
    assert "conflicting" not in out and "last completed collective: allreduce #2" in out


def test_huge_claims_are_analysed_within_the_files_size(tmp_path):
    """A record that says 10**12 calls or 2**31-1 ranks: the analysis looks
    only at what the files hold (it iterated up to "calls" and listed every
    missing rank before)."""
    (tmp_path / "rank0.json").write_text(json.dumps(record(0, nranks=2**31 - 1,
                                                           calls=10**12)))
    (tmp_path / "rank1.json").write_text(json.dumps(record(1, nranks=2**31 - 1)))
    p = subprocess.run([sys.executable, "-m", "nccl.trace", str(tmp_path), "--json"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stderr
    (c,) = json.loads(p.stdout)["communicators"]
    assert c["missing_records"] == [[2, 2**31 - 2]] and c["missing_count"] == 2**31 - 3
    assert c["diverged"] is None  # no ring holds a number only some ranks called
    text = subprocess.run([sys.executable, "-m", "nccl.trace", str(tmp_path)],
                          capture_output=True, text=True, timeout=120).stdout
    assert f"no record from ranks 2-{2**31 - 2}" in text, text


# ------------------------------------------------------------------- fuzz

_JSON = st.recursive(st.none() | st.booleans() | st.integers() |
                     st.floats(allow_nan=False) | st.text(max_size=20),
                     lambda kids: st.lists(kids, max_size=4) |
                     st.dictionaries(st.text(max_size=8), kids, max_size=4),
                     max_leaves=12)
_FIELDS = sorted(set(RECORD) | {"entries.0." + k for k in ENTRY})


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(_FIELDS), value=_JSON, drop=st.booleans())
def test_fuzz_a_field_of_a_record(tmp_path_factory, field, value, drop):
    d = tmp_path_factory.mktemp("fuzz")
    rec = record(0)
    target, key = (rec["entries"][0], field.split(".")[2]) if field.startswith("entries.") \
        else (rec, field)
    if drop:
        target.pop(key, None)
    else:
        target[key] = value
    (d / "rank0.json").write_text(json.dumps(rec))
    (d / "rank1.json").write_text(json.dumps(record(1)))
    _one_outcome(d)


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_fuzz_the_bytes_of_a_record(tmp_path_factory, data):
    d = tmp_path_factory.mktemp("fuzzb")
    (d / "rank0.json").write_bytes(data)
    _one_outcome(d)


def _one_outcome(d: Path) -> None:
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        rc = trace.main([str(d)])
    assert rc in (0, 1, 2, 3), rc
    lines = err.getvalue().splitlines()
    if rc == 3:
        assert len(lines) == 1 and str(d / "rank0.json") in lines[0], lines
    elif rc in (0, 1):
        assert lines == [], lines
