"""The enum table (src/enums.def): C and Python are derived from it, a member
added to it reaches every output, and its values are NCCL's own."""
from __future__ import annotations

import enum
import importlib
import inspect
import re
import subprocess

import pytest

import gen
from gen import enums as gen_enums
from conftest import REAL_NCCL, ROOT, cc, nccl_header_text
import nccl.core
from nccl import _enums

ENUMS = gen_enums.parse_enums()
C_ENUMS = [e for e in ENUMS if e.c]
DEFINES = [e for e in ENUMS if e.defines]  # nccl.h's #define groups


class _Undocumented(enum.IntEnum):
    A = 0


# The docstring of an enum class that has none: None, or before Python 3.11
# the one enum supplies ("An enumeration.").
NO_DOC = _Undocumented.__doc__


def _copy_tree(root):
    """The tables and every generated file, copied under root."""
    inputs = [ROOT / table for table in gen.TABLES]
    for path in [*inputs, *gen.generated(ROOT)]:
        dest = root / path.relative_to(ROOT)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(path.read_text())
    return root


def _stale(root):
    out = gen.generated(root)
    return {p.relative_to(root).as_posix(): text for p, text in out.items() if p.read_text() != text}


def test_a_member_added_to_the_table_reaches_every_output(tmp_path):
    root = _copy_tree(tmp_path / "tree")
    assert _stale(root) == {}
    table = root / "src" / "enums.def"
    count = "N4P_COUNT(ncclRedOp_t, ncclNumOps,   NumOps,   5)"
    assert count in table.read_text()
    table.write_text(table.read_text().replace(
        count, "N4P_VALUE(ncclRedOp_t, ncclBitAnd, BitAnd, 5)\n"
               "N4P_COUNT(ncclRedOp_t, ncclNumOps, NumOps, 6)"))
    stale = _stale(root)
    assert set(stale) == {"nccl/_enums.py", "src/gen/enum_names.h", "nccl/core/typing.py"}
    assert "    BitAnd = 5\n    NumOps = 6\n" in stale["nccl/_enums.py"]
    assert '[ncclBitAnd] = "bitand"' in stale["src/gen/enum_names.h"]
    # nccl.core's NcclRedOp: a member, and a module-level name in __all__
    assert "    AVG = 4\n    BIT_AND = 5\n" in stale["nccl/core/typing.py"]
    assert "BIT_AND = NcclRedOp.BIT_AND\n" in stale["nccl/core/typing.py"]
    assert '"AVG", "BIT_AND"]' in stale["nccl/core/typing.py"]
    # an enum of its own: a class, and its name in __all__; a class of nccl.core
    table.write_text(table.read_text() + "N4P_ENUM(ncclNew_t, New, FLAG, \"\")\n"
                     "N4P_VALUE(ncclNew_t, ncclNewA, A, 1)\nN4P_ENUM_END(ncclNew_t)\n"
                     "N4P_CORE(ncclNew_t, enums, NcclNew, ENUM, \"\")\n")
    stale = _stale(root)
    assert "class New(IntFlag):\n    A = 1\n" in stale["nccl/_enums.py"]
    assert '"New"]' in stale["nccl/_enums.py"]
    assert "class NcclNew(IntEnum):\n    A = 1\n# --- end" in stale["nccl/core/enums.py"]
    # a #define: C declares it from the table itself, nccl.core.constants has the member
    last = "N4P_DEFINE(NCCL_WIN, NCCL_WIN_CFT_COUNTED,     CFT_COUNTED,     0x08, )"
    assert last in table.read_text()
    table.write_text(table.read_text().replace(
        last, last + "\nN4P_DEFINE(NCCL_WIN, NCCL_WIN_NEW, NEW, 0x10, New)"))
    text = _stale(root)["nccl/core/constants.py"]
    assert "    CFT_COUNTED = 0x08\n    NEW = 0x10\n" in text
    assert "    StrictOrdering = STRICT_ORDERING\n    New = NEW\n" in text


