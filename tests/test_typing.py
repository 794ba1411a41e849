"""mypy: the whole package type-checks with the project's [tool.mypy] config;
the bench, the diagnostics, the C module's stubs and the basic examples are
clean under --strict."""
from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from conftest import ROOT

pytest.importorskip(
    "mypy", reason="mypy is not installed: the test extra brings it, except on free-threaded "
    "Pythons (its dependency ast-serialize has no free-threaded wheel)")

STRICT = ["nccl/bench", "nccl/_diagnostics.py", "nccl/__main__.py", "nccl/_nccl.pyi"]
EXAMPLES = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples" / "01_basic").glob("*.py"))


_CACHE = tempfile.mkdtemp(prefix="nccl4py-mypy-")  # shared by this session's runs
atexit.register(shutil.rmtree, _CACHE, True)


def mypy(*args, **env):
    e = dict(os.environ, **env)
    e.pop("NCCL_LIBRARY", None)
    return subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary",
                           "--cache-dir", _CACHE, *args], cwd=ROOT, env=e,
                          capture_output=True, text=True, timeout=300)


def test_stub_covers_the_extension():
    import nccl._nccl as ext

    stub = (ROOT / "nccl" / "_nccl.pyi").read_text()
    public = [n for n in dir(ext) if not n.startswith("__")]
    missing = [n for n in public if f"def {n}(" not in stub and f"class {n}" not in stub
               and f"{n}:" not in stub and f"import {n} as {n}" not in stub]  # re-exported
    assert not missing, f"add to nccl/_nccl.pyi: {missing}"


def test_package():
    p = mypy()  # files and relaxations from [tool.mypy] in pyproject.toml
    assert p.returncode == 0, p.stdout + p.stderr


def test_strict_owned_modules():
    p = mypy("--strict", "--follow-imports=silent", *STRICT)
    assert p.returncode == 0, p.stdout + p.stderr


def test_strict_examples():
    p = mypy("--strict", "--follow-imports=silent", *EXAMPLES,
             MYPYPATH=str(ROOT / "examples" / "01_basic"))
    assert p.returncode == 0, p.stdout + p.stderr


USER_PROGRAM = """\
import numpy as np

import nccl.core as nc


def run(comm: nc.Communicator) -> None:
    x = np.ones(4, np.float32)
    y = np.zeros(4, np.float32)
    comm.allreduce(x, y, nc.SUM)
    comm.allreduce((x, 4, nc.FLOAT32), (y, "float32"), nc.MAX, stream=None)
    comm.broadcast(bytearray(16), y, root=0, stream=0)
    comm.send(memoryview(b"abcd"), 0)
    comm.alltoallv(x, [1, 1, 1, 1], [0, 1, 2, 3], y, np.ones(4, np.int64), [0, 1, 2, 3])
    comm.reduce(x, y, nc.SUM, root=None, config=nc.NCCLCollConfig())
"""


def test_strict_user_program_catches_a_str_passed_as_a_buffer(tmp_path):
    """The collectives' buffer, op, stream and config parameters are typed (no
    Any): what nccl.core accepts passes --strict, a str as a buffer does not."""
    good = tmp_path / "good.py"
    good.write_text(USER_PROGRAM)
    bad = tmp_path / "bad.py"
    bad.write_text(USER_PROGRAM + '    comm.allreduce("not a buffer", y, nc.SUM)\n'
                   "    comm.allreduce(x, y, 1.5)\n")
    p = mypy("--strict", "--follow-imports=silent", str(good), str(bad))
    errors = [line for line in p.stdout.splitlines() if ": error:" in line]
    assert [e.split(":")[:2] for e in errors] == [[str(bad), "15"], [str(bad), "16"]], p.stdout
    assert 'Argument 1 to "allreduce"' in errors[0] and '"str"' in errors[0]
    assert 'Argument 3 to "allreduce"' in errors[1] and '"float"' in errors[1]


def test_the_buffer_spec_aliases_are_not_any():
    from typing import Any, get_args

    from nccl.core import typing as t

    def leaves(alias):
        args = get_args(alias)
        return [x for a in args for x in leaves(a)] if args else [alias]

    for name in ("NcclSupportedBuffer", "NcclBufferSpec", "NcclScalarSpec", "NcclStreamSpec"):
        assert Any not in leaves(getattr(t, name)), name
