"""src/enums.def, the enums, groups of #defines and single #defines of
nccl.h: the classes of nccl/_enums.py and of nccl.core (nccl/core/enums.py,
nccl/core/typing.py, nccl/core/constants.py, the names of
nccl/core/__init__.py), the constants' values (nccl/core/constants.py,
nccl/_launch/uniqueid.py), the #defines of src/gen/nccl_constants.h (with
the structs' initializers of structs.def) and the names the trace prints of
the reduction ops (src/gen/enum_names.h; the data types' names are in
src/gen/dtype_table.h, dtypes.py).  C includes the
table itself (nccl_api.h declares the enums)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from . import structs as structs_table
from .common import ROOT, Output, c_header, c_string, macro_calls, module_names, wrap
from .structs import Struct

TABLE = "src/enums.def"

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


def parse_enums(path: Path = ROOT / "src" / "enums.def") -> list[Enum]:
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


def parse_constants(path: Path = ROOT / "src" / "enums.def") -> list[Constant]:
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
    out = [c_header(f"{TABLE} and {structs_table.TABLE}")
           .rstrip("\n"),
           "/* nccl.h's single #defines: sentinels, sizes and magic numbers. */",
           "#ifndef NCCL4PY_NCCL_CONSTANTS_H", "#define NCCL4PY_NCCL_CONSTANTS_H", "",
           "#include <limits.h>", "#include <stddef.h>", ""]
    out += [f"#define {c.cname} " + (f"({c.value})" if c.value.startswith("-") else c.value)
            for c in constants]
    for s in structs:
        if s.initializer is not None:  # the fields' initial values, in order
            out += ["", f"/* a new {s.ctype} */"]
            lines = wrap(f"#define {s.initializer} {{", [f.initial for f in s.fields], "}",
                          width=96)
            out += [line + " \\" for line in lines[:-1]] + lines[-1:]
    return "\n".join(out + ["", "#endif /* NCCL4PY_NCCL_CONSTANTS_H */", ""])


def gen_constant_values(constants: list[Constant]) -> list[str]:
    """The constants' names of nccl.core.constants, and the public ones added
    to __all__."""
    named = [c for c in constants if CONSTANT_PLACES[c.where][0]]
    public = [f'"{c.pyname}"' for c in named if CONSTANT_PLACES[c.where][1]]
    return [f"{c.pyname} = {c.python}" for c in named] + wrap("__all__ += [", public, "]")


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
    return lines + wrap("__all__ += [", [f'"{e.pyname}"' for e in enums], "]")


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
            blocks[f"{c.name} constants"] = module_names(c.name, [[n] for n, _ in members])
    for rel, blocks in out.items():
        module = rel.removeprefix("nccl/core/").removesuffix(".py")
        theirs = imports.get(module, {})
        head = [f"from .{m} import {', '.join(sorted(cls))}  # noqa: E402"
                for m, cls in theirs.items()]
        own = names.get(module, []) + [n for cls in theirs.values() for n in cls]
        head += wrap("__all__ += [", [f'"{n}"' for n in own], "]")
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
    return lines + wrap("__all__ += [", [f'"{n}"' for cls in by_module.values() for n in cls], "]")


# the enums whose value names src/trace.c prints
PRINTED_ENUMS = ("ncclRedOp_t",)


def gen_enum_names(enums: list[Enum]) -> str:
    out = [c_header(TABLE).rstrip("\n"),
           "/* The names the trace prints of the values of an enum (up to its count,",
           " * N4P_COUNT), lower-case: N4P_NAMES_<C type>, the initializers of an array",
           " * indexed by value.  The data types' names are in dtype_table.h. */",
           "#ifndef NCCL4PY_ENUM_NAMES_H", "#define NCCL4PY_ENUM_NAMES_H", ""]
    printed: dict[str, list[tuple[str, str]]] = {}
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


def generate(root: Path = ROOT) -> Output:
    enums = parse_enums(root / TABLE)
    constants = parse_constants(root / TABLE)
    structs = structs_table.parse_structs(root / structs_table.TABLE)
    out = Output()
    out.files["src/gen/enum_names.h"] = gen_enum_names(enums)
    out.files["src/gen/nccl_constants.h"] = gen_constants_header(constants, structs)
    out.block("nccl/_enums.py", "enums", TABLE, gen_enum_classes(enums))
    for rel, blocks in gen_core_enums(enums).items():
        for name, lines in blocks.items():
            out.block(rel, name, TABLE, lines)
    out.block("nccl/core/__init__.py", "enum classes", TABLE, gen_core_package(enums))
    out.block("nccl/core/constants.py", "values", TABLE, gen_constant_values(constants))
    uid = next(c for c in constants if c.cname == "NCCL_UNIQUE_ID_BYTES")
    out.block("nccl/_launch/uniqueid.py", "unique id size", TABLE,
              [f"UNIQUE_ID_BYTES = {uid.python}"])
    return out
