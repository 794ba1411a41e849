#!/usr/bin/env python3
"""Derive the Python side of the data-type, struct and collective tables.

    python tools/gen_types.py            # rewrite the generated parts (checked in)
    python tools/gen_types.py --check    # exit 1 when one of them is stale

The tables are X-macro files that the C code includes directly:

    src/dtypes.def       the NCCL data types (value, size, array name, DLPack
                         code, NumPy typestr kind, host reduction kernel)
    src/structs.def      the structs and their fields (C type, offset,
                         initial value, how nccl.core exposes each field)
    src/collectives.def  the collectives and point-to-point calls of
                         nccl.core.Communicator (arguments, count rule,
                         library functions) and their documentation
    src/enums.def        the other enums (C and Python names, values,
                         aliases, class bases and docstrings, nccl.core's
                         classes), nccl.h's groups of #defines and its
                         single #defines

and it reads which functions only RCCL has from src/nccl_api.def, the table
of tools/gen_api.py.

How a fact flows:

* A data type is one N4P_DTYPE line.  C: nccl_api.h makes the enum of it,
  buffer.c its size, name and the array codes that map to it, communicator.c
  its name in messages, host/dtypes.c and host/reduce.c its size, name and
  kernel.  Python (the blocks below, between "generated" markers):
  nccl/_enums.py DataType, nccl/_dtypes.py TABLE (names, sizes, the parser of
  dtype arguments), MANTISSA_BITS (the benchmark's tolerance of float
  reductions) and TESTS_NAMES (an N4P_TESTS_NAME line: the benchmark's -d
  names), nccl/core/typing.py NcclDataType and its constants.
* A struct field is one N4P_FIELD line.  C: nccl_api.h declares the struct
  and checks every offset and size at compile time; structs.c builds the
  accessor, initial value and layout of each field.  Python:
  nccl/core/config.py (checks of NCCLConfig, the fields of WaitSignalDesc),
  nccl/core/coll_config.py (the fields of NCCLCollConfig and their checks;
  those of VendorOption and the ConfigExt fields they set),
  nccl/core/requirements.py (the fields of NCCLDevCommRequirements),
  nccl/core/communicator.py (the properties read from ncclCommProperties_t),
  nccl/core/properties.py (the fields of NCCLCommProperties: those past the
  oldest N4P_LAYOUT of the struct are None where the library does not report
  them), and nccl/_nccl.pyi (the
  struct classes, from render_pyi_structs()).
* An enum member is one N4P_VALUE line.  C: nccl_api.h makes the enums of
  them; src/enum_names.h (written here) the names the trace prints (and
  those of the data types, from dtypes.def).  Python:
  the classes of nccl/_enums.py (and their names in its __all__); an enum
  with an N4P_CORE line also has its class in nccl.core (nccl/core/enums.py,
  nccl/core/typing.py: the members in nccl.core's spelling, NcclRedOp's as
  module-level names SUM, PROD, ... too), its name in the __all__ of its
  module, of those N4P_CORE_ALSO names (imported there) and of nccl.core
  (nccl/core/__init__.py imports those its star imports do not bring).  A
  group of nccl.h's #defines is
  one N4P_DEFINES line and an N4P_DEFINE line per member: C constants in
  nccl_api.h, a class in nccl/core/constants.py.  A single #define of nccl.h
  (a sentinel such as NCCL_SPLIT_NOCOLOR, a size, a magic number) is one
  N4P_CONSTANT line: its #define in src/nccl_constants.h (written here,
  included by nccl_api.h), a name of nccl/core/constants.py.
* A collective is one N4P_COLL line (and its N4P_COLL_DOC line).  C:
  communicator.c parses, checks, calls and keeps alive every call from its
  descriptor; src/coll_docs.h (written here) holds each method's docstring
  with its text signature; render_pyi_communicator() gives its stub in
  nccl/_nccl.pyi.  Python: nccl/trace.py compares the send count across
  ranks of the calls every rank makes with a sendbuf of one count (its
  roles, same_count()); nccl/bench/collectives.py knows the calls whose
  function src/nccl_api.def marks rccl (the benchmark skips them where the
  library lacks it).

Only the standard library is used, so setup.py and the tests can run it.
"""
from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
PKG = ROOT / "nccl"
SELF = "tools/gen_types.py"

# ----------------------------------------------------------------- parsing


def _split_args(text: str) -> list[str]:
    """Split a macro's arguments at the commas outside parentheses and strings."""
    args, depth, cur, quote = [], 0, [], ""
    i = 0
    while i < len(text):
        ch = text[i]
        if quote:
            cur.append(ch)
            if ch == "\\":
                cur.append(text[i + 1])
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
            cur.append(ch)
        elif ch == "(":
            depth += 1
            cur.append(ch)
        elif ch == ")":
            depth -= 1
            cur.append(ch)
        elif ch == "," and depth == 0:
            args.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
        i += 1
    args.append("".join(cur).strip())
    return args


def macro_calls(path: Path) -> list[tuple[str, list[str]]]:
    """The (macro, arguments) of every table line of an X-macro file."""
    text = re.sub(r"/\*.*?\*/", " ", path.read_text(), flags=re.S)
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    calls = []
    pos = 0
    pattern = re.compile(r"\b(N4P_[A-Z_]+)\s*\(")
    while (m := pattern.search(text, pos)) is not None:
        depth, i, quote = 1, m.end(), ""
        while depth:
            ch = text[i]
            if quote:
                if ch == "\\":
                    i += 1
                elif ch == quote:
                    quote = ""
            elif ch in "\"'":
                quote = ch
            elif ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
            i += 1
        calls.append((m.group(1), _split_args(text[m.end():i - 1])))
        pos = i
    return calls