@pytest.mark.parametrize("line, error", [
    ("N4P_VALUE(ncclResult_t, ncclX, X, 1)", "outside its N4P_ENUM"),
    ("N4P_ENUM(ncclX_t, X, ENUM, \"\")\nN4P_VALUE(ncclX_t, ncclX, X, two)\nN4P_ENUM_END(ncclX_t)",
     "integer literals"),
    ("N4P_ENUM(ncclX_t, X, STRANGE, \"\")\nN4P_ENUM_END(ncclX_t)", "bad N4P_ENUM"),
    ("N4P_ENUM(ncclX_t, X, ENUM, \"\")\nN4P_VALUE(ncclX_t, ncclX, X, 1)", "no N4P_ENUM_END"),
    ("N4P_CORE_SKIP(ncclResult_t, Success)", "not after its N4P_CORE"),
    ("N4P_CORE(ncclRedOp_t, typing, NcclRedOp2, ENUM, \"\")", "not after its N4P_CORE"),
    ("N4P_CORE(ncclResult_t, enums, NcclResult, METHODS, \"A doc.\")", "bad N4P_CORE"),
    ("N4P_CORE_SKIP(ncclRedOp_t, Nothing)", "bad N4P_CORE_SKIP"),
    ("N4P_DEFINE(NCCL_WIN, NCCL_WIN_X, X, 0x10, )", "outside its N4P_DEFINES"),
    ("N4P_DEFINES(NCCL_X, X, DECODES, \"\")\nN4P_DEFINES_END(NCCL_X)", "bad N4P_DEFINES"),
    ("N4P_DEFINES(NCCL_X, X, FLAG, \"\")\nN4P_ENUM_END(NCCL_X)", "N4P_ENUM_END of no open"),
])
def test_bad_table_lines_are_refused(tmp_path, line, error):
    _refused(tmp_path, line, error, gen_enums.parse_enums)


def _refused(tmp_path, line, error, parse):
    """enums.def with `line` added makes `parse` stop with `error`."""
    table = tmp_path / "enums.def"
    table.write_text((ROOT / "src" / "enums.def").read_text() + line + "\n")
    with pytest.raises(SystemExit, match=error):
        parse(table)


@pytest.mark.parametrize("e", [e for e in ENUMS if not e.defines], ids=lambda e: e.pyname)
def test_every_member_reaches_python(e):
    cls = getattr(_enums, e.pyname)
    assert [(n, int(m)) for n, m in cls.__members__.items()] == [
        (m.pyname, m.number) for m in e.members]
    assert [b.__name__ for b in cls.__bases__] == gen_enums.ENUM_BASES[e.base].split(", ")
    if e.doc:  # cleaned, as below
        want = inspect.cleandoc("\n    ".join(e.doc.splitlines()))
        assert inspect.cleandoc(cls.__doc__ or "") == want
    assert e.pyname in _enums.__all__


@pytest.mark.parametrize("e", [e for e in ENUMS if e.core], ids=lambda e: e.core.name)
def test_every_member_reaches_nccl_core(e):
    """nccl.core's class of an enum: its module, members (nccl.core's
    spellings, the bindings' values), aliases, bases, docstring and names."""
    core = e.core
    module = importlib.import_module(f"nccl.core.{core.module}")
    cls = getattr(module, core.name)
    bindings = None if e.defines else getattr(_enums, e.pyname)
    assert (cls.__module__, cls.__qualname__) == (module.__name__, core.name)
    assert list(cls.__members__) == [n for n, _ in e.core_members()]
    own = [m for m in e.members if not m.count and m.pyname not in core.skip]
    assert own
    for m in own:
        member = cls[gen_enums.core_name(m.pyname)]
        assert int(member) == m.number
        if bindings is not None:
            assert int(bindings[m.pyname]) == m.number
        if core.aliases:
            assert cls[m.pyname] is member
        if m.alias:
            assert cls[m.alias] is member
        if core.constants:
            assert getattr(module, member.name) is member and member.name in module.__all__
    if core.base != "METHODS":
        assert [b.__name__ for b in cls.__bases__] == gen_enums.ENUM_BASES[core.base].split(", ")
        # compared cleaned: Python 3.13 strips a docstring's indentation when compiling
        want = inspect.cleandoc("\n    ".join(core.doc.splitlines())) if core.doc else NO_DOC
        assert (inspect.cleandoc(cls.__doc__) if cls.__doc__ else None) == want
    assert core.name in module.__all__ and core.name in nccl.core.__all__


