"""src/collectives.def, the collectives and point-to-point calls of
nccl.core.Communicator: their docstrings with text signatures
(src/gen/coll_docs.h), their stubs of nccl/_nccl.pyi, the calls whose send
count every rank shares (nccl/trace.py) and those whose function only RCCL
has (nccl/bench/collectives.py, from nccl_api.def).  C includes the table
itself (communicator.c parses, checks and calls from its descriptors)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import api
from .common import ROOT, Output, c_header, c_string, macro_calls, para, wrap

TABLE = "src/collectives.def"


@dataclass
class Arg:
    role: str
    keyword: str
    pytype: str
    doc: str


@dataclass
class Coll:
    method: str
    rule: str
    fn: str
    fn_all: str
    required: int
    positional: int
    args: list[Arg]
    summary: str = ""
    example: str = ""


def parse_collectives(path: Path = ROOT / "src" / "collectives.def") -> tuple[list[Coll], dict[str, str]]:
    """The methods in table order, and the doc of each rule."""
    args: dict[str, Arg] = {}
    rules: dict[str, str] = {}
    colls: dict[str, Coll] = {}
    for macro, a in macro_calls(path):
        if macro == "N4P_ARG":
            args[a[0]] = Arg(a[0], a[1], c_string(a[2]), c_string(a[3]))
        elif macro == "N4P_RULE":
            rules[a[0]] = c_string(a[1])
        elif macro == "N4P_COLL":
            roles = [r.strip() for r in a[6].strip("()").split(",")]
            colls[a[0]] = Coll(a[0], a[1], a[2], a[3], int(a[4]), int(a[5]),
                               [args[r] for r in roles])
        elif macro == "N4P_COLL_DOC":
            colls[a[0]].summary, colls[a[0]].example = c_string(a[1]), c_string(a[2])
        elif macro == "N4P_COLL_CONFIG":  # config=, keyword-only, after the others
            colls[a[0]].args.append(args["A_CONFIG"])
    missing = [c.method for c in colls.values() if not c.summary]
    if missing:
        raise SystemExit(f"{path}: no N4P_COLL_DOC for {missing}")
    return list(colls.values()), rules


def text_signature(c: Coll, self_: str = "$self") -> str:
    parts = [self_, "/"] if self_ else []
    for i, a in enumerate(c.args):
        if i == c.positional:
            parts.append("*")
        parts.append(a.keyword if i < c.required else f"{a.keyword}=None")
    return f"{c.method}({', '.join(parts)})"


# the roles of a call whose ranks need not give the same send count: only the
# root's sendbuf is read (A_ROOT: the root sends), a count per rank
# (A_SCOUNTS), one peer (A_PEER)
OWN_COUNT_ROLES = {"A_ROOT", "A_SCOUNTS", "A_PEER"}


def same_count(colls: list[Coll]) -> list[str]:
    """The methods whose send count is the same on every rank: every rank
    passes a sendbuf of one count (the trace analyzer compares them)."""
    return [c.method for c in colls
            if any(a.role == "A_SEND" for a in c.args)
            and not any(a.role in OWN_COUNT_ROLES for a in c.args)]


def gen_same_count(colls: list[Coll]) -> list[str]:
    return wrap("_SAME_COUNT = {", [f'"{m}"' for m in same_count(colls)], "}")


def _rccl_only(path: Path) -> set[str]:
    """The library functions the API table marks RCCL-only."""
    return {e.name for e in api.parse_table(path) if e.since == "rccl"}


def gen_rccl_only(colls: list[Coll], rccl_only: set[str]) -> list[str]:
    """The Communicator methods whose library function only RCCL has."""
    pairs = [f'"{c.method}": "{c.fn}"' for c in colls if c.fn in rccl_only]
    return wrap("_RCCL_ONLY = {", pairs, "}")


def _raises_para(text: str) -> list[str]:
    return para(text, "    ", "        ")


# The causes every call shares; a method's own causes follow on their own lines.
INVALID = ("NcclInvalid: a buffer not contiguous in row-major order, read-only where written, "
           "of another dtype, too small, or in memory the communicator does not work on; "
           "send and receive buffers that overlap without being the in-place form; a null "
           "communicator, one in use by another thread, or the parent's in a fork() child.")
TYPEERR = ("TypeError: an argument missing, unknown or given twice; a buffer that is not an "
           "array; a stream of no known kind.")
NCCLERR = "NCCLError: the library's error, with its message."


def doc_pieces(c: Coll, rules: dict[str, str], rccl_only: set[str]) -> list[str | list[str]]:
    """A method's docstring as lines of its own (lists) and the names of the
    paragraphs it shares with others (strings: an argument's role, a rule,
    RAISES)."""
    roles = {a.role for a in c.args}
    pieces: list[str | list[str]] = [[text_signature(c), "--", ""] + para(c.summary)
                                     + ["", "Arguments:"]]
    pieces += [a.role for a in c.args]
    pieces += [c.rule, "RAISES"]
    own = []
    if roles & {"A_ROOT", "A_ROOT_ANY", "A_PEER"}:
        own.append(f"NcclInvalid: a {'peer' if 'A_PEER' in roles else 'root'} out of range.")
    if "A_SCOUNTS" in roles:
        own.append("NcclInvalid: counts and displacements that are not one int per rank or "
                   "exceed their buffer.")
    ints = [a.keyword for a in c.args if a.role in ("A_OP", "A_ROOT", "A_ROOT_ANY", "A_PEER")]
    if ints:
        own.append(f"TypeError: {' or '.join(ints)} not an integer.")
    if c.fn in rccl_only:
        own.append(f"FunctionNotFoundError: the library has no {c.fn} (NCCL).")
    lines = [line for text in own for line in _raises_para(text)]
    pieces.append(lines + ["", "Example (every rank of comm runs it):"]
                  + ["    " + line for line in c.example.splitlines()])
    return pieces


def shared_doc_parts(colls: list[Coll], rules: dict[str, str]) -> dict[str, list[str]]:
    """The paragraphs several docstrings share, by name."""
    parts = {}
    for c in colls:
        for a in c.args:
            parts[a.role] = para(f"{a.keyword}: {a.doc}.", "    ", "        ")
    for rule, text in rules.items():
        parts[rule] = [""] + para("Buffers: " + text)
    parts["RAISES"] = ["", "Raises:"] + [line for t in (INVALID, TYPEERR, NCCLERR) for line in _raises_para(t)]
    return parts


def docstring(c: Coll, rules: dict[str, str], rccl_only: set[str]) -> str:
    parts = shared_doc_parts([c], rules)
    return "\n".join(line for p in doc_pieces(c, rules, rccl_only)
                     for line in (parts[p] if isinstance(p, str) else p))


def _c_lines(lines: list[str]) -> list[str]:
    """C string literals of lines, each ending in a newline."""
    return ['    "' + line.replace("\\", "\\\\").replace('"', '\\"') + '\\n"'
            for line in lines]


def gen_coll_docs(colls: list[Coll], rules: dict[str, str], rccl_only: set[str]) -> str:
    out = [c_header(f"{TABLE} and {api.TABLE}").rstrip("\n"),
           "/* The docstrings (with text signatures) of Communicator's calls: N4P_DOC_<method>,",
           " * made of each method's own lines and the paragraphs N4P_DOCPART_<name> they share. */",
           "#ifndef NCCL4PY_COLL_DOCS_H", "#define NCCL4PY_COLL_DOCS_H", ""]
    for name, lines in shared_doc_parts(colls, rules).items():
        out += [f"#define N4P_DOCPART_{name} \\", " \\\n".join(_c_lines(lines)), ""]
    for c in colls:
        body: list[str] = []
        shared = False  # the last line names shared paragraphs (one line holds several)
        for p in doc_pieces(c, rules, rccl_only):
            if isinstance(p, list):
                body += _c_lines(p)
            elif shared and len(body[-1]) + len(p) < 85:
                body[-1] += f" N4P_DOCPART_{p}"
            else:
                body.append(f"    N4P_DOCPART_{p}")
            shared = isinstance(p, str)
        body[-1] = body[-1][:-3] + '"'  # no newline after the last line
        out += [f"#define N4P_DOC_{c.method} \\", " \\\n".join(body), ""]
    out += ["#endif /* NCCL4PY_COLL_DOCS_H */", ""]
    return "\n".join(out)


def render_pyi_communicator(colls: list[Coll] | None = None) -> str:
    """The collective and point-to-point methods of _CommunicatorBase in
    nccl/_nccl.pyi (indented for the class body)."""
    out = []
    for c in colls if colls is not None else parse_collectives()[0]:
        params = ["self"]
        for i, a in enumerate(c.args):
            if i == c.positional:
                params.append("*")
            params.append(f"{a.keyword}: {a.pytype}" + ("" if i < c.required else " = None"))
        out += wrap(f"    def {c.method}(", params, ") -> None: ...")
    return "\n".join(out) + "\n"


def generate(root: Path = ROOT) -> Output:
    colls, rules = parse_collectives(root / TABLE)
    rccl_only = _rccl_only(root / api.TABLE)
    out = Output()
    out.files["src/gen/coll_docs.h"] = gen_coll_docs(colls, rules, rccl_only)
    out.block("nccl/_nccl.pyi", "collective methods", TABLE,
              [line[4:] for line in render_pyi_communicator(colls).splitlines()])
    out.block("nccl/trace.py", "same count", TABLE, gen_same_count(colls))
    out.block("nccl/bench/collectives.py", "rccl only", f"{TABLE}, {api.TABLE}",
              gen_rccl_only(colls, rccl_only))
    return out