def c_string(arg: str) -> str:
    """The value of a C string literal (adjacent literals concatenated)."""
    parts = re.findall(r'"((?:[^"\\]|\\.)*)"', arg)
    if not parts:
        raise ValueError(f"not a string literal: {arg}")
    return "".join(parts).encode().decode("unicode_escape")


# --------------------------------------------------------------- data types


# DLPack codes of the element types NumPy has built in (the others come from ml_dtypes)
NUMPY_CODES = ("N4P_DL_INT", "N4P_DL_UINT", "N4P_DL_FLOAT")


@dataclass
class DType:
    name: str        # enum member: ncclName, DataType.Name, NcclDataType.NAME
    value: int
    size: int
    array_name: str  # NumPy / ml_dtypes / torch name
    builtin: bool    # a NumPy built-in type (else ml_dtypes provides it)
    aliases: list[str] = field(default_factory=list)
    mantissa: int | None = None  # explicit mantissa bits of a floating type
    tests_name: str | None = None  # the name nccl-tests gives it


def parse_dtypes(path: Path = SRC / "dtypes.def") -> tuple[list[DType], int]:
    """The data types in value order, and the value arrays of bool travel as."""
    types: dict[str, DType] = {}
    bool_as = None
    for macro, a in macro_calls(path):
        if macro == "N4P_DTYPE":
            name, value, size, array_name, dl_code, _kernel = a
            types[name] = DType(name, int(value), int(size), array_name, dl_code in NUMPY_CODES)
        elif macro == "N4P_DTYPE_ALIAS":
            types[a[1]].aliases.append(a[0])
        elif macro == "N4P_BOOL_AS":
            bool_as = types[a[0]].value
        elif macro == "N4P_FLOAT_BITS":
            types[a[0]].mantissa = int(a[1])
        elif macro == "N4P_TESTS_NAME":
            types[a[0]].tests_name = a[1]
    out = sorted(types.values(), key=lambda t: t.value)
    if [t.value for t in out] != list(range(len(out))) or bool_as is None:
        raise SystemExit(f"{path}: values must be 0..n-1 and N4P_BOOL_AS given")
    if any(t.tests_name is None for t in out):
        raise SystemExit(f"{path}: every type needs its N4P_TESTS_NAME")
    return out, bool_as


def gen_enum_members(types: list[DType], upper: bool) -> list[str]:
    lines = []
    for t in types:
        for n in [t.name, *t.aliases]:
            lines.append(f"{n.upper() if upper else n} = {t.value}")
    return lines


def gen_dtype_table(types: list[DType], bool_as: int) -> list[str]:
    lines = ["# (enum member, value, bytes per element, array name, a NumPy built-in type)",
             "TABLE: tuple[tuple[str, int, int, str, bool], ...] = ("]
    lines += [f'    ("{t.name}", {t.value}, {t.size}, "{t.array_name}", {t.builtin}),' for t in types]
    lines += [")", f"BOOL_AS = {bool_as}  # arrays of bool travel as this type",
              "# value -> explicit mantissa bits, of the floating types",
              "MANTISSA_BITS = {" + ", ".join(f"{t.value}: {t.mantissa}" for t in types
                                              if t.mantissa is not None) + "}"]
    lines.append("# the names nccl-tests gives the types, by value")
    lines += _wrap("TESTS_NAMES = (", [f'"{t.tests_name}"' for t in types], ")")
    return lines


def gen_constants(cls: str, groups: list[list[str]]) -> list[str]:
    """Module-level names of the members of cls (a member's name first, its
    aliases after it), and their names added to __all__."""
    lines = [" = ".join(group) + f" = {cls}.{group[0]}" for group in groups]
    return lines + _wrap("__all__ += [", [f'"{n}"' for group in groups for n in group], "]")


def gen_dtype_constants(types: list[DType]) -> list[str]:
    return gen_constants("NcclDataType", [[n.upper() for n in [t.name, *t.aliases]]
                                          for t in types])


# -------------------------------------------------------------------- enums

# base of a table enum -> the bases of its class in nccl/_enums.py
ENUM_BASES = {"ENUM": "IntEnum", "FLAG": "IntFlag", "DECODES": "_Decodes, IntEnum"}
# the value names a table may use (limits.h), as Python writes them
ENUM_LIMITS = {"INT_MIN": "-2147483648", "INT_MAX": "2147483647"}


@dataclass
class EnumMember:
    cname: str | None  # None: a member of a Python-only class
    pyname: str
    value: str         # as the table writes it (a literal, INT_MIN or INT_MAX)
    count: bool = False
    alias: str = ""    # an older spelling of nccl.core's class (N4P_DEFINE's OldName)

    @property
    def number(self) -> int:
        return int(ENUM_LIMITS.get(self.value, self.value), 0)


@dataclass
class CoreEnum:
    """The class of nccl.core of an enum (N4P_CORE and the lines after it)."""
    module: str  # nccl.core.<module>
    name: str
    base: str    # a key of ENUM_BASES, or METHODS
    doc: str
    skip: set[str] = field(default_factory=set)  # bindings' names it leaves out
    aliases: bool = False    # the bindings' names are aliases
    constants: bool = False  # the members are module-level names too
    also: list[str] = field(default_factory=list)  # other modules that have it (imported)


@dataclass
class Enum:
    ctype: str
    pyname: str
    base: str
    doc: str
    c: bool  # a C type of its own (N4P_ENUM), else a second Python class (N4P_PYENUM)
    members: list[EnumMember] = field(default_factory=list)
    core: CoreEnum | None = None
    defines: bool = False  # a group of #defines (N4P_DEFINES): no class in nccl._enums

    def core_members(self) -> list[tuple[str, str]]:
        """(name, value) of the members of the nccl.core class, in order: the
        value a literal, or the name of the member an alias stands for."""
        assert self.core is not None
        own = [m for m in self.members if not m.count and m.pyname not in self.core.skip]
        out = [(core_name(m.pyname), ENUM_LIMITS.get(m.value, m.value)) for m in own]
        for m in own:
            alias = m.pyname if self.core.aliases else m.alias
            if alias and alias != core_name(m.pyname):
                out.append((alias, core_name(m.pyname)))
        return out


