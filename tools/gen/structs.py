"""src/structs.def, the structs and their fields: the fields and checks of
nccl.core's NCCLConfig, WaitSignalDesc (nccl/core/config.py),
NCCLCollConfig and VendorOption (nccl/core/coll_config.py),
NCCLDevCommRequirements (nccl/core/requirements.py), the properties of
Communicator (nccl/core/communicator.py) and the fields of
NCCLCommProperties (nccl/core/properties.py: those past the oldest
N4P_LAYOUT of the struct are None where the library does not report them),
and the struct classes of nccl/_nccl.pyi.  C includes the table itself
(nccl_api.h, structs.c); the initializers of the structs are written into
src/gen/nccl_constants.h (enums.py)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .common import ROOT, Output, macro_calls, wrap

TABLE = "src/structs.def"

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
    api: str      # "-", "BOOL[(type)]", "STR", "INT(lo, hi[, type])", "INDEX", "ARRAY(count)",
    #               "ARG(name[, default])", "PROP", "EVENT(name)"

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


def parse_structs(path: Path = ROOT / "src" / "structs.def") -> list[Struct]:
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
    lines += wrap("_WAIT_SIGNAL_FIELDS = (", [f'("{a}", "{c}")' for a, c in args], ")")
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
    fields = _struct(structs, "DevCommRequirements").fields
    dev = [f.pyname for f in fields if f.api_kind == "INDEX"]
    lines = ["# NCCLDevCommRequirements: the struct fields it may set (the struct checks each range)"]
    lines += wrap("_DEV_FIELDS = (", [f'"{n}"' for n in dev], ")")
    # ARRAY(count): a sequence of ints, held as int32 at the field's address, its length in count
    names = {f.pyname for f in fields}
    arrays = [(f.pyname, f.api_args[0]) for f in fields if f.api_kind == "ARRAY"]
    for name, count in arrays:
        if count not in names:
            raise ValueError(f"{TABLE}: ARRAY({count}) of {name}: no field {count}")
    lines.append("# ... and its arrays: field of the address -> field of the length")
    return lines + wrap("_DEV_ARRAYS = {", [f'"{n}": "{c}"' for n, c in arrays], "}")


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
        lines += wrap(f"{label}: tuple[tuple[str, str, str, str], ...] = (", items, ")")
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


def generate(root: Path = ROOT) -> Output:
    structs = parse_structs(root / TABLE)
    out = Output()
    out.block("nccl/core/config.py", "fields", TABLE, gen_config_fields(structs))
    out.block("nccl/core/config.py", "NCCLConfig", TABLE, gen_config_class(structs))
    out.block("nccl/core/config.py", "WaitSignalDesc", TABLE, gen_wait_signal_fields(structs))
    out.block("nccl/core/coll_config.py", "fields", TABLE, gen_coll_config_fields(structs))
    out.block("nccl/core/coll_config.py", "vendor fields", TABLE, gen_vendor_fields(structs))
    out.block("nccl/core/coll_config.py", "VendorOption", TABLE, gen_vendor_option(structs))
    out.block("nccl/core/coll_config.py", "NCCLCollConfig", TABLE,
              gen_config_class(structs, "CollConfig"))
    out.block("nccl/core/requirements.py", "fields", TABLE, gen_dev_fields(structs))
    out.block("nccl/core/communicator.py", "properties", TABLE, gen_comm_properties(structs))
    out.block("nccl/core/properties.py", "fields", TABLE, gen_properties_fields(
        structs, oldest_layout(root / TABLE, "ncclCommProperties_t")))
    out.block("nccl/_nccl.pyi", "struct classes", TABLE,
              render_pyi_structs(structs).splitlines())
    return out