def test_every_member_reaches_c(tmp_path):
    """The C header declares every enum and #define of the table with the
    table's values."""
    lines = ['#include <stdio.h>', '#include "nccl_api.h"', "int main(void) {"]
    for e in C_ENUMS:
        lines.append(f'printf("{e.ctype} %zu\\n", sizeof({e.ctype}));')
        lines += [f'printf("{m.cname} %lld\\n", (long long){m.cname});' for m in e.members]
    lines += [f'printf("{m.cname} %lld\\n", (long long){m.cname});'
              for e in DEFINES for m in e.members]
    src = tmp_path / "enums.c"
    src.write_text("\n".join(lines + ["return 0;", "}"]) + "\n")
    exe = tmp_path / "enums"
    subprocess.run([cc(), "-std=c11", "-Wall", "-Wextra", "-Werror", f"-I{ROOT / 'src'}",
                    str(src), "-o", str(exe)], check=True)
    out = dict(line.split() for line in subprocess.run(
        [str(exe)], capture_output=True, text=True, check=True).stdout.splitlines())
    for e in C_ENUMS:
        assert out[e.ctype] == "4"
        for m in e.members:
            assert int(out[m.cname]) == m.number, m.cname
    assert {m.cname: int(out[m.cname]) for e in DEFINES for m in e.members} == {
        m.cname: m.number for e in DEFINES for m in e.members}


def _header_enums(text):
    """{C type: {member: value}} of every `typedef enum` of NCCL's headers."""
    names = {"NCCL_CONFIG_UNDEF_INT": -2**31, "INT_MIN": -2**31, "INT_MAX": 2**31 - 1}
    out = {}
    for m in re.finditer(r"typedef\s+enum\s*\w*\s*\{([^}]*)\}\s*(\w+)\s*;", text):
        members, value = {}, -1
        for item in filter(None, (x.strip() for x in m.group(1).split(","))):
            name, _, expr = (x.strip() for x in item.partition("="))
            if expr:
                expr = re.sub(r"sizeof\s*\(\s*\w+\s*\)", "4", expr)
                value = eval(expr, {"__builtins__": {}}, {**names, **members})  # noqa: S307
            else:
                value += 1
            members[name] = value
        out[m.group(2)] = members
    return out


@REAL_NCCL
def test_values_are_those_of_the_real_nccl_headers():
    real = _header_enums(nccl_header_text())
    for e in C_ENUMS:
        ours = {m.cname: m.number for m in e.members}
        assert e.ctype in real, e.ctype
        # every member NCCL declares, with its value (ours may add RCCL's names)
        assert {n: ours.get(n) for n in real[e.ctype]} == real[e.ctype], e.ctype


# #defines whose prefix is a group's but are not members of it
NOT_IN_GROUP = {"NCCL_WIN_REQUIRED_ALIGNMENT"}


@REAL_NCCL
def test_define_groups_are_those_of_the_real_nccl_headers():
    """Every #define of a group's prefix in NCCL's headers is a member, with
    NCCL's value (and no member is one NCCL lacks)."""
    text = nccl_header_text()
    real = {n: int(v, 0) for n, v in re.findall(
        r"^\s*#\s*define\s+(NCCL_\w+)\s+\(?(0x[0-9A-Fa-f]+|\d+)\)?\s*$", text, flags=re.M)}
    assert DEFINES
    for e in DEFINES:
        ours = {m.cname: m.number for m in e.members}
        theirs = {n: v for n, v in real.items()
                  if n.startswith(e.ctype + "_") and n not in NOT_IN_GROUP}
        assert ours == theirs, e.ctype