def core_name(pyname: str) -> str:
    """A member's nccl.core spelling: upper case, words split at their capitals."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", pyname).upper()


def parse_enums(path: Path = SRC / "enums.def") -> list[Enum]:
    enums: list[Enum] = []
    is_open = False
    for macro, a in macro_calls(path):
        if macro in ("N4P_ENUM", "N4P_PYENUM"):
            if is_open or a[2] not in ENUM_BASES:
                raise SystemExit(f"{path}: bad {macro} {a}")
            enums.append(Enum(a[0], a[1], a[2], c_string(a[3]) if a[3] != '""' else "",
                              macro == "N4P_ENUM"))
            is_open = macro == "N4P_ENUM"
        elif macro in ("N4P_VALUE", "N4P_COUNT"):
            if not is_open or enums[-1].defines or a[0] != enums[-1].ctype:
                raise SystemExit(f"{path}: {macro} outside its N4P_ENUM: {a}")
            enums[-1].members.append(EnumMember(a[1], a[2], a[3], macro == "N4P_COUNT"))
        elif macro == "N4P_PYVALUE":
            if enums[-1].c or a[0] != enums[-1].pyname:
                raise SystemExit(f"{path}: N4P_PYVALUE outside its N4P_PYENUM: {a}")
            enums[-1].members.append(EnumMember(None, a[1], a[2]))
        elif macro == "N4P_ENUM_END":
            if not is_open or enums[-1].defines or a[0] != enums[-1].ctype:
                raise SystemExit(f"{path}: N4P_ENUM_END of no open enum: {a}")
            is_open = False
        elif macro.startswith("N4P_CORE"):
            _parse_core(path, macro, a, {e.ctype: e for e in enums if e.c})
        elif macro == "N4P_DEFINES":
            if is_open or a[2] not in ("ENUM", "FLAG"):
                raise SystemExit(f"{path}: bad {macro} {a}")
            doc = c_string(a[3]) if a[3] != '""' else ""
            enums.append(Enum(a[0], a[1], a[2], doc, False, defines=True,
                              core=CoreEnum("constants", a[1], a[2], doc)))
            is_open = True
        elif macro == "N4P_DEFINE":
            if not is_open or not enums[-1].defines or a[0] != enums[-1].ctype:
                raise SystemExit(f"{path}: {macro} outside its N4P_DEFINES: {a}")
            enums[-1].members.append(EnumMember(a[1], a[2], a[3], alias=a[4]))
        elif macro == "N4P_DEFINES_END":
            if not is_open or not enums[-1].defines or a[0] != enums[-1].ctype:
                raise SystemExit(f"{path}: N4P_DEFINES_END of no open group: {a}")
            is_open = False
    if is_open:
        raise SystemExit(f"{path}: {enums[-1].ctype} has no N4P_ENUM_END")
    bad = [m.value for e in enums for m in e.members
           if m.value not in ENUM_LIMITS and not re.fullmatch(r"-?(0x[0-9A-Fa-f]+|\d+)", m.value)]
    if bad:
        raise SystemExit(f"{path}: values must be integer literals, INT_MIN or INT_MAX: {bad}")
    return enums


@dataclass
class Constant:
    """One of nccl.h's single #defines (N4P_CONSTANT)."""
    cname: str
    pyname: str  # "-": none (C only)
    value: str   # as C writes it
    where: str   # a key of CONSTANT_PLACES

    @property
    def python(self) -> str:
        """The value as Python writes it."""
        if self.value in ENUM_LIMITS:
            return ENUM_LIMITS[self.value]
        suffix = "[fFlL]" if FLOAT_LITERAL.fullmatch(self.value) else "[uUlL]"
        return re.sub(suffix + "+$", "", self.value)

    @property
    def number(self) -> int | float:
        return float(self.python) if FLOAT_LITERAL.fullmatch(self.value) else int(self.python, 0)


# where of N4P_CONSTANT -> (a name of nccl.core.constants, in its __all__)
CONSTANT_PLACES = {"ALL": (True, True), "PY": (True, False), "C": (False, False)}
INT_LITERAL = re.compile(r"-?(0x[0-9A-Fa-f]+|\d+)[uUlL]*")
FLOAT_LITERAL = re.compile(r"-?\d+\.\d*([eE][-+]?\d+)?[fF]?")


def parse_constants(path: Path = SRC / "enums.def") -> list[Constant]:
    out = []
    for macro, a in macro_calls(path):
        if macro != "N4P_CONSTANT":
            continue
        c = Constant(*a) if len(a) == 4 else None
        if c is None or c.where not in CONSTANT_PLACES \
                or (c.pyname == "-") != (c.where == "C"):
            raise SystemExit(f"{path}: bad N4P_CONSTANT {a}")
        literal = INT_LITERAL.fullmatch(c.value) or FLOAT_LITERAL.fullmatch(c.value)
        if not (literal or c.value in ENUM_LIMITS or (c.value == "NULL" and c.where == "C")):
            raise SystemExit(f"{path}: a constant is a literal, INT_MIN, INT_MAX or NULL (C "
                             f"only): {a}")
        out.append(c)
    return out


