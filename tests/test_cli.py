"""What every command line shares, as a new user meets it: ``--version``,
the console scripts, output piped into ``head``, a directory that does not
exist."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

import nccl
from conftest import ROOT, clean_env, host_available

needs_host = pytest.mark.skipif(not host_available(), reason="host backend not built")

COMMANDS = [["nccl"], ["nccl.run"], ["nccl.bench"], ["nccl.trace"]]


def python_m(*args, env=None, timeout=120, **kw):
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True,
                          timeout=timeout, env=env or clean_env(), **kw)


@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: c[0])
def test_version(cmd):
    p = python_m(*cmd, "--version")
    assert p.returncode == 0, p.stderr
    assert p.stdout == f"nccl4py {nccl.__version__}\n"


def test_console_scripts():
    text = (ROOT / "pyproject.toml").read_text()
    scripts = dict(re.findall(r'^(nccl4py-\w+) = "([\w.:]+)"', text, re.M))
    assert scripts == {"nccl4py-run": "nccl.run:main", "nccl4py-bench": "nccl.bench:main",
                       "nccl4py-trace": "nccl.trace:main"}
    for target in scripts.values():  # each entry point exists and takes argv
        module, func = target.split(":")
        code = f"import sys, {module} as m; sys.exit(m.{func}(['--version']))"
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=60, env=clean_env())
        assert p.returncode == 0 and p.stdout.startswith("nccl4py "), (target, p.stderr)


# ------------------------------------------------------ output into `| head`

def _with_reader_gone(cmd, env=None, cwd=None, timeout=180):
    """Run *cmd* with a stdout whose reader has already gone (as after `| head`)."""
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run(cmd, stdout=w, stderr=subprocess.PIPE, text=True, timeout=timeout,
                           env=env or clean_env(), cwd=cwd, stdin=subprocess.DEVNULL)
    finally:
        os.close(w)
    return p


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    """Real flight records of a two-rank job (for nccl.trace)."""
    if not host_available():
        pytest.skip("host backend not built")
    d = tmp_path_factory.mktemp("records")
    prog = d / "prog.py"
    prog.write_text("import numpy as np\nimport nccl.core as nc\n"
                    "with nc.Communicator.from_env() as c:\n"
                    "    x = np.ones(4, np.float32)\n    c.allreduce(x, x, nc.SUM)\n")
    p = python_m("nccl.run", "-n", "2", "--backend", "host", str(prog),
                 env=clean_env(NCCL4PY_TRACE_DIR=str(d)))
    assert p.returncode == 0, p.stderr
    assert len(list(d.glob("*.json"))) == 2
    return d


@pytest.mark.parametrize("what", ["nccl", "nccl.trace", "nccl.bench"])
def test_a_closed_pipe_is_no_traceback(what, request):
    args = what.split()
    if what == "nccl.trace":
        args.append(str(request.getfixturevalue("records")))
    elif what == "nccl.bench":
        if not host_available():
            pytest.skip("host backend not built")
        args += ["--nranks", "2", "--backend", "host", "-b", "8", "-e", "8", "-n", "1"]
    p = _with_reader_gone([sys.executable, "-m", *args])
    assert "Traceback" not in p.stderr and "BrokenPipeError" not in p.stderr, p.stderr
    assert p.returncode == 141, (p.returncode, p.stderr)  # as a shell reports SIGPIPE


def test_trace_of_a_missing_directory(tmp_path):
    p = python_m("nccl.trace", str(tmp_path / "nonexistent"))
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr == f"python -m nccl.trace: {tmp_path / 'nonexistent'}: no such directory\n"
    (tmp_path / "file").write_text("")
    p = python_m("nccl.trace", str(tmp_path / "file"))
    assert p.returncode == 2 and "is not a directory" in p.stderr