CONSTANTS = gen_enums.parse_constants()


def test_every_constant_reaches_c_and_python(tmp_path):
    """nccl_api.h defines every N4P_CONSTANT with the table's value and C
    type; nccl.core.constants has the named ones, the public ones in
    __all__ (its own and nccl.core's)."""
    from nccl.core import constants

    assert CONSTANTS
    lines = ['#include <stdio.h>', '#include "nccl_api.h"', "int main(void) {"]
    for c in CONSTANTS:
        if c.value == "NULL":
            lines.append(f'printf("{c.cname} %d\\n", {c.cname} == (void *)0);')
        else:
            lines.append(f'printf("{c.cname} %.17g %d\\n", (double){c.cname}, '
                         f'(int)_Generic({c.cname}, float: 1, double: 2, default: 0));')
    src = tmp_path / "constants.c"
    src.write_text("\n".join(lines + ["return 0;", "}"]) + "\n")
    exe = tmp_path / "constants"
    subprocess.run([cc(), "-std=c11", "-Wall", "-Wextra", "-Werror", f"-I{ROOT / 'src'}",
                    str(src), "-o", str(exe)], check=True)
    out = {line.split()[0]: line.split()[1:] for line in subprocess.run(
        [str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()}
    for c in CONSTANTS:
        if c.value == "NULL":
            assert out[c.cname] == ["1"], c.cname
            continue
        value, floating = float(out[c.cname][0]), out[c.cname][1] == "1"
        assert value == c.number and floating == isinstance(c.number, float), c.cname
        named, public = gen_enums.CONSTANT_PLACES[c.where]
        if named:
            got = getattr(constants, c.pyname)
            assert got == c.number and type(got) is type(c.number), c.pyname
        assert (c.pyname in constants.__all__) == public
        assert (c.pyname in nccl.core.__all__) == public


def _header_defines(text):
    """{name: value text} of nccl.h's object-like #defines."""
    return {m.group(1): m.group(2).strip() for m in re.finditer(
        r"^\s*#\s*define\s+(NCCL_\w+)[ \t]+([^\n\\]+)$", text, flags=re.M)}


def _c_value(text):
    """A #define's value, as Python sees it (None: a null pointer)."""
    names = {"INT_MIN": -2**31, "INT_MAX": 2**31 - 1, "NULL": None}
    text = text.strip()
    while text.startswith("(") and text.endswith(")"):
        text = text[1:-1].strip()
    if text in names:
        return names[text]
    if gen_enums.FLOAT_LITERAL.fullmatch(text):
        return float(text.rstrip("fFlL"))
    assert gen_enums.INT_LITERAL.fullmatch(text), text
    return int(text.rstrip("uUlL"), 0)


@REAL_NCCL
def test_constants_are_those_of_the_real_nccl_header():
    """Every N4P_CONSTANT is a #define of NCCL's headers, with its value and
    kind (integer, floating, null pointer)."""
    real = _header_defines(nccl_header_text())
    for c in CONSTANTS:
        assert c.cname in real, c.cname
        theirs, ours = _c_value(real[c.cname]), _c_value(c.value)
        assert (theirs, type(theirs)) == (ours, type(ours)), c.cname


def test_a_constant_added_to_the_table_reaches_c_and_python(tmp_path):
    root = _copy_tree(tmp_path / "tree")
    table = root / "src" / "enums.def"
    last = "N4P_CONSTANT(NCCL_API_MAGIC,        NCCL_MAGIC,         0xcafebeefu, PY)"
    assert last in table.read_text()
    table.write_text(table.read_text().replace(
        last, last + "\nN4P_CONSTANT(NCCL_NEW, NCCL_NEW_PY, 0x10u, ALL)"
                     "\nN4P_CONSTANT(NCCL_NEW_C, -, 2.5f, C)"))
    stale = _stale(root)
    assert set(stale) == {"src/gen/nccl_constants.h", "nccl/core/constants.py"}
    assert "#define NCCL_NEW 0x10u\n#define NCCL_NEW_C 2.5f\n" in stale["src/gen/nccl_constants.h"]
    text = stale["nccl/core/constants.py"]
    assert "NCCL_MAGIC = 0xcafebeef\nNCCL_NEW_PY = 0x10\n__all__ +=" in text
    assert '"NCCL_UNDEF_FLOAT", "NCCL_NEW_PY"]' in text and "NCCL_NEW_C" not in text


@pytest.mark.parametrize("line, error", [
    ("N4P_CONSTANT(NCCL_X, X, 1, SOMEWHERE)", "bad N4P_CONSTANT"),
    ("N4P_CONSTANT(NCCL_X, -, 1, ALL)", "bad N4P_CONSTANT"),
    ("N4P_CONSTANT(NCCL_X, X, 1, C)", "bad N4P_CONSTANT"),
    ("N4P_CONSTANT(NCCL_X, X, 1)", "bad N4P_CONSTANT"),
    ("N4P_CONSTANT(NCCL_X, X, NULL, PY)", "a literal"),
    ("N4P_CONSTANT(NCCL_X, X, 1 + 2, ALL)", "a literal"),
])
def test_bad_constant_lines_are_refused(tmp_path, line, error):
    _refused(tmp_path, line, error, gen_enums.parse_constants)


@pytest.mark.parametrize("e", [e for e in ENUMS if e.core], ids=lambda e: e.core.name)
def test_every_nccl_core_class_is_named_where_the_table_says(e):
    """A class of nccl.core is in its module's __all__ and, imported, in that
    of every module N4P_CORE_ALSO names; nccl.core has it once."""
    cls = getattr(importlib.import_module(f"nccl.core.{e.core.module}"), e.core.name)
    for module in e.core.also:
        other = importlib.import_module(f"nccl.core.{module}")
        assert getattr(other, e.core.name) is cls and e.core.name in other.__all__
    assert nccl.core.__all__.count(e.core.name) == 1 and getattr(nccl.core, e.core.name) is cls


def test_a_class_added_to_the_table_is_named_by_its_modules_and_nccl_core(tmp_path):
    root = _copy_tree(tmp_path / "tree")
    table = root / "src" / "enums.def"
    table.write_text(table.read_text() + "N4P_ENUM(ncclNew_t, New, ENUM, \"\")\n"
                     "N4P_VALUE(ncclNew_t, ncclNewA, A, 1)\nN4P_ENUM_END(ncclNew_t)\n"
                     "N4P_CORE(ncclNew_t, enums, NcclNew, ENUM, \"\")\n")
    stale = _stale(root)
    assert '"NcclCftCap", "NcclNew"]\n' in stale["nccl/core/enums.py"]
    init = stale["nccl/core/__init__.py"]
    assert "from .enums import NcclCftCap, NcclCftTeamMode, NcclHostCftMode, NcclNew, " in init
    assert '"NcclCftCap", "NcclNew"]\n' in init
    # a class the typing module also has comes with it (nccl.core takes typing whole)
    table.write_text(table.read_text() + "N4P_CORE_ALSO(ncclNew_t, typing)\n")
    stale = _stale(root)
    assert "from .enums import NcclGinConnectionType, NcclGinType, NcclNew  # noqa: E402\n" \
        in stale["nccl/core/typing.py"]
    assert '"NcclGinConnectionType", "NcclNew"]\n' in stale["nccl/core/typing.py"]
    assert "nccl/core/__init__.py" not in stale


@pytest.mark.parametrize("line", ["N4P_CORE_ALSO(ncclGinType_t, enums)",
                                  "N4P_CORE_ALSO(ncclGinType_t, typing)",
                                  "N4P_CORE_ALSO(ncclResult_t, typing)"])
def test_bad_core_also_lines_are_refused(tmp_path, line):
    """Its own module, a module it is in already, an enum without a class of
    nccl.core."""
    _refused(tmp_path, line, "N4P_CORE_ALSO", gen_enums.parse_enums)