def gen_constants_header(constants: list[Constant], structs: list[Struct]) -> str:
    out = ["/* Generated by tools/gen_types.py from src/enums.def (N4P_CONSTANT) and",
           " * src/structs.def (N4P_INITIALIZER).  Do not edit. */",
           "/* nccl.h's single #defines: sentinels, sizes and magic numbers. */",
           "#ifndef NCCL4PY_NCCL_CONSTANTS_H", "#define NCCL4PY_NCCL_CONSTANTS_H", "",
           "#include <limits.h>", "#include <stddef.h>", ""]
    out += [f"#define {c.cname} " + (f"({c.value})" if c.value.startswith("-") else c.value)
            for c in constants]
    for s in structs:
        if s.initializer is not None:  # the fields' initial values, in order
            out += ["", f"/* a new {s.ctype} */"]
            lines = _wrap(f"#define {s.initializer} {{", [f.initial for f in s.fields], "}",
                          width=96)
            out += [line + " \\" for line in lines[:-1]] + lines[-1:]
    return "\n".join(out + ["", "#endif /* NCCL4PY_NCCL_CONSTANTS_H */", ""])


def gen_constant_values(constants: list[Constant]) -> list[str]:
    """The constants' names of nccl.core.constants, and the public ones added
    to __all__."""
    named = [c for c in constants if CONSTANT_PLACES[c.where][0]]
    public = [f'"{c.pyname}"' for c in named if CONSTANT_PLACES[c.where][1]]
    return [f"{c.pyname} = {c.python}" for c in named] + _wrap("__all__ += [", public, "]")


def _parse_core(path: Path, macro: str, a: list[str], by_ctype: dict[str, Enum]) -> None:
    e = by_ctype.get(a[0])
    if e is None or (macro == "N4P_CORE") == (e.core is not None):
        raise SystemExit(f"{path}: {macro} of no enum, or not after its N4P_CORE: {a}")
    if macro == "N4P_CORE":
        if a[3] not in (*ENUM_BASES, "METHODS") or (a[3] == "METHODS" and a[4] != '""'):
            raise SystemExit(f"{path}: bad N4P_CORE {a} (a METHODS class has its own doc)")
        e.core = CoreEnum(a[1], a[2], a[3], c_string(a[4]) if a[4] != '""' else "")
    elif e.core is not None and macro == "N4P_CORE_SKIP" and a[1] in {m.pyname for m in e.members}:
        e.core.skip.add(a[1])
    elif e.core is not None and macro in ("N4P_CORE_ALIASES", "N4P_CORE_CONSTANTS"):
        setattr(e.core, macro.removeprefix("N4P_CORE_").lower(), True)
    elif e.core is not None and macro == "N4P_CORE_ALSO" and a[1] != e.core.module \
            and a[1] not in e.core.also:
        e.core.also.append(a[1])
    else:
        raise SystemExit(f"{path}: bad {macro} {a}")


def _enum_class(name: str, bases: str, doc: str, members: list[tuple[str, str]]) -> list[str]:
    lines = [f"class {name}({bases}):"]
    if doc:
        doc_lines = doc.splitlines()
        lines += [f'    """{doc_lines[0]}'] + [f"    {line}" for line in doc_lines[1:]]
        lines[-1] += '"""'
    return lines + [f"    {n} = {v}" for n, v in members] + ["", ""]


def gen_enum_classes(enums: list[Enum]) -> list[str]:
    """The classes of nccl/_enums.py, and their names added to __all__."""
    lines: list[str] = []
    enums = [e for e in enums if not e.defines]
    for e in enums:
        lines += _enum_class(e.pyname, ENUM_BASES[e.base], e.doc,
                             [(m.pyname, ENUM_LIMITS.get(m.value, m.value)) for m in e.members])
    return lines + _wrap("__all__ += [", [f'"{e.pyname}"' for e in enums], "]")


def gen_core_enums(enums: list[Enum]) -> dict[str, dict[str, list[str]]]:
    """The generated blocks of the nccl.core classes, by file: "enums" (the
    classes a module imports from another, their names and those of its own
    classes added to __all__, its classes), <class> (the members of a METHODS
    class) and "<class> constants" (module-level names of the members)."""
    out: dict[str, dict[str, list[str]]] = {}
    names: dict[str, list[str]] = {}  # module -> its classes, own then imported
    imports: dict[str, dict[str, list[str]]] = {}  # module -> {their module: classes}
    for e in enums:
        if e.core is None:
            continue
        c = e.core
        blocks = out.setdefault(f"nccl/core/{c.module}.py", {})
        classes = blocks.setdefault("enums", [])
        names.setdefault(c.module, []).append(c.name)
        for m in c.also:
            out.setdefault(f"nccl/core/{m}.py", {}).setdefault("enums", [])
            imports.setdefault(m, {}).setdefault(c.module, []).append(c.name)
        members = e.core_members()
        if c.base == "METHODS":
            blocks[c.name] = [f"{n} = {v}" for n, v in members]
        else:
            classes.extend(_enum_class(c.name, ENUM_BASES[c.base], c.doc, members))
        if c.constants:
            blocks[f"{c.name} constants"] = gen_constants(c.name, [[n] for n, _ in members])
    for rel, blocks in out.items():
        module = rel.removeprefix("nccl/core/").removesuffix(".py")
        theirs = imports.get(module, {})
        head = [f"from .{m} import {', '.join(sorted(cls))}  # noqa: E402"
                for m, cls in theirs.items()]
        own = names.get(module, []) + [n for cls in theirs.values() for n in cls]
        head += _wrap("__all__ += [", [f'"{n}"' for n in own], "]")
        classes = blocks["enums"][:-2]  # no blank lines after the last class
        blocks["enums"] = head + (["", ""] + classes if classes else [])
    return out


# the modules whose names nccl/core/__init__.py takes whole (from .m import *)
CORE_STAR_MODULES = ("typing", "constants")


