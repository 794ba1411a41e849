"""src/nccl_api.def, the NCCL / RCCL functions: the loader's table
(src/gen/api_table.h), the wrappers and their method table
(src/gen/wrappers.c, src/gen/api_wrappers.h), the host backend's checked
declarations (src/gen/host_api_decls.h), the typed functions of
nccl/_nccl.pyi and the RCCL-only names of nccl.bindings.rocm_extensions.
The recording stub and the no-op library are in .stub."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .common import ROOT, Output, c_header, c_literal

TABLE = "src/nccl_api.def"

# --------------------------------------------------------------------------
# parameter kinds

@dataclass(frozen=True)
class Kind:
    """What a parameter kind means for C, for Python and for the docs.

    role: "in" (converted from one Python argument), "array" (an input array
    whose length is another parameter, written name[len]), "out" (the library
    writes it: the wrapper returns it, or with `name?` the caller may pass
    its storage).
    """
    ctype: str                 # C type of the parameter
    role: str
    conv: str = ""             # in: the converter f(obj, name, &local) of a one-int argument
    local: str = ""            # in: the local's C type; out: the C type the library writes
    cast: str = ""             # in: cast of &local for the converter
    struct: str = ""           # the struct kind (N4P_S_*) of a struct passed by pointer
    nullable: bool = False     # in structs: None and 0 give NULL
    stamp: bool = False        # a versioned struct: the library gets a copy in its own layout
    addr: bool = False         # in structs: also any object with an int .ptr (not another struct's)
    box: str = ""              # out: C expression making the Python result of {v}
    zero: str = "0"            # out: the local's initial value
    pytype: str = "int"        # Python argument type (.pyi)
    ret: str = "int"           # out: Python result type (.pyi)
    doc: str = ""              # what the argument is
    one_int: bool = True       # in with conv: the Python argument is one int
    handle: str = ""           # out: the handle object kind (N4P_H_*) returned for it


_PTR = dict(conv="n4p_arg_ptr", cast="(void **)")
_ENUM = dict(conv="n4p_arg_int", local="int")


def _storage(ctype: str, what: str) -> Kind:
    """Caller storage of a struct the library fills: an address or an object
    with an int .ptr (a struct object)."""
    return Kind(ctype, "in", conv="n4p_arg_storage", local="void *", cast="(void **)",
                pytype="SupportsPtr | int", doc=f"storage for the {what}: an object with "
                "an int .ptr (a struct object) or its address")


def _value(ctype: str, conv: str, pytype: str, doc: str) -> Kind:
    """A struct passed by value."""
    return Kind(ctype, "in", conv=conv, local=ctype, pytype=pytype, doc=doc, one_int=False)


_TEAM_DOC = ("team (passed by value): a Team, a (n_ranks, rank, stride) tuple, an object "
             "with those attributes, or the address of an ncclTeam_t")
KINDS: dict[str, Kind] = {
    # one Python int each
    "cptr": Kind("const void*", "in", local="const void*", doc="address of the data to send", **_PTR),
    "ptr": Kind("void*", "in", local="void*", doc="address", **_PTR),
    "comm": Kind("ncclComm_t", "in", conv="n4p_arg_comm", cast="(void **)", local="ncclComm_t",
                 pytype="Comm | int", doc="communicator handle (a Comm or an int)"),
    "stream": Kind("cudaStream_t", "in", local="cudaStream_t",
                   doc="stream handle (0: the default stream)", **_PTR),
    "win": Kind("ncclWindow_t", "in", conv="n4p_arg_win", cast="(void **)", local="ncclWindow_t",
                pytype="Window | int", doc="window handle (a Window or an int)"),
    "param": Kind("ncclParamHandle_t", "in", local="ncclParamHandle_t",
                  doc="parameter handle (from param_bind)", **_PTR),
    "collconfig": Kind("const ncclCollConfig_t*", "in", struct="N4P_S_COLL_CONFIG", nullable=True,
                       stamp=True, addr=True, pytype="CollConfig | SupportsPtr | int | None",
                       doc="per-call config: a CollConfig, an object with an int .ptr, or an "
                           "address; None or 0 for none"),
    "encconfig": Kind("const ncclEncryptionConfig_t*", "in", struct="N4P_S_ENCRYPTION_CONFIG",
                      addr=True, pytype="EncryptionConfig | SupportsPtr | int",
                      doc="an EncryptionConfig, an object with an int .ptr, or an address"),
    "lsabar": _storage("ncclLsaBarrierHandle_t*", "LsaBarrierHandle"),
    "ginbar": _storage("ncclGinBarrierHandle_t*", "GinBarrierHandle"),
    "lla2a": _storage("ncclLLA2AHandle_t*", "LLA2AHandle"),
    "outbox": _storage("ncclGinOutboxHandle*", "GIN outbox handle (8 bytes)"),
    "inbox": _storage("ncclGinInboxA2AHandle*", "GIN all-to-all inbox handle (16 bytes)"),
    "resreq": _storage("ncclDevResourceRequirements_t*", "DevResourceRequirements"),
    "resreq2": _storage("ncclDevResourceRequirements*", "DevResourceRequirements"),
    "team": _value("ncclTeam_t", "n4p_arg_team", "TeamLike", _TEAM_DOC),
    "teamv": _value("ncclTeam", "n4p_arg_team", "TeamLike", _TEAM_DOC),
    "multimem": _value("ncclMultimemHandle_t", "n4p_arg_multimem", "MultimemLike",
                       "multimem handle (passed by value): an object with an int .mc_base_ptr "
                       "(a MultimemHandle), a (mc_base_ptr,) tuple, or the address of an "
                       "ncclMultimemHandle_t"),
    "cstr": Kind("const char*", "in", conv="n4p_arg_cstr", local="const char *", pytype="str | bytes",
                 doc="text (str, or bytes without NUL)", one_int=False),
    "size": Kind("size_t", "in", conv="n4p_arg_size", local="size_t", doc="int in [0, 2**64)"),
    "int": Kind("int", "in", conv="n4p_arg_int", local="int", doc="C int"),
    "uint": Kind("unsigned int", "in", conv="n4p_arg_uint", local="unsigned int",
                 doc="C unsigned int"),
    "dtype": Kind("ncclDataType_t", "in", doc="data type (DataType)", **_ENUM),
    "redop": Kind("ncclRedOp_t", "in", doc="reduction (RedOp, or an op made by "
                  "red_op_create_pre_mul_sum)", **_ENUM),
    "residence": Kind("ncclScalarResidence_t", "in", doc="where the scalar is (ScalarResidence)",
                      **_ENUM),
    "memstat": Kind("ncclCommMemStat_t", "in", doc="which statistic (CommMemStat)", **_ENUM),
    "result": Kind("ncclResult_t", "in", doc="status code (Result)", **_ENUM),
    "cftmode": Kind("ncclCftTeamMode_t", "in", doc="team shape (CftTeamMode)", **_ENUM),
    # other inputs
    "uid": Kind("ncclUniqueId", "in", pytype="UniqueId | Buffer | int",
                doc="unique id (passed by value): a UniqueId or 128 bytes, or their address"),
    "cuid_ptr": Kind("const ncclUniqueId*", "in", pytype="UniqueId | Buffer | int | None",
                     doc="unique id: a UniqueId or 128 bytes, or their address; None or 0 for "
                         "none"),
    "config": Kind("ncclConfig_t*", "in", struct="N4P_S_CONFIG", nullable=True, stamp=True,
                   pytype="Config | int | None",
                   doc="options: a Config or its address; None or 0 for the defaults"),
    "devreqs": Kind("const ncclDevCommRequirements_t*", "in", struct="N4P_S_DEV_COMM_REQUIREMENTS",
                    stamp=True,
                    pytype="DevCommRequirements | int",
                    doc="a DevCommRequirements or its address"),
    "cdevcomm": Kind("const ncclDevComm_t*", "in", struct="N4P_S_DEV_COMM",
                     pytype="DevComm | int", doc="a DevComm or its address"),
    # arrays (name[len])
    "uid_array": Kind("ncclUniqueId*", "array", pytype="Sequence[UniqueId | Buffer | int] | Buffer | int",
                      doc="unique ids: a sequence of them (UniqueId, 128 bytes or an address "
                          "each), or one buffer or address holding them all"),
    "sigdesc": Kind("ncclWaitSignalDesc_t*", "array", struct="N4P_S_WAIT_SIGNAL_DESC",
                    pytype="Sequence[WaitSignalDesc] | Buffer | int",
                    doc="descriptors: a sequence of WaitSignalDesc, or one buffer or address "
                        "holding them all"),
    "int_array": Kind("int*", "array", pytype="Sequence[int] | int | None",
                      doc="ints: a sequence (copied for the call), an address, or None"),
    "cint_array": Kind("const int*", "array", pytype="Sequence[int] | int | None",
                       doc="ints: a sequence (copied for the call), an address, or None"),
    "size_array": Kind("const size_t*", "array", pytype="Sequence[int] | int",
                       doc="size_t values: a sequence (copied for the call) or an address"),
    # written by the library
    "out_ptr": Kind("void**", "out", local="void *", zero="NULL", box="PyLong_FromVoidPtr({v})", doc="address"),
    "out_comm": Kind("ncclComm_t*", "out", local="ncclComm_t", zero="NULL", box="PyLong_FromVoidPtr((void *){v})",
                     ret="Comm", handle="N4P_H_COMM", doc="new communicator handle"),
    "out_win": Kind("ncclWindow_t*", "out", local="ncclWindow_t", zero="NULL",
                    box="PyLong_FromVoidPtr((void *){v})", ret="Window", handle="N4P_H_WINDOW",
                    doc="new window handle"),
    "out_param": Kind("ncclParamHandle_t*", "out", local="ncclParamHandle_t", zero="NULL",
                      box="PyLong_FromVoidPtr((void *){v})", doc="parameter handle"),
    "out_i8": Kind("int8_t*", "out", local="int8_t", box="PyLong_FromLong((long){v})", doc="int8"),
    "out_i16": Kind("int16_t*", "out", local="int16_t", box="PyLong_FromLong((long){v})",
                    doc="int16"),
    "out_i32": Kind("int32_t*", "out", local="int32_t", box="PyLong_FromLong((long){v})",
                    doc="int32"),
    "out_i64": Kind("int64_t*", "out", local="int64_t", box="PyLong_FromLongLong((long long){v})",
                    doc="int64"),
    "out_u8": Kind("uint8_t*", "out", local="uint8_t", box="PyLong_FromLong((long){v})",
                   doc="uint8"),
    "out_u16": Kind("uint16_t*", "out", local="uint16_t", box="PyLong_FromLong((long){v})",
                    doc="uint16"),
    "out_u32": Kind("uint32_t*", "out", local="uint32_t",
                    box="PyLong_FromUnsignedLong((unsigned long){v})", doc="uint32"),
    "out_leid": Kind("ncclCftLeId*", "out", local="ncclCftLeId",
                     box="PyLong_FromUnsignedLong((unsigned long){v})", doc="load/store endpoint id"),
    "out_size": Kind("size_t*", "out", local="size_t", box="PyLong_FromSize_t({v})",
                     doc="offset in bytes"),
    "out_cstr": Kind("const char**", "out", local="const char *", zero="NULL",
                     box="n4p_str_result({v})", ret="str", doc="text"),
    # written by the library, returned by hand-written wrappers (name[len]: len is
    # the out_int the library sets to their length)
    "out_bytes": Kind("void*", "out", ret="bytes", doc="the value's bytes"),
    "out_cstr_list": Kind("const char***", "out", ret="list[str]", doc="names"),
    "out_int": Kind("int*", "out", local="int", box="PyLong_FromLong((long){v})", doc="C int"),
    "out_result": Kind("ncclResult_t*", "out", local="ncclResult_t",
                       box="PyLong_FromLong((long){v})", doc="status code (Result)"),
    "out_redop": Kind("ncclRedOp_t*", "out", local="ncclRedOp_t", box="PyLong_FromLong((long){v})",
                      doc="new reduction op"),
    "out_u64": Kind("uint64_t*", "out", local="uint64_t",
                    box="PyLong_FromUnsignedLongLong((unsigned long long){v})", doc="uint64"),
    "uid_ptr": Kind("ncclUniqueId*", "out", struct="N4P_S_UNIQUE_ID", pytype="UniqueId | Buffer | int",
                    ret="UniqueId", doc="storage for the id: a UniqueId, a writable buffer of 128 "
                                        "bytes, or its address"),
    "props": Kind("ncclCommProperties_t*", "out", struct="N4P_S_COMM_PROPERTIES", stamp=True,
                  pytype="CommProperties | int", ret="CommProperties",
                  doc="storage: a CommProperties or its address"),
    "siminfo": Kind("ncclSimInfo_t*", "out", struct="N4P_S_SIM_INFO", pytype="SimInfo | int",
                    ret="SimInfo", doc="storage: a SimInfo or its address"),
    "devcomm_out": Kind("ncclDevComm_t*", "out", struct="N4P_S_DEV_COMM", pytype="DevComm | int",
                        ret="DevComm", doc="storage: a DevComm or its address"),
}
C_TYPES = {k: v.ctype for k, v in KINDS.items()}
RET_TYPES = {"status": "ncclResult_t", "cstr": "const char*", "int": "int", "void": "void",
             "team": "ncclTeam_t"}


@dataclass(frozen=True)
class Ret:
    """A return kind other than status: the stub's type, the docstring's
    line, the no-op library's body and the recording stub's (``{idx}``: the
    entry's index)."""
    pytype: str
    doc: str
    noop: tuple[str, ...]
    stub: tuple[str, ...]


RETURNS = {
    "cstr": Ret("str", "str: the library's text (decoded as UTF-8; '' for NULL).",
                ('return "no-op library";',), ('return "stub last error";',)),
    "int": Ret("int", "int: the function's result.", ("return 0;",),
               ("return STUB_OUT_INT + {idx};",)),
    "void": Ret("None", "None.", (), ()),
    "team": Ret("Team", "Team: the team (n_ranks, rank, stride), returned by value.",
                ("ncclTeam_t t = {1, 0, 1};", "return t;"),
                ("ncclTeam_t t = {{STUB_OUT_INT + {idx}, {idx}, 3}};", "return t;")),
}
FLAGS = {"host", "hand"}
# Kinds a wrapper converts from one Python int: their entries' wrappers are
# the simplest generated shape (and the hot path of nccl.bindings).
SIMPLE_KINDS = {k for k, v in KINDS.items() if v.conv and v.one_int}


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


@dataclass
class Param:
    kind: str
    name: str
    optional_out: bool = False   # name?
    length: str = ""             # name[len]
    default: str = ""            # name=None

    @property
    def ctype(self) -> str:
        return C_TYPES[self.kind]

    @property
    def k(self) -> Kind:
        return KINDS[self.kind]

    @property
    def pyname(self) -> str:
        return snake(self.name)

    @property
    def in_python(self) -> bool:
        """Whether the wrapper takes it as an argument."""
        return self.k.role != "out" or self.optional_out


@dataclass
class Entry:
    symbols: list[str]
    pyname: str
    since: str
    ret: str
    params: list[Param]
    flags: set[str]
    summary: str = ""

    @property
    def name(self) -> str:
        return self.symbols[0]

    @property
    def hand(self) -> bool:
        return "hand" in self.flags

    @property
    def host(self) -> bool:
        return "host" in self.flags

    @property
    def simple(self) -> bool:
        """A generated wrapper taking one int per parameter and returning None."""
        return (self.ret == "status" and not self.hand
                and all(p.kind in SIMPLE_KINDS for p in self.params))

    @property
    def py_params(self) -> list[Param]:
        return [p for p in self.params if p.in_python]

    @property
    def optional_out(self) -> Param | None:
        return next((p for p in self.params if p.optional_out), None)

    @property
    def returned(self) -> list[Param]:
        """Out-parameters the wrapper returns (without caller storage and
        without the lengths of other outs)."""
        lengths = {p.length for p in self.params if p.k.role == "out"}
        return [p for p in self.params if p.k.role == "out" and not p.optional_out
                and p.name not in lengths]

    def proto(self, fname: str) -> str:
        ps = ", ".join(f"{p.ctype} {p.name}" for p in self.params) or "void"
        return f"{RET_TYPES[self.ret]} {fname}({ps})"


_PARAM = re.compile(r"^(\w+)\s+(\w+)(\?)?(?:\[(\w+)\])?(?:=(None))?$")


def parse_entry(line: str, where: str) -> Entry:
    cols = [c.strip() for c in line.split("|")]
    if len(cols) != 7:
        raise SystemExit(f"{where}: expected 7 columns, got {len(cols)}")
    syms, pyname, since, ret, flags, params, summary = cols
    if ret not in RET_TYPES:
        raise SystemExit(f"{where}: unknown return kind {ret!r}")
    fl = set(flags.split()) - {"-"}
    if fl - FLAGS:
        raise SystemExit(f"{where}: unknown flags {sorted(fl - FLAGS)}")
    if not summary:
        raise SystemExit(f"{where}: the summary column is empty")
    plist = []
    for p in filter(None, (x.strip() for x in params.split(","))):
        m = _PARAM.match(p)
        if m is None or m.group(1) not in KINDS:
            raise SystemExit(f"{where}: bad parameter {p!r}")
        plist.append(Param(m.group(1), m.group(2), bool(m.group(3)), m.group(4) or "",
                           m.group(5) or ""))
    e = Entry(syms.split("/"), pyname, since, ret, plist, fl, summary)
    _validate(e, where)
    return e


def _validate(e: Entry, where: str) -> None:
    names = [p.name for p in e.params]
    opts = [p for p in e.params if p.optional_out]
    if len(opts) > 1:
        raise SystemExit(f"{where}: at most one optional out-argument")
    if (opts or e.returned) and e.ret != "status":
        raise SystemExit(f"{where}: out-arguments need a status return")
    pys = e.py_params
    for i, p in enumerate(pys):
        if p.default and any(not q.default for q in pys[i + 1:]):
            raise SystemExit(f"{where}: {p.name}=None must be trailing")
    for p in e.params:
        if p.optional_out and p.k.role != "out":
            raise SystemExit(f"{where}: {p.name}? is not an out kind")
        if p.k.role == "out" and p.k.struct and not p.optional_out and not e.hand:
            raise SystemExit(f"{where}: a struct out-argument is written {p.name}?")
        if p.length and p.length not in names:
            raise SystemExit(f"{where}: {p.name}[{p.length}]: no parameter {p.length}")
        if p.k.role == "array" and not p.length and not e.hand:
            raise SystemExit(f"{where}: the array {p.name} needs its length, {p.name}[len]")
        want = ("int", "out_int") if p.k.role == "out" else ("int",)
        if p.length and next(q for q in e.params if q.name == p.length).kind not in want:
            raise SystemExit(f"{where}: the length {p.length} must be an int parameter")
    if opts and e.ret == "status" and len(e.returned) > 0:
        raise SystemExit(f"{where}: an optional out-argument excludes other returned outs")


def parse_table(path: Path | None = None) -> list[Entry]:
    """The entries of the table (the tree's own by default)."""
    path = ROOT / TABLE if path is None else path
    entries = []
    for lineno, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if line:
            entries.append(parse_entry(line, f"{path}:{lineno}"))
    return entries




HEADER = c_header(TABLE)


# --------------------------------------------------------------------------
# C: the table header, the wrappers and the method table

def gen_table_h(entries: list[Entry]) -> str:
    out = [HEADER, "#ifndef NCCL4PY_GEN_API_TABLE_H", "#define NCCL4PY_GEN_API_TABLE_H",
           '#include "../nccl_api.h"', "", f"#define N4P_API_COUNT {len(entries)}", "",
           "enum {"]
    out += [f"    N4P_IDX_{e.name}," for e in entries]
    out += ["};", ""]
    for e in entries:
        ps = ", ".join(p.ctype for p in e.params) or "void"
        out.append(f"typedef {RET_TYPES[e.ret]} (*{e.name}_fn)({ps});")
    out += ["", "/* symbol names (alternatives separated by NUL, list ends with an empty name) */",
            "typedef struct { const char *symbols; const char *pyname; const char *since; } n4p_api_entry;",
            "", "#ifdef N4P_DEFINE_API_TABLE",
            "const n4p_api_entry n4p_api_table[N4P_API_COUNT] = {"]
    for e in entries:
        syms = "\\0".join(e.symbols) + "\\0"
        out.append(f'    {{"{syms}", "{e.pyname}", "{e.since}"}},')
    out += ["};", "#else", "extern const n4p_api_entry n4p_api_table[N4P_API_COUNT];", "#endif",
            "", "#endif", ""]
    return "\n".join(out)


FASTCALL = "PyObject *mod, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames"


def gen_wrappers_h(entries: list[Entry]) -> str:
    out = [HEADER, "#ifndef NCCL4PY_GEN_API_WRAPPERS_H", "#define NCCL4PY_GEN_API_WRAPPERS_H", "",
           "/* Every table entry's wrapper, docstring and text signature (gen/wrappers.c). */",
           "extern PyMethodDef n4p_api_methods[];", "",
           "/* The hand-written wrappers (flag \"hand\" in the table). */"]
    for e in entries:
        if e.hand:
            out.append(f"PyObject *n4p_w_{e.pyname}({FASTCALL});")
    out += ["", "#endif", ""]
    return "\n".join(out)


def _gen_simple(e: Entry) -> list[str]:
    """The shape of the hot path: every argument one int, the status back."""
    out = _gen_prologue(e)
    for i, p in enumerate(e.params):
        out.append(f"    {p.k.local} v{i};")
    for i, p in enumerate(e.params):
        k = p.k
        out.append(f'    if ({k.conv}(a[{i}], "{p.pyname}", {k.cast}&v{i}) < 0)')
        out.append("        return NULL;")
    for c in _owner_checks(e, {p.name: f"a[{i}]" for i, p in enumerate(e.params)}):
        out.append(f"    if ({c} < 0)")
        out.append("        return NULL;")
    callargs = ", ".join(f"({p.ctype})v{i}" if p.k.local != p.ctype else f"v{i}"
                         for i, p in enumerate(e.params))
    out += ["    ncclResult_t r;", "    Py_BEGIN_ALLOW_THREADS", f"    r = fn({callargs});",
            "    Py_END_ALLOW_THREADS", "    return n4p_status_none(mod, r);"]
    return out


def _comm_index(e: Entry) -> int | None:
    """The index of the communicator parameter, or None."""
    return next((i for i, p in enumerate(e.params) if p.kind == "comm"), None)


def _owner_checks(e: Entry, srcs: dict[str, str]) -> list[str]:
    """The calls that refuse a Window object of another communicator than the
    call's (handles.c); srcs: parameter name -> its Python argument."""
    ci = _comm_index(e)
    if ci is None:
        return []
    return [f'n4p_window_check_owner(mod, {srcs[p.name]}, (void *)v{ci}, "{p.pyname}")'
            for p in e.params if p.kind == "win" and p.in_python]


def _gen_prologue(e: Entry) -> list[str]:
    """Parse the arguments, then get the function (loading the library)."""
    out: list[str] = []
    pys = e.py_params
    n = len(pys)
    opt = e.optional_out
    if n:
        names = ", ".join(f'"{p.pyname}"' for p in pys)
        out.append(f"    static const char *const kw[] = {{{names}, NULL}};")
        trailing = 0  # the run of optional arguments at the end
        for p in reversed(pys):
            if p.default or p is opt:
                trailing += 1
            else:
                break
        slot = pys.index(opt) if opt is not None else -1
        if opt is not None and slot < n - trailing:
            out.append(f"    PyObject *a[{n}];")
            out.append(f'    int given = n4p_parse_args_out(args, nargs, kwnames, "{e.pyname}", '
                       f"kw, {n}, {slot}, a);")
            out.append("    if (given < 0)")
            out.append("        return NULL;")
        else:
            # every argument positional (the common case): the caller's array
            out += [f"    PyObject *parsed[{n}];", "    PyObject *const *a = args;",
                    f"    if (kwnames != NULL || nargs != {n}) {{",
                    f'        if (n4p_parse_args(args, nargs, kwnames, "{e.pyname}", kw, '
                    f"{n - trailing}, {n}, parsed) < 0)",
                    "            return NULL;", "        a = parsed;", "    }"]
        if opt is not None and slot >= n - trailing:
            out.append(f"    int given = a[{slot}] != NULL;")
    else:
        # no arguments (the common case) costs no call
        out.append(f'    if ((nargs != 0 || kwnames != NULL) && n4p_parse_args(args, nargs, kwnames, '
                   f'"{e.pyname}", NULL, 0, 0, NULL) < 0)')
        out.append("        return NULL;")
    out += [f"    {e.name}_fn fn = ({e.name}_fn)n4p_fn(mod, N4P_IDX_{e.name});",
            "    if (fn == NULL)", "        return NULL;"]
    return out


def _gen_general(e: Entry) -> list[str]:
    """Any other generated wrapper (see src/README.md for the shapes)."""
    out = _gen_prologue(e)
    pys = e.py_params
    slot = {p.name: j for j, p in enumerate(pys)}
    opt = e.optional_out
    idx = {p.name: i for i, p in enumerate(e.params)}
    if any(p.k.struct or (p.optional_out and p.k.handle) for p in e.params):
        out.append("    n4p_state *st = n4p_get_state(mod);")
    # locals; everything that needs releasing is declared before the first jump
    decls, convs, late, cleanup = [], [], [], []
    handles: list[tuple[int, str]] = []
    given_outs: list[int] = []  # optional out-parameters given as an address
    newobj = False
    for i, p in enumerate(e.params):
        k, v = p.k, f"v{i}"
        src = f"a[{slot[p.name]}]" if p.in_python else ""
        if k.role == "in" and k.conv:
            decls.append(f"    {k.local} {v};")
            convs.append((f'{k.conv}({src}, "{p.pyname}", {k.cast}&{v})', p))
        elif k.role == "in" and p.kind == "uid":
            decls.append(f"    ncclUniqueId {v};")
            convs.append((f'n4p_arg_uid({src}, "{p.pyname}", &{v})', p))
        elif k.role == "in" and p.kind == "cuid_ptr":
            decls.append(f"    ncclUniqueId s{i};")
            decls.append(f"    const ncclUniqueId *{v} = NULL;")
            convs.append((f'n4p_arg_uid_opt({src}, "{p.pyname}", &s{i}, &{v})', p))
        elif k.role == "in" and k.struct:
            decls.append(f"    void *{v} = NULL;")
            conv = "n4p_arg_struct_addr" if k.addr else "n4p_arg_struct"
            convs.append((f'{conv}(st, {k.struct}, {src}, "{p.pyname}", '
                          f"{int(k.nullable)}, &{v})", p))
        elif k.role == "array":
            decls.append(f"    n4p_array_arg {v} = {{0}};")
            cleanup.append(f"    n4p_array_release(&{v});")
            ln = f"v{idx[p.length]}"
            lname = snake(p.length)
            if p.kind == "int_array":
                late.append(f'n4p_arg_int_array_n({src}, "{p.pyname}", {ln}, "{lname}", &{v})')
            elif p.kind == "uid_array":
                late.append(f'n4p_arg_items(st, {src}, "{p.pyname}", {ln}, "{lname}", '
                            f"sizeof(ncclUniqueId), -1, &{v})")
            elif p.kind == "sigdesc":
                late.append(f'n4p_arg_items(st, {src}, "{p.pyname}", {ln}, "{lname}", '
                            f"sizeof(ncclWaitSignalDesc_t), {k.struct}, &{v})")
            else:
                raise SystemExit(f"{e.name}: no generated conversion for {p.kind} (flag it hand)")
        elif k.role == "out" and k.struct:  # name?: a new object, or the caller's storage
            decls.append(f"    void *{v} = NULL;")
            newobj = True
            if p.kind == "uid_ptr":
                decls.append(f"    n4p_bytes_arg b{i} = {{0}};")
                cleanup.append(f"    n4p_bytes_release(&b{i});")
                given = (f'n4p_arg_bytes({src}, "{p.pyname}", NCCL_UNIQUE_ID_BYTES, 1, &b{i}) < 0',
                         f"{v} = b{i}.ptr;")
            else:
                given = (f'n4p_arg_struct(st, {k.struct}, {src}, "{p.pyname}", 0, &{v}) < 0', "")
            convs.append(("@out", (p, v, given)))
        elif k.role == "out" and p.optional_out and k.handle:
            # omitted: a new handle object whose slot the library fills (and
            # may fill later: the object is kept until the group ends)
            decls.append(f"    void *o{i} = NULL;")
            decls.append(f"    PyObject *h{i} = NULL;")
            handles.append((i, k.handle))
            given_outs.append(i)
            convs.append((f'given && n4p_arg_out_ptr({src}, "{p.pyname}", &o{i})', p))
        elif k.role == "out":
            sep = "" if k.local.endswith("*") else " "
            decls.append(f"    {k.local}{sep}{v} = {k.zero};")
            if p.optional_out:
                decls.append(f"    void *o{i} = NULL;")
                given_outs.append(i)
                convs.append((f'given && n4p_arg_out_ptr({src}, "{p.pyname}", &o{i})', p))
        else:
            raise SystemExit(f"{e.name}: no generated conversion for {p.kind}")
    stamps = []  # (index, param): versioned structs handed over in the library's layout
    for i, p in enumerate(e.params):
        if p.k.stamp:
            decls.append(f"    {p.k.ctype.replace('const ', '').rstrip('*')} t{i};")
            if p.k.role == "out":
                decls.append(f"    void *p{i} = NULL;")
            stamps.append((i, p))
    for i, _ in handles:
        cleanup.append(f"    Py_XDECREF(h{i});")
    has_cleanup = bool(cleanup) or newobj
    fail = "goto done" if has_cleanup else "return NULL"
    out += decls
    if newobj:
        out.append("    PyObject *obj = NULL;")
    if has_cleanup:
        out.append("    PyObject *res = NULL;")
    for c, p in convs:
        if c == "@out":
            pp, v, (given_conv, given_set) = p
            out.append("    if (given) {")
            out.append(f"        if ({given_conv})")
            out.append(f"            {fail};")
            if given_set:
                out.append(f"        {given_set}")
            out.append("    } else {")
            out.append(f"        if ((obj = n4p_struct_new(st, {pp.k.struct})) == NULL)")
            out.append(f"            {fail};")
            out.append(f"        {v} = n4p_struct_ptr(st, {pp.k.struct}, obj);")
            out.append("    }")
        else:
            out.append(f"    if ({c} < 0)")
            out.append(f"        {fail};")
    for i, p in stamps:
        if p.k.role == "out":
            out.append(f"    p{i} = v{i};")
        out.append(f"    if (n4p_struct_for_library(mod, {p.k.struct}, {int(p.k.role == 'in')}, "
                   f"&v{i}, &t{i}) < 0)")
        out.append(f"        {fail};")
    for c in late + _owner_checks(e, {p.name: f"a[{slot[p.name]}]" for p in pys}):
        out.append(f"    if ({c} < 0)")
        out.append(f"        {fail};")
    ci = _comm_index(e)
    for i, hk in handles:
        out.append("    if (!given) {")
        out.append(f"        if ((h{i} = n4p_handle_new_out(st, {hk})) == NULL)")
        out.append(f"            {fail};")
        out.append(f"        o{i} = n4p_handle_slot(h{i});")
        if hk == "N4P_H_WINDOW" and ci is not None:
            out.append(f"        n4p_handle_set_owner(h{i}, (void *)v{ci});")
        out.append("    }")
    # the call
    callargs = []
    for i, p in enumerate(e.params):
        k, v = p.k, f"v{i}"
        if k.role == "in" and k.conv:
            callargs.append(f"({p.ctype}){v}" if k.local != p.ctype else v)
        elif k.role == "in" and (p.kind == "uid" or p.kind == "cuid_ptr"):
            callargs.append(v)
        elif k.role == "in":
            callargs.append(f"({p.ctype}){v}")
        elif k.role == "array":
            callargs.append(f"({p.ctype}){v}.ptr")
        elif k.struct:
            callargs.append(f"({p.ctype}){v}")
        elif p.optional_out and k.handle:
            callargs.append(f"({p.ctype})o{i}")
        elif p.optional_out:
            callargs.append(f"given ? ({p.ctype})o{i} : &{v}")
        else:
            callargs.append(f"&{v}")
    call = f"fn({', '.join(callargs)})"
    if e.ret == "cstr":
        out += ["    const char *s;", "    Py_BEGIN_ALLOW_THREADS", f"    s = {call};",
                "    Py_END_ALLOW_THREADS", "    return n4p_str_result(s);"]
        return out
    if e.ret == "int":
        out += ["    int v;", "    Py_BEGIN_ALLOW_THREADS", f"    v = {call};",
                "    Py_END_ALLOW_THREADS", "    return PyLong_FromLong((long)v);"]
        return out
    if e.ret == "void":
        out += ["    Py_BEGIN_ALLOW_THREADS", f"    {call};", "    Py_END_ALLOW_THREADS",
                "    Py_RETURN_NONE;"]
        return out
    if e.ret == "team":
        out += ["    ncclTeam_t t;", "    Py_BEGIN_ALLOW_THREADS", f"    t = {call};",
                "    Py_END_ALLOW_THREADS",
                "    return n4p_struct_copy(n4p_get_state(mod), N4P_S_TEAM, &t);"]
        return out
    out += ["    ncclResult_t r;", "    Py_BEGIN_ALLOW_THREADS", f"    r = {call};",
            "    Py_END_ALLOW_THREADS"]
    for i, _ in handles:  # may the library write the slot later?
        out.append(f"    if (h{i} != NULL)")
        out.append(f"        n4p_handle_called(h{i}, r);")
    for i in given_outs:  # the caller's storage: a slot of ours, lent? (src/slot.c)
        out.append("    if (given)")
        out.append(f"        n4p_slot_returned(o{i}, r);")
    for i, p in stamps:
        if p.k.role == "out":
            out.append(f"    if (v{i} != p{i} && !n4p_status_failed(r))")
            out.append(f"        n4p_struct_from_library({p.k.struct}, v{i}, p{i});")
    # the result
    rets = e.returned
    if opt is not None and opt.k.struct:
        value = "given ? Py_NewRef(Py_None) : Py_NewRef(obj)"
    elif opt is not None and opt.k.handle:
        h = f"h{idx[opt.name]}"
        value = f"given ? PyLong_FromLong((long)r) : n4p_handle_result({h})"
    elif opt is not None:
        v = f"v{idx[opt.name]}"
        value = f"given ? PyLong_FromLong((long)r) : {opt.k.box.format(v=v)}"
    elif len(rets) == 1:
        value = rets[0].k.box.format(v=f"v{idx[rets[0].name]}")
    elif rets:
        boxes = ", ".join(p.k.box.format(v=f"v{idx[p.name]}") for p in rets)
        value = f'Py_BuildValue("({"N" * len(rets)})", {boxes})'
    else:
        value = None
    if not has_cleanup:
        if value is None:
            out.append("    return n4p_status_none(mod, r);")
        else:
            out += ["    if (n4p_status_failed(r))", "        return n4p_raise_status(mod, r);",
                    f"    return {value};"]
        return out
    out += ["    if (n4p_status_failed(r))", "        n4p_raise_status(mod, r);", "    else"]
    out.append(f"        res = {value if value is not None else 'Py_NewRef(Py_None)'};")
    out.append("done:")
    out += cleanup
    if newobj:
        out.append("    Py_XDECREF(obj);")
    out.append("    return res;")
    return out


def gen_wrappers_c(entries: list[Entry]) -> str:
    out = [HEADER, '#include "../bindings.h"', ""]
    for e in entries:
        if e.hand:
            continue
        out.append("static PyObject *")
        out.append(f"w_{e.pyname}({FASTCALL})")
        out.append("{")
        out += _gen_simple(e) if e.simple else _gen_general(e)
        out.append("}")
        out.append("")
    out.append("PyMethodDef n4p_api_methods[] = {")
    for e in entries:
        fn = f"n4p_w_{e.pyname}" if e.hand else f"w_{e.pyname}"
        doc = docstring(e)
        out.append(f'    {{"{e.pyname}", (PyCFunction)(void (*)(void)){fn}, '
                   "METH_FASTCALL | METH_KEYWORDS,")
        lines = doc.split("\n")
        for j, line in enumerate(lines):
            text = line + ("\n" if j < len(lines) - 1 else "")
            out.append(f"     {c_literal(text)}" + ("}," if j == len(lines) - 1 else ""))
    out += ["    {NULL, NULL, 0, NULL},", "};", ""]
    return "\n".join(out)



# --------------------------------------------------------------------------
# docstrings and typed stubs

ERRORS = ("NCCLError: the library returned an error status (its value is .status; "
          "7 InProgress is not an error).")


def _py_sig(e: Entry, with_types: bool, drop: Param | None = None, full: bool = True) -> str:
    parts = []
    pys = [p for p in e.py_params if p is not drop]
    opt = e.optional_out
    trailing_opt = opt is not None and opt is e.py_params[-1]
    for p in pys:
        t = p.k.pytype
        if p.optional_out:
            t = p.k.pytype if p.k.struct else "int"
        if with_types:
            s = f"{p.pyname}: {t}"
            if p.default:
                s += " = None"
        else:
            s = p.pyname
            if p.default or (p is opt and trailing_opt and not full):
                s += "=None"
        parts.append(s)
    return ", ".join(parts)


def _ret_type(e: Entry) -> str:
    if e.ret in RETURNS:
        return RETURNS[e.ret].pytype
    rets = e.returned
    types = [(f"list[{p.k.ret}]" if _is_list(e, p) else p.k.ret) for p in rets]
    if not types:
        return "None"
    return types[0] if len(types) == 1 else f"tuple[{', '.join(types)}]"


def _is_list(e: Entry, p: Param) -> bool:
    """An out-array the wrapper returns as a list (its length is an input)."""
    return bool(p.length) and next(q for q in e.params if q.name == p.length).kind == "int"


def _symbol_text(e: Entry) -> str:
    s = e.name
    if len(e.symbols) > 1:
        s += " (or " + ", ".join(e.symbols[1:]) + ")"
    return s


def docstring(e: Entry) -> str:
    opt = e.optional_out
    trailing = opt is not None and opt is e.py_params[-1]
    sig = _py_sig(e, False, full=not trailing)
    lines = [f"{e.pyname}({sig})", "--", "", e.summary, ""]
    since = "RCCL only" if e.since == "rccl" else f"NCCL {e.since} and later"
    lines.append(f"Calls {_symbol_text(e)} ({since}); the host backend "
                 + ("implements it." if e.host else "does not implement it."))
    if opt is not None:
        short = _py_sig(e, False, drop=opt)
        lines += ["", f"{opt.pyname} is optional:"]
        if opt.k.struct:
            lines += [f"  {e.pyname}({short}) -> {opt.k.ret}",
                      f"      a new {opt.k.ret} filled by the library;",
                      f"  {e.pyname}({_py_sig(e, False)}) -> None",
                      f"      the library fills {opt.pyname}, the caller's storage."]
        else:
            lines += [f"  {e.pyname}({short}) -> {opt.k.ret}",
                      f"      nccl4py 0.2 and 0.5+: returns the {opt.k.doc}, a {opt.k.ret} whose",
                      "      slot the library filled (and fills later for non-blocking calls and",
                      "      groups); it behaves as the int handle (comparison, hashing,",
                      "      arithmetic);",
                      f"  {e.pyname}({_py_sig(e, False)}) -> int",
                      f"      nccl4py 0.3: {opt.pyname} is the address of caller storage "
                      "that receives",
                      "      the handle, possibly later (non-blocking calls, groups): "
                      "box.address of a",
                      "      box = PointerBox() kept in a variable (not PointerBox().address: "
                      "that box",
                      "      is freed before the call); returns the status (0 Success or 7 "
                      "InProgress).",
                      "  The number of arguments tells the two apart."]
    pys = e.py_params
    if pys:
        lines += ["", "Arguments:"]
        for p in pys:
            d = p.k.doc if not (p.optional_out and not p.k.struct) else \
                "address of storage for the " + p.k.doc
            if p.length:
                d += f"; {snake(p.length)} of them"
            if p.default:
                d += "; default None"
            lines.append(f"  {p.pyname} ({p.k.pytype if p.k.struct or not p.optional_out else 'int'}):"
                         f" {d}")
    rt = _ret_type(e)
    if opt is None:
        lines += ["", "Returns:"]
        if e.ret in RETURNS:
            lines.append(f"  {RETURNS[e.ret].doc}")
        elif e.returned:
            descr = "; ".join(f"{snake(p.name)}: {p.k.doc}" + (f", a list of {snake(p.length)}"
                                                               if _is_list(e, p) else "")
                              for p in e.returned)
            lines.append(f"  {rt}: {descr}.")
        else:
            lines.append("  None (also for 7 InProgress).")
    lines += ["", "Raises:"]
    if e.ret == "status":
        lines.append("  " + ERRORS)
    lines += [f"  FunctionNotFoundError: the loaded library lacks {e.name}.",
              "  NotSupportedError: no NCCL or RCCL library could be loaded.",
              "  TypeError, OverflowError, ValueError: an argument has the wrong type or value."]
    return "\n".join(lines)


def gen_pyi_functions(entries: list[Entry]) -> list[str]:
    out = []
    for e in entries:
        opt = e.optional_out
        if opt is None:
            out.append(f"def {e.pyname}({_py_sig(e, True)}) -> {_ret_type(e)}: ...")
            continue
        given_ret = "None" if opt.k.struct else "int"
        omitted_ret = opt.k.ret
        out.append("@overload")
        out.append(f"def {e.pyname}({_py_sig(e, True, drop=opt)}) -> {omitted_ret}: ...")
        out.append("@overload")
        out.append(f"def {e.pyname}({_py_sig(e, True)}) -> {given_ret}: ...")
    return out


# --------------------------------------------------------------------------
# host/api_decls.h

def _wrap_c(head: str, items: list[str], width: int = 96) -> list[str]:
    """A macro definition of items separated by spaces, continued over lines."""
    lines, cur = [], head
    for item in items:
        if len(cur) + 1 + len(item) > width:
            lines.append(cur + " \\")
            cur = "    "
        cur += (" " if cur.strip() else "") + item
    return lines + [cur]


def gen_host_decls(entries: list[Entry]) -> str:
    out = [c_header(f'{TABLE} (flag "host")').removesuffix(" */\n"),
           " *",
           " * host_api_decls.h - a declaration of every function the host backend exports,",
           " * taken from the function-pointer types of the API table.  Declaring each",
           " * symbol with `__typeof__(*(xxx_fn)0)` makes the compiler reject any",
           " * definition whose prototype differs from the table.",
           " */",
           "#ifndef N4P_HOST_API_DECLS_H", "#define N4P_HOST_API_DECLS_H", "",
           '#include "api_table.h"', ""]
    for e in entries:
        if e.host:
            for sym in e.symbols:
                out.append(f"extern __typeof__(*({e.name}_fn)0) {sym};")
    # the collectives with a config form, and the parameter and argument lists of both
    host = {e.name: e for e in entries if e.host}
    colls = [plain for e in host.values()
             if (plain := host.get(e.name.removesuffix("Config"))) not in (None, e)
             and e.params[:-1] == plain.params and e.params[-1].kind == "collconfig"]
    out += ["", "/* N4P_HOST_CONFIG_COLLS(X): X(ncclName) for each collective whose",
            " * ncclNameConfig adds a collconfig to its parameters.  N4P_PARAMS_<fn> and",
            " * N4P_ARGS_<fn>: the table's parameter list of such a collective, and its",
            " * names (coll_api.c and config_colls.c define them with these). */"]
    for plain in colls:
        out.append(f"#define N4P_PARAMS_{plain.name} " + ", ".join(f"{p.ctype} {p.name}"
                                                                 for p in plain.params))
        out.append(f"#define N4P_ARGS_{plain.name} " + ", ".join(p.name for p in plain.params))
    out += _wrap_c("#define N4P_HOST_CONFIG_COLLS(X)", [f"X({c.name})" for c in colls])
    out += ["", "#endif /* N4P_HOST_API_DECLS_H */", ""]
    return "\n".join(out)



# --------------------------------------------------------------------------
# nccl.bindings.rocm_extensions

def gen_rocm_extensions(entries: list[Entry]) -> str:
    """The RCCL-only functions (first version "rccl") for nccl.bindings.rocm_extensions."""
    names = [e.pyname for e in entries if e.since == "rccl"]
    return "\n".join([f"from nccl._nccl import {', '.join(names)}", "",
                      "__all__ = [" + ", ".join(f'"{n}"' for n in names) + "]"])



def generate(root: Path = ROOT) -> Output:
    entries = parse_table(root / TABLE)
    out = Output()
    out.files["src/gen/api_table.h"] = gen_table_h(entries)
    out.files["src/gen/api_wrappers.h"] = gen_wrappers_h(entries)
    out.files["src/gen/wrappers.c"] = gen_wrappers_c(entries)
    out.files["src/gen/host_api_decls.h"] = gen_host_decls(entries)
    out.block("nccl/_nccl.pyi", "functions", TABLE, gen_pyi_functions(entries))
    out.block("nccl/bindings/rocm_extensions.py", "rccl only", TABLE,
              gen_rocm_extensions(entries).split("\n"))
    return out
