"""Every shell command shown in README.md, CHANGELOG.md and the documents of
docs/ listed below is run here, exactly as written, on a machine without a
GPU (the host backend), from a scratch directory that mirrors the
repository.  A command that cannot run here carries a marker the test
recognises (see docs/contributing.md): ``# needs <one of NEEDS>`` or
``# run by tests/<file>.py``.  ``pip install`` commands are not run (the
packaging test installs for real); the extras they name must exist.  A new
command that is neither runnable nor marked fails.

Also: every code block declares its language, the README's program is the
example file it names, and every NCCL4PY_* variable the code reads is in
docs/environment.md (or in host/README.md for the host backend's)."""
from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, clean_env, mpiexec

# The documents whose commands are checked (the other documents of docs/
# have their own maintainers and checks).
DOCS = ["README.md", "CHANGELOG.md", "docs/api.md", "docs/running.md", "docs/benchmarks.md",
        "docs/environment.md", "docs/troubleshooting.md", "docs/architecture.md",
        "docs/contributing.md", "docs/debugging-hangs.md", "docs/torch.md"]
SHELL = {"sh", "bash", "shell", "console"}
# What a command may need that this machine cannot give it.
NEEDS = {"a GPU", "GPU nodes", "torchrun on GPU nodes", "srun on GPU nodes"}
MPI = re.compile(r"(^|\s)(mpiexec|mpirun)\s")
FENCE = re.compile(r"^```(\S*)\s*$")


def blocks(path: Path) -> list[tuple[str, int, list[str], str]]:
    """(language, first line number, lines, marker comment before the fence)."""
    out, lines = [], path.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        lang, start = m.group(1), i + 1
        j = start
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        before = lines[i - 1].strip() if i else ""
        out.append((lang, start + 1, lines[start:j], before))
        i = j + 1
    return out


def split_comment(line: str) -> tuple[str, str]:
    """(command, trailing comment) with quotes respected."""
    quote = None
    for k, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (k == 0 or line[k - 1].isspace()):
            return line[:k].rstrip(), line[k + 1:].strip()
    return line.rstrip(), ""


def commands(path: Path) -> list[tuple[str, str, str, str]]:
    """(id, command, comment, block marker) of every shell command of *path*."""
    out = []
    for lang, lineno, lines, before in blocks(path):
        if lang not in SHELL:
            continue
        joined, pending = [], ""
        for line in lines:
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1].rstrip() + " "
                continue
            joined.append(pending + line.strip())
            pending = ""
        for k, line in enumerate(joined):
            if not line or line.startswith("#"):
                continue
            cmd, comment = split_comment(line)
            out.append((f"{path.relative_to(ROOT)}:{lineno}+{k}", cmd, comment, before))
    return out


ALL = [c for doc in DOCS for c in commands(ROOT / doc)]


def test_documents_exist_and_have_commands():
    for doc in DOCS:
        assert (ROOT / doc).exists(), doc
    assert len(ALL) >= 20


@pytest.mark.parametrize("doc", DOCS)
def test_every_block_declares_its_language(doc):
    bare = [n for lang, n, _, _ in blocks(ROOT / doc) if not lang]
    assert bare == [], f"{doc}: code blocks without a language at lines {bare}"


def test_readme_keeps_its_two_commands():
    """.ci/run reads the block after each marker; the main command runs the
    bench on the host backend."""
    found = {before: lines for _, _, lines, before in blocks(ROOT / "README.md")
             if before in ("<!-- main-command -->", "<!-- test-command -->")}
    assert set(found) == {"<!-- main-command -->", "<!-- test-command -->"}
    assert [len(v) for v in found.values()] == [1, 1]
    main = found["<!-- main-command -->"][0]
    assert main.startswith("pip install -e . && python -m nccl.bench ")
    assert "--backend host" in main
    assert found["<!-- test-command -->"][0] == \
        "pip install -e '.[test]' && python -m pytest -q -ra -n 2 --dist loadfile"


def test_readme_program_is_the_example():
    for lang, _, lines, _ in blocks(ROOT / "README.md"):
        if lang == "python" and lines and lines[0].startswith("# examples/"):
            name = lines[0].split()[1]
            text = (ROOT / name).read_text()
            body = text.split('"""', 2)[2].strip() if text.startswith('"""') else text.strip()
            assert "\n".join(lines[1:]).strip() == body, name
            break
    else:
        pytest.fail("README shows no example program")


# ------------------------------------------------------------------ commands