def gen_core_package(enums: list[Enum]) -> list[str]:
    """The classes nccl.core takes from the other modules, imported and added
    to its __all__."""
    by_module: dict[str, list[str]] = {}
    for e in enums:
        if e.core is not None and not {e.core.module, *e.core.also} & set(CORE_STAR_MODULES):
            by_module.setdefault(e.core.module, []).append(e.core.name)
    lines = [f"from .{m} import {', '.join(sorted(cls))}  # noqa: E402"
             for m, cls in by_module.items()]
    return lines + _wrap("__all__ += [", [f'"{n}"' for cls in by_module.values() for n in cls], "]")


# the enums whose value names src/trace.c prints
PRINTED_ENUMS = ("ncclRedOp_t",)


def gen_enum_names(enums: list[Enum], types: list[DType]) -> str:
    out = ["/* Generated by tools/gen_types.py from src/enums.def and src/dtypes.def.",
           " * Do not edit. */",
           "/* The names the trace prints of the values of an enum (up to its count,",
           " * N4P_COUNT), lower-case, and of the data types, as arrays name them:",
           " * N4P_NAMES_<C type>, the initializers of an array indexed by value. */",
           "#ifndef NCCL4PY_ENUM_NAMES_H", "#define NCCL4PY_ENUM_NAMES_H", ""]
    # data types under the names arrays give them (float32, float8_e4m3fn), as
    # every message does
    printed = {"ncclDataType_t": [(f"nccl{t.name}", t.array_name) for t in types]}
    for e in (e for e in enums if e.ctype in PRINTED_ENUMS):
        counts = [i for i, m in enumerate(e.members) if m.count]
        if not counts:
            raise SystemExit(f"enums.def: {e.ctype} has no N4P_COUNT to print names up to")
        printed[e.ctype] = [(m.cname, m.pyname) for m in e.members[:counts[0]]]
    for ctype in sorted(printed):
        names = [f'    [{cname}] = "{name.lower()}"' for cname, name in printed[ctype]]
        out += [f"#define N4P_NAMES_{ctype} \\", ", \\\n".join(names), ""]
    out += ["#endif /* NCCL4PY_ENUM_NAMES_H */", ""]
    return "\n".join(out)


# ------------------------------------------------------------------ structs

# field kind -> (Python type of the stub, getter conversion of nccl.core)
KINDS = {"SIZE": "int", "U32": "int", "I32": "int", "U8": "int", "F32": "float",
         "CSTR": "str", "PTR": "int", "U64": "int", "BOOLS": "tuple[bool, ...]",
         "U8I": "int", "U8X4": "tuple[int, ...]", "PTRX4": "tuple[int, ...]",
         "SUB": "_Struct"}  # SUB: the class of the field's C type
# C enum types of fields -> the nccl.core enum a property returns
ENUMS = {"ncclGinType_t": "decode_gin_type"}  # the decoder of each enum field


@dataclass
class Field:
    ctype: str
    cname: str
    pyname: str
    kind: str
    offset: int
    initial: str  # what a new struct holds, a C expression
    api: str      # "-", "BOOL[(type)]", "STR", "INT(lo, hi[, type])", "INDEX", "ARG(name[, default])", "PROP"

    @property
    def api_kind(self) -> str:
        return self.api.split("(", 1)[0]

    @property
    def api_args(self) -> list[str]:
        inner = self.api.partition("(")[2].rstrip(")")
        return [x.strip() for x in inner.split(",")] if inner else []


@dataclass
class Struct:
    ctype: str
    pyname: str
    kind: str
    picklable: bool
    fields: list[Field] = field(default_factory=list)
    size: int | None = None  # None: opaque (no fields)
    # N4P_FIELD_BEFORE: (lo, hi) -> {field: offset} of the older layouts
    older: dict[tuple[int, int], dict[str, int]] = field(default_factory=dict)
    union: bool = False  # N4P_UNION: every field at offset 0, one of them set
    initializer: str | None = None  # N4P_INITIALIZER: nccl.h's macro of a new struct


def parse_structs(path: Path = SRC / "structs.def") -> list[Struct]:
    structs: list[Struct] = []
    for macro, a in macro_calls(path):
        if macro in ("N4P_STRUCT", "N4P_OPAQUE", "N4P_UNION"):
            structs.append(Struct(a[0], a[1], a[2], a[3] == "1", union=macro == "N4P_UNION"))
        elif macro == "N4P_FIELD":
            t, ctype, cname, pyname, kind, offset, initial, api = a
            if t != structs[-1].ctype or kind not in KINDS:
                raise SystemExit(f"{path}: bad field {a}")
            structs[-1].fields.append(Field(ctype, cname, pyname, kind, int(offset), initial, api))
        elif macro == "N4P_INITIALIZER":
            s = next((s for s in structs if s.ctype == a[0] and s.fields), None)
            if s is None:
                raise SystemExit(f"{path}: N4P_INITIALIZER of no struct with fields {a}")
            s.initializer = a[1]
        elif macro == "N4P_STRUCT_END":
            structs[-1].size = int(a[1])
        elif macro == "N4P_FIELD_BEFORE":
            s = next(s for s in structs if s.ctype == a[0])
            if a[3] not in {f.pyname for f in s.fields}:
                raise SystemExit(f"{path}: N4P_FIELD_BEFORE of an unknown field {a}")
            s.older.setdefault((int(a[1]), int(a[2])), {})[a[3]] = int(a[4])
    by_ctype = {s.ctype: s.pyname for s in structs}
    for s in structs:
        for f in s.fields:
            if f.kind == "SUB" and f.ctype not in by_ctype:
                raise SystemExit(f"{path}: {s.ctype}.{f.cname} is not a struct of the table")
    return structs


def _wrap(head: str, items: list[str], tail: str, width: int = 99) -> list[str]:
    """head + comma-separated items + tail, wrapped under the opening bracket."""
    lines, cur = [], head
    pad = " " * len(head)
    for i, item in enumerate(items):
        piece = item + (", " if i < len(items) - 1 else tail)
        if len(cur) + len(piece.rstrip()) > width and cur.strip():
            lines.append(cur.rstrip())
            cur = pad
        cur += piece
    return lines + [cur]


