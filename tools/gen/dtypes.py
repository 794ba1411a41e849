"""src/dtypes.def, the NCCL data types: src/gen/dtype_table.h (the one table
of their sizes and names every C user reads: the extension and the host
backend), nccl/_enums.py's DataType, nccl/_dtypes.py's TABLE (names, sizes,
the parser of dtype arguments), MANTISSA_BITS and TESTS_NAMES,
nccl/core/typing.py's NcclDataType and its module-level names.  C includes
the table itself only for what is no name or size: the enum (nccl_api.h),
the DLPack codes (buffer.c) and the host backend's kernels (host/reduce.c)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .common import ROOT, Output, c_header, c_literal, macro_calls, module_names, wrap

TABLE = "src/dtypes.def"


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


def parse_dtypes(path: Path = ROOT / "src" / "dtypes.def") -> tuple[list[DType], int]:
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
    lines += wrap("TESTS_NAMES = (", [f'"{t.tests_name}"' for t in types], ")")
    return lines


def gen_dtype_constants(types: list[DType]) -> list[str]:
    return module_names("NcclDataType", [[n.upper() for n in [t.name, *t.aliases]]
                                          for t in types])


def gen_dtype_header(types: list[DType], bool_as: int) -> str:
    """src/gen/dtype_table.h: the row of each type, indexed by its value, and
    the accessor; the names are the ones messages print (docs/semantics.md)."""
    rows = [f"        [nccl{t.name}] = {{{t.size}, {c_literal('nccl' + t.name)}, "
            f"{c_literal(t.array_name)}, {c_literal(t.tests_name or '')}}},"
            for t in types]
    names = ", ".join(t.array_name for t in types)
    out = [c_header(TABLE).rstrip("\n"),
           "/* The data types: the one table of their sizes and names, which the",
           " * extension and the host backend both read.  A message or a record names",
           " * a type by its array name (docs/semantics.md). */",
           "#ifndef NCCL4PY_DTYPE_TABLE_H", "#define NCCL4PY_DTYPE_TABLE_H", "",
           "#include <stddef.h>", "", '#include "nccl_api.h" /* the enum: ncclInt8, ..., ncclNumTypes */', "",
           "typedef struct {",
           "    size_t size;            /* bytes per element */",
           "    const char *nccl_name;  /* the enum member: ncclFloat8e4m3 */",
           "    const char *array_name; /* NumPy's, ml_dtypes', torch's: float8_e4m3fn */",
           "    const char *tests_name; /* nccl-tests' (its -d option): f8e4m3 */",
           "} n4p_dtype_row;", "",
           f"/* arrays of bool travel as this type (nccl{types[bool_as].name}) */",
           f"#define N4P_DTYPE_BOOL_AS {bool_as}",
           "/* the array names in value order: the list of supported types messages give */",
           f"#define N4P_DTYPE_ARRAY_NAMES {c_literal(names)}", "",
           "/* The row of the ncclDataType_t value dtype; NULL for a value that is none. */",
           "static inline const n4p_dtype_row *",
           "n4p_dtype_row_of(int dtype)", "{",
           "    static const n4p_dtype_row rows[ncclNumTypes] = {",
           *rows,
           "    };",
           "    return dtype >= 0 && dtype < ncclNumTypes ? &rows[dtype] : NULL;",
           "}", "",
           "#endif /* NCCL4PY_DTYPE_TABLE_H */", ""]
    return "\n".join(out)


def generate(root: Path = ROOT) -> Output:
    types, bool_as = parse_dtypes(root / TABLE)
    out = Output()
    out.files["src/gen/dtype_table.h"] = gen_dtype_header(types, bool_as)
    out.block("nccl/_enums.py", "DataType", TABLE,
              gen_enum_members(types, upper=False) + [f"NumTypes = {len(types)}"])
    out.block("nccl/_dtypes.py", "data types", TABLE, gen_dtype_table(types, bool_as))
    out.block("nccl/core/typing.py", "NcclDataType", TABLE, gen_enum_members(types, upper=True))
    out.block("nccl/core/typing.py", "constants", TABLE, gen_dtype_constants(types))
    return out