def _extras() -> set[str]:
    """The names of the extras: setup.py's EXTRAS (pyproject.toml lists
    optional-dependencies as dynamic)."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    value = next(node.value for node in tree.body if isinstance(node, ast.Assign)
                 and [getattr(t, "id", None) for t in node.targets] == ["EXTRAS"])
    return set(ast.literal_eval(value))


def check_pip(part: str) -> None:
    """A `pip install` line: installs this project (with existing extras) or named packages."""
    args = part.split()[2:]
    assert args, part
    for arg in args:
        arg = arg.strip("'\"")
        if arg in ("-e", "-q", "--no-deps"):
            continue
        m = re.fullmatch(r"(\.|nccl4py)(\[([\w,-]+)\])?", arg)
        if m:
            unknown = set((m.group(3) or "").split(",")) - {""} - _extras()
            assert not unknown, f"{part}: no such extra {sorted(unknown)}"
        else:
            assert re.fullmatch(r"[A-Za-z0-9_.-]+", arg), f"{part}: cannot check {arg!r}"


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """A directory that looks like the repository (links to its entries), for
    commands that write files; and a /dev without GPUs."""
    d = tmp_path_factory.mktemp("docs-commands")
    for entry in ROOT.iterdir():
        if entry.name not in (".git", ".venv", "build", "dist") and \
                not entry.name.endswith(".egg-info"):
            (d / entry.name).symlink_to(entry)
    nodev = tmp_path_factory.mktemp("dev-without-gpu")
    return d, nodev


def classify(cmd: str, comment: str, before: str) -> tuple[str, str]:
    if before == "<!-- test-command -->":
        return "suite", ".ci/run runs the test command"
    m = re.fullmatch(r"needs (.+)", comment)
    if m:
        assert m.group(1) in NEEDS, f"unknown need {m.group(1)!r}: use one of {sorted(NEEDS)}"
        return "marked", m.group(1)
    m = re.fullmatch(r"run by (tests/\S+\.py|\.ci/run)", comment)
    if m:
        return "delegated", m.group(1)
    return "run", ""


@pytest.mark.parametrize("where,cmd,comment,before", ALL, ids=[c[0] for c in ALL])
def test_command(where, cmd, comment, before, scratch):
    kind, detail = classify(cmd, comment, before)
    parts = [p.strip() for p in cmd.split("&&")]
    for part in parts:
        if part.startswith("pip install"):
            check_pip(part)
    if kind == "suite":
        return
    if kind == "marked":
        return
    if kind == "delegated" and detail == ".ci/run":
        assert cmd in (ROOT / detail).read_text(), f".ci/run does not run {cmd!r}"
        return
    if kind == "delegated":
        test_file = ROOT / detail
        assert test_file.exists(), detail
        tool = next((Path(w).name for w in cmd.split() if w.endswith((".sh", ".py"))), None)
        tool = tool or ("make" if cmd.startswith("make") else cmd.split()[-1])
        assert tool in test_file.read_text(), f"{detail} does not run {tool}"
        return
    run = " && ".join(p for p in parts if not p.startswith("pip install"))
    if not run:
        return
    if MPI.search(run):
        pytest.importorskip("mpi4py")
        if mpiexec() is None:
            pytest.skip("no mpiexec (pip install mpich mpi4py)")
    d, nodev = scratch
    bindir = os.path.dirname(sys.executable)
    env = clean_env(PATH=bindir + os.pathsep + os.environ.get("PATH", ""),
                    NCCL4PY_TEST_DEV_DIR=str(nodev), PYTHONPATH=None)
    if not shutil.which("python", path=env["PATH"]):
        pytest.skip("no `python` next to the interpreter")
    p = subprocess.run(["bash", "-c", run], cwd=d, env=env, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, f"{where}: {run}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    assert "Traceback" not in p.stderr, p.stderr[-3000:]


# ------------------------------------------------------- environment variables

CODE = ["nccl", "src", "host", "tools", "tests", "bench", "examples", "setup.py"]


def variables_in_code() -> set[str]:
    """NCCL4PY_* names used in the code, without C macros (include guards, constants)."""
    names, macros = set(), set()
    for top in CODE:
        base = ROOT / top
        files = [base] if base.is_file() else [f for f in base.rglob("*")
                                               if f.suffix in (".py", ".c", ".h", ".sh")]
        for f in files:
            text = f.read_text(errors="replace")
            names |= set(re.findall(r"\bNCCL4PY_[A-Z0-9_]+\b", text))
            macros |= set(re.findall(r"#\s*(?:define|ifndef)\s+(NCCL4PY_[A-Z0-9_]+)", text))
    return {n for n in names - macros if not n.endswith("_")}  # not prefixes


def test_every_variable_is_documented():
    documented = (ROOT / "docs" / "environment.md").read_text()
    host = (ROOT / "host" / "README.md").read_text()
    missing = sorted(v for v in variables_in_code()
                     if f"`{v}`" not in documented
                     and not (v.startswith("NCCL4PY_HOST_") and f"`{v}`" in host))
    assert missing == [], f"document in docs/environment.md: {missing}"


def test_markers_are_recognised():
    assert split_comment("find /dev/shm -name 'a#b' -mmin +60  # needs a GPU") == \
        ("find /dev/shm -name 'a#b' -mmin +60", "needs a GPU")
    assert classify("x", "needs a GPU", "") == ("marked", "a GPU")
    assert classify("x", "run by tests/test_x.py", "") == ("delegated", "tests/test_x.py")
    assert classify("x", "run by .ci/run", "") == ("delegated", ".ci/run")
    assert classify("x", "-t: prefix lines", "") == ("run", "")
    with pytest.raises(AssertionError, match="unknown need"):
        classify("x", "needs a TPU", "")
    check_pip("pip install -e '.[test,cu13]' nvidia-nccl-cu13")
    with pytest.raises(AssertionError, match="no such extra"):
        check_pip("pip install '.[cuda]'")


@pytest.mark.parametrize("doc", DOCS)
def test_relative_links_resolve(doc):
    path = ROOT / doc
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", path.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        file = (path.parent / target.split("#")[0]).resolve()
        if not file.exists():
            broken.append(target)
    assert broken == [], f"{doc}: {broken}"