def _struct(structs: list[Struct], pyname: str) -> Struct:
    return next(s for s in structs if s.pyname == pyname)


# api kind of an NCCLConfig / NCCLCollConfig field -> the type nccl.core
# annotates it with, unless the api names another one (its last argument:
# BOOL(int), INT(0, -, CTAPolicy)); EVENT(name): the field holds the handle of
# the event argument `name`
CONFIG_TYPES = {"BOOL": "bool", "STR": "str", "INT": "int", "EVENT": "NcclEventSpec"}
# the range of a C kind, where NCCLCollConfig's INT bound is "-"
KIND_RANGES = {"I32": ("-2**31", "2**31 - 1"), "U64": ("0", "2**64 - 1")}


@dataclass
class ApiField:
    """A field of a struct that nccl.core exposes as a dataclass field."""
    field: Field
    name: str                   # the dataclass field
    typ: str                    # its annotation (and None)
    lo: str | None = None       # INT: the bounds ("-": none)
    hi: str | None = None
    enum: str | None = None     # INT: an enum whose members pass whatever the bounds


def _api_fields(structs: list[Struct], pyname: str) -> list[ApiField]:
    """The fields of struct ``pyname`` that nccl.core exposes, in struct order."""
    out = []
    for f in _struct(structs, pyname).fields:
        if f.api_kind not in CONFIG_TYPES:
            continue
        bounds = f.api_args[:2] if f.api_kind == "INT" else []
        named = f.api_args[len(bounds):]
        if len(named) > 1 or (f.api_kind == "INT" and len(bounds) != 2) \
                or (f.api_kind == "EVENT" and not named):
            raise SystemExit(f"structs.def: bad api {f.api} of {pyname}.{f.pyname}")
        if f.api_kind == "EVENT":
            out.append(ApiField(f, named[0], CONFIG_TYPES["EVENT"]))
            continue
        a = ApiField(f, f.pyname, named[0] if named else CONFIG_TYPES[f.api_kind])
        if f.api_kind == "INT":
            a.lo, a.hi = bounds
            a.enum = named[0] if named else None
        out.append(a)
    return out


def _none(bound: str | None) -> str:
    return "None" if bound == "-" else str(bound)


def gen_config_fields(structs: list[Struct]) -> list[str]:
    lines = ["# NCCLConfig: field -> check (\"bool\",), (\"str\",) or (\"int\", lo, hi[, enum])",
             "# (None: no bound; an enum's members are accepted as well)",
             "_CONFIG_CHECKS: dict[str, tuple[Any, ...]] = {"]
    for a in _api_fields(structs, "Config"):
        kind = a.field.api_kind
        enum = f", {a.enum}" if a.enum else ""
        check = (f'("int", {_none(a.lo)}, {_none(a.hi)}{enum})' if kind == "INT"
                 else f'("{kind.lower()}",)')
        lines.append(f'    "{a.name}": {check},')
    lines.append("}")
    args = [(f.api_args[0], f.pyname) for f in _struct(structs, "WaitSignalDesc").fields]
    lines.append("# WaitSignalDesc: (its field, the ncclWaitSignalDesc_t field)")
    lines += _wrap("_WAIT_SIGNAL_FIELDS = (", [f'("{a}", "{c}")' for a, c in args], ")")
    return lines


def gen_config_class(structs: list[Struct], pyname: str = "Config") -> list[str]:
    """The dataclass fields of NCCLConfig / NCCLCollConfig (None: unset)."""
    return [f"{a.name}: {a.typ} | None = None" for a in _api_fields(structs, pyname)]


def gen_coll_config_fields(structs: list[Struct]) -> list[str]:
    lines = ["# NCCLCollConfig: field -> (the CollConfig field, check): \"int\", lo, hi",
             "# (out of range: OverflowError), \"bool\", \"str\" or \"event\" (an NcclEventSpec",
             "# whose handle the field holds)",
             "_COLL_FIELDS: dict[str, tuple[Any, ...]] = {"]
    for a in _api_fields(structs, "CollConfig"):
        kind = a.field.api_kind
        if kind == "INT":
            lo, hi = (KIND_RANGES[a.field.kind][i] if b == "-" else b
                      for i, b in enumerate((a.lo, a.hi)))
            check = f'"int", {lo}, {hi}'
        else:
            check = f'"{kind.lower()}"'
        lines.append(f'    "{a.name}": ("{a.field.pyname}", {check}),')
    return lines + ["}"]


def gen_dev_fields(structs: list[Struct]) -> list[str]:
    dev = [f.pyname for f in _struct(structs, "DevCommRequirements").fields if f.api_kind == "INDEX"]
    lines = ["# NCCLDevCommRequirements: the struct fields it may set (the struct checks each range)"]
    return lines + _wrap("_DEV_FIELDS = (", [f'"{n}"' for n in dev], ")")


def _arg_fields(s: Struct) -> list[Field]:
    """The fields of s that a dataclass of nccl.core has (ARG(name[, default]))."""
    return [f for f in s.fields if f.api_kind == "ARG"]


def gen_arg_class(fields: list[Field]) -> list[str]:
    """The dataclass fields of ARG struct fields, those without a default
    first; a default None makes the field optional."""
    lines = []
    for f in sorted(fields, key=lambda f: len(f.api_args) == 2):
        name, *default = f.api_args
        typ = KINDS[f.kind] + (" | None" if default == ["None"] else "")
        lines.append(f"{name}: {typ}" + (f" = {default[0]}" if default else ""))
    return lines


def gen_wait_signal_fields(structs: list[Struct]) -> list[str]:
    return gen_arg_class(_arg_fields(_struct(structs, "WaitSignalDesc")))


def _vendor_parts(structs: list[Struct]) -> list[tuple[Field, Struct]]:
    """(the ConfigExt field, its struct) of the parts of a vendor option."""
    by_ctype = {s.ctype: s for s in structs}
    return [(f, by_ctype[f.ctype]) for f in _struct(structs, "ConfigExt").fields if f.kind == "SUB"]


def gen_vendor_option(structs: list[Struct]) -> list[str]:
    """VendorOption's dataclass fields: the ARG fields of ConfigExt's parts."""
    return gen_arg_class([f for _, s in _vendor_parts(structs) for f in _arg_fields(s)])


def gen_vendor_fields(structs: list[Struct]) -> list[str]:
    lines = ["# VendorOption -> ConfigExt: (its field, the ConfigExt part, the field of that,",
             "# the type of its value) of the key (all set) and of the value (a union: one set)"]
    for label, union in (("_VENDOR_KEY", False), ("_VENDOR_VALUES", True)):
        items = [f'("{f.api_args[0]}", "{part.pyname}", "{f.pyname}", "{KINDS[f.kind]}")'
                 for part, s in _vendor_parts(structs) if s.union == union
                 for f in _arg_fields(s)]
        lines += _wrap(f"{label}: tuple[tuple[str, str, str, str], ...] = (", items, ")")
    return lines


def gen_comm_properties(structs: list[Struct]) -> list[str]:
    lines = []
    for f in _struct(structs, "CommProperties").fields:
        if f.api_kind != "PROP":
            continue
        get = f"self._properties().{f.pyname}"
        if f.kind == "U8":
            get = f"bool({get})"
        elif f.ctype in ENUMS:
            get = f"{ENUMS[f.ctype]}({get})"
        lines.append(f"{f.pyname} = property(lambda self: {get})")
    return lines


# NCCLCommProperties: a struct field exposed under another name and as what
CORE_PROPERTIES = {"gin_support": ("available_gin_types", "gin_set")}
# conversion of a property value -> the annotation of its NCCLCommProperties field
PROPERTY_TYPES = {"int": "int", "bool": "bool", "gin": "Any", "conn": "NcclGinConnectionType",
                  "gin_set": "frozenset"}


# C enum types of CommProperties fields -> their conversion
ENUM_CONVERSIONS = {"ncclGinType_t": "gin", "ncclGinConnectionType_t": "conn"}


def _property_conversion(f: Field) -> str:
    return "bool" if f.kind == "U8" else ENUM_CONVERSIONS.get(f.ctype, "int")


def gen_properties_fields(structs: list[Struct], oldest_known: int) -> list[str]:
    """NCCLCommProperties' fields: every field of CommProperties past the
    header, those beyond the oldest layout a library reports optional."""
    decl, table = [], []
    for f in _struct(structs, "CommProperties").fields:
        if f.offset < 16:
            continue
        name, convert = CORE_PROPERTIES.get(f.pyname, (f.pyname, _property_conversion(f)))
        optional = f.offset >= oldest_known
        kind = PROPERTY_TYPES[convert]
        decl.append(f"{name}: {kind} | None = None" if optional else f"{name}: {kind}")
        table.append(f'("{name}", "{f.pyname}", "{convert}"),')
    return (decl + ["", "# (field, CommProperties field, conversion), in the struct's order",
                    "_FIELDS: ClassVar[tuple[tuple[str, str, str], ...]] = ("]
            + ["    " + t for t in table] + [")"])


def oldest_layout(path: Path, ctype: str) -> int:
    """The fewest bytes of ``ctype`` any library layout (N4P_LAYOUT) knows."""
    return min(int(a[4]) for m, a in macro_calls(path) if m == "N4P_LAYOUT" and a[0] == ctype)


def _pyi_field(f: Field) -> list[str]:
    note = f"  # {f.ctype} {f.cname}, offset {f.offset}"
    if f.kind == "CSTR":
        return ["@property",
                f"def {f.pyname}(self) -> str: ...{note}",
                f"@{f.pyname}.setter",
                f"def {f.pyname}(self, value: str | None) -> None: ..."]
    if f.kind == "SUB":
        return [f"{f.pyname}: {_SUB_CLASSES[f.ctype]}{note}"]
    return [f"{f.pyname}: {KINDS[f.kind]}{note}"]


_SUB_CLASSES: dict[str, str] = {}  # C type -> class, filled by render_pyi_structs


def render_pyi_structs(structs: list[Struct] | None = None) -> str:
    """The struct classes of nccl/_nccl.pyi (they derive from its _Struct)."""
    out = []
    structs = structs if structs is not None else parse_structs()
    _SUB_CLASSES.update({s.ctype: s.pyname for s in structs})
    for s in structs:
        size = f"{s.size} bytes" if s.size is not None else "opaque bytes"
        out.append(f"class {s.pyname}(_Struct):")
        out.append(f'    """``{s.ctype}`` ({size})."""')
        if s.fields:
            out.append("")
        for f in s.fields:
            out += ["    " + line for line in _pyi_field(f)]
        out.append("")
    return "\n".join(out)


# -------------------------------------------------------------- collectives


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


def parse_collectives(path: Path = SRC / "collectives.def") -> tuple[list[Coll], dict[str, str]]:
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
    return _wrap("_SAME_COUNT = {", [f'"{m}"' for m in same_count(colls)], "}")


def _rccl_only(path: Path = SRC / "nccl_api.def") -> set[str]:
    """The library functions the API table marks RCCL-only."""
    sys.path.insert(0, str(ROOT / "tools"))
    import gen_api

    return {e.name for e in gen_api.parse_table(path) if e.since == "rccl"}


def gen_rccl_only(colls: list[Coll], rccl_only: set[str]) -> list[str]:
    """The Communicator methods whose library function only RCCL has."""
    pairs = [f'"{c.method}": "{c.fn}"' for c in colls if c.fn in rccl_only]
    return _wrap("_RCCL_ONLY = {", pairs, "}")


def _para(text: str, indent: str = "", hang: str = "") -> list[str]:
    import textwrap

    return textwrap.wrap(text, 79, initial_indent=indent, subsequent_indent=hang or indent)


def _raises_para(text: str) -> list[str]:
    return _para(text, "    ", "        ")


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
    pieces: list[str | list[str]] = [[text_signature(c), "--", ""] + _para(c.summary)
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
            parts[a.role] = _para(f"{a.keyword}: {a.doc}.", "    ", "        ")
    for rule, text in rules.items():
        parts[rule] = [""] + _para("Buffers: " + text)
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
    out = ["/* Generated by tools/gen_types.py from src/collectives.def.  Do not edit. */",
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
        out += _wrap(f"    def {c.method}(", params, ") -> None: ...")
    return "\n".join(out) + "\n"


# -------------------------------------------------------- generated blocks

BEGIN = re.compile(r"^(?P<indent>[ \t]*)# --- generated by tools/gen_types\.py: (?P<name>[\w ]+) ---$")


def _end(name: str) -> str:
    return f"# --- end of generated {name} ---"


def replace_blocks(text: str, blocks: dict[str, list[str]], path: Path) -> str:
    """text with the body of every generated block replaced."""
    lines = text.splitlines(keepends=True)
    out, i, seen = [], 0, set()
    while i < len(lines):
        out.append(lines[i])
        m = BEGIN.match(lines[i].rstrip("\n"))
        i += 1
        if not m:
            continue
        name, indent = m.group("name"), m.group("indent")
        if name not in blocks:
            raise SystemExit(f"{path}: unknown generated block {name!r}")
        while i < len(lines) and lines[i].strip() != _end(name):
            i += 1
        if i == len(lines):
            raise SystemExit(f"{path}: generated block {name!r} has no end marker")
        out += [(indent + b).rstrip() + "\n" for b in blocks[name]]
        out.append(lines[i])
        i += 1
        seen.add(name)
    missing = set(blocks) - seen
    if missing:
        raise SystemExit(f"{path}: missing generated blocks {sorted(missing)}")
    return "".join(out)


def generated(root: Path = ROOT) -> dict[Path, str]:
    """Every generated file (or file with generated blocks) and its content."""
    types, bool_as = parse_dtypes(root / "src" / "dtypes.def")
    structs = parse_structs(root / "src" / "structs.def")
    colls, rules = parse_collectives(root / "src" / "collectives.def")
    enums = parse_enums(root / "src" / "enums.def")
    rccl_only = _rccl_only(root / "src" / "nccl_api.def")
    constants = parse_constants(root / "src" / "enums.def")
    blocks: dict[str, dict[str, list[str]]] = {
        "nccl/_enums.py": {"enums": gen_enum_classes(enums),
                           "DataType": gen_enum_members(types, upper=False)
                           + [f"NumTypes = {len(types)}"]},
        "nccl/_dtypes.py": {"data types": gen_dtype_table(types, bool_as)},
        "nccl/core/typing.py": {"NcclDataType": gen_enum_members(types, upper=True),
                                "constants": gen_dtype_constants(types)},
        "nccl/core/config.py": {"fields": gen_config_fields(structs),
                                "NCCLConfig": gen_config_class(structs),
                                "WaitSignalDesc": gen_wait_signal_fields(structs)},
        "nccl/core/coll_config.py": {"fields": gen_coll_config_fields(structs),
                                     "vendor fields": gen_vendor_fields(structs),
                                     "VendorOption": gen_vendor_option(structs),
                                     "NCCLCollConfig": gen_config_class(structs, "CollConfig")},
        "nccl/core/requirements.py": {"fields": gen_dev_fields(structs)},
        "nccl/trace.py": {"same count": gen_same_count(colls)},
        "nccl/bench/collectives.py": {"rccl only": gen_rccl_only(colls, rccl_only)},
        "nccl/core/communicator.py": {"properties": gen_comm_properties(structs)},
        "nccl/core/properties.py": {"fields": gen_properties_fields(
            structs, oldest_layout(root / "src" / "structs.def", "ncclCommProperties_t"))},
        # the type stubs: tools/gen_api.py owns the functions' part of the same file
        "nccl/_nccl.pyi": {"struct classes": render_pyi_structs(structs).splitlines(),
                           "collective methods": [
                               line[4:] for line in render_pyi_communicator(colls).splitlines()]},
    }
    for rel, core_blocks in gen_core_enums(enums).items():
        blocks.setdefault(rel, {}).update(core_blocks)
    blocks["nccl/core/__init__.py"] = {"enum classes": gen_core_package(enums)}
    blocks["nccl/core/constants.py"]["values"] = gen_constant_values(constants)
    uid = next(c for c in constants if c.cname == "NCCL_UNIQUE_ID_BYTES")
    blocks["nccl/_launch/uniqueid.py"] = {"unique id size": [f"UNIQUE_ID_BYTES = {uid.python}"]}
    out = {root / "src" / "coll_docs.h": gen_coll_docs(colls, rules, rccl_only),
           root / "src" / "enum_names.h": gen_enum_names(enums, types),
           root / "src" / "nccl_constants.h": gen_constants_header(constants, structs)}
    for rel, b in blocks.items():
        path = root / rel
        out[path] = replace_blocks(path.read_text(), b, path)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="exit 1 if a generated part is stale")
    ns = ap.parse_args(argv)
    stale = []
    for path, text in generated().items():
        if not path.exists() or path.read_text() != text:
            stale.append(path.relative_to(ROOT))
            if not ns.check:
                path.write_text(text)
    if ns.check and stale:
        print(f"stale (run {SELF}): " + ", ".join(map(str, stale)), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
