"""The data-type and struct tables (src/dtypes.def, src/structs.def): the
generated parts are current, and C and Python agree with every line."""
from __future__ import annotations

import ast

import numpy as np
import pytest

import gen
from gen import collectives as gen_colls
from gen import dtypes as gen_dtypes
from gen import structs as gen_structs
import nccl.bindings as b
import nccl.core as nc
from conftest import ROOT, host_available
from host_ranks import run_ranks
from nccl import _dtypes, _nccl
from nccl._errors import NcclInvalid

DTYPES, BOOL_AS = gen_dtypes.parse_dtypes()
STRUCTS = gen_structs.parse_structs()


def _tree_with(tmp_path, table, old, new):
    """A copy of the tables and generated files (current) with old replaced
    by new in one table: the generated files that become stale, with their
    new text."""
    root = tmp_path / "tree"
    inputs = [ROOT / table for table in gen.TABLES]
    for path in [*inputs, *gen.generated(ROOT)]:
        rel = path.relative_to(ROOT)
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(path.read_text())
    assert all((root / p.relative_to(ROOT)).read_text() == text
               for p, text in gen.generated(ROOT).items())
    path = root / "src" / table
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, new))
    return {p.relative_to(root).as_posix(): text for p, text in gen.generated(root).items()
            if p.read_text() != text}


def test_check_mode_finds_a_stale_block(tmp_path):
    stale = _tree_with(tmp_path, "dtypes.def", "N4P_DTYPE_ALIAS(Double, Float64)\n", "")
    assert set(stale) == {"nccl/_enums.py", "nccl/core/typing.py"}


def test_the_bench_takes_its_type_and_op_names_from_the_tables(tmp_path):
    from nccl._enums import RedOp
    from nccl.bench.collectives import OPS, TYPES
    assert TYPES == tuple(t.tests_name for t in DTYPES) and len(TYPES) == len(DTYPES)
    assert TYPES[7] == "float" and TYPES[6] == "half"  # nccl-tests' own names
    assert OPS[:-1] == tuple(RedOp(v).name.lower() for v in range(RedOp.NumOps))
    stale = _tree_with(tmp_path, "dtypes.def", "N4P_TESTS_NAME(Float32,    float)",
                       "N4P_TESTS_NAME(Float32,    fp32)")
    assert set(stale) == {"nccl/_dtypes.py", "src/gen/dtype_table.h"}
    assert '"fp32"' in stale["nccl/_dtypes.py"] and '"fp32"}' in stale["src/gen/dtype_table.h"]
    with pytest.raises(SystemExit, match="N4P_TESTS_NAME"):
        _tree_with(tmp_path / "b", "dtypes.def", "N4P_TESTS_NAME(Float32,    float)\n", "")


@pytest.mark.parametrize("t", DTYPES, ids=lambda t: t.name)
def test_every_data_type_reaches_c_and_python(t):
    assert b.DataType[t.name] == t.value
    assert nc.NcclDataType[t.name.upper()] == t.value
    for alias in t.aliases:
        assert b.DataType[alias] == t.value and getattr(nc, alias.upper()) == t.value
    dt = nc.NcclDataType(t.value)
    assert dt.itemsize == t.size and _dtypes.nccl_dtype(t.array_name) == t.value
    # the C core: an explicit spec over raw bytes takes the table's size
    raw = np.zeros(8 * t.size, np.uint8)
    assert _nccl.resolve_buffer((raw, 8, t.value), "x", False)[1:3] == (8, t.value)
    with pytest.raises(NcclInvalid, match="exceeds"):
        _nccl.resolve_buffer((raw, 9, t.value), "x", False)
    # and an array of the type resolves to it, with its array name in messages
    if not t.builtin:
        pytest.importorskip("ml_dtypes")
    arr = np.zeros(3, dt.numpy_dtype)
    assert _nccl.resolve_buffer(arr, "x", False)[1:3] == (3, t.value)
    with pytest.raises(NcclInvalid, match=f"the buffer's 3 {t.array_name} elements"):
        _nccl.resolve_buffer((arr, 4), "x", False)


def test_the_c_table_of_the_data_types_is_the_table():
    """What the C code reads (src/gen/dtype_table.h through _dtype_table) is
    every line of dtypes.def, and what nccl._dtypes holds."""
    rows, bool_as = _nccl._dtype_table()
    assert rows == tuple((f"nccl{t.name}", t.size, t.array_name, t.tests_name) for t in DTYPES)
    assert bool_as == BOOL_AS == _dtypes.BOOL_AS
    assert [(n, v, size, a) for n, v, size, a, _ in _dtypes.TABLE] == \
        [(name[4:], v, size, a) for v, (name, size, a, _) in enumerate(rows)]
    assert _dtypes.TESTS_NAMES == tuple(r[3] for r in rows)
    # and no C file makes a table of sizes or names of its own from dtypes.def
    for rel in [*(ROOT / "src").glob("*.[ch]"), *(ROOT / "host").glob("*.[ch]")]:
        text = rel.read_text()
        assert "#array_name" not in text and "[value] = size" not in text, rel


def test_bool_and_the_list_of_supported_types():
    assert _nccl.resolve_buffer(np.zeros(2, np.bool_), "x", False)[2] == BOOL_AS
    names = ", ".join(t.array_name for t in DTYPES)
    assert _dtypes.SUPPORTED.startswith(names)
    with pytest.raises(NcclInvalid) as ei:
        _nccl.resolve_buffer(np.zeros(2, np.complex64), "x", False)
    assert f"NCCL supports: {_dtypes.SUPPORTED}" in str(ei.value)
    assert len(b.DataType) == len(DTYPES) + 1  # and NumTypes


@pytest.mark.parametrize("s", STRUCTS, ids=lambda s: s.pyname)
def test_every_struct_field_reaches_c(s):
    size, fields = _nccl._struct_layouts()[s.pyname]
    if s.size is not None:
        assert size == s.size
    assert [(f, off) for f, off, _ in fields] == [(f.pyname, f.offset) for f in s.fields]
    obj = getattr(b, s.pyname)()
    for f in s.fields:
        getattr(obj, f.pyname)


def test_core_uses_the_field_table():
    config = gen_structs._struct(STRUCTS, "Config")
    assert set(nc.NCCLConfig.FIELDS) == {f.pyname for f in config.fields if f.api != "-"}
    props = [f.pyname for f in gen_structs._struct(STRUCTS, "CommProperties").fields
             if f.api == "PROP"]
    assert all(isinstance(getattr(nc.Communicator, p), property) for p in props)
    d = nc.WaitSignalDesc(peer=3, op_count=2, signal_index=1, context=5)._lowpp
    assert (d.peer, d.op_cnt, d.sig_idx, d.ctx) == (3, 2, 1, 5)


def test_coll_config_uses_the_field_table():
    import dataclasses

    from nccl.core.coll_config import _materialize

    exposed = gen_structs._api_fields(STRUCTS, "CollConfig")
    assert [a.name for a in exposed] + ["vendor_options"] == \
        [f.name for f in dataclasses.fields(nc.NCCLCollConfig)]
    given = {"INT": 3, "BOOL": True, "STR": "ring"}
    plain = [a for a in exposed if a.field.api_kind in given]
    low = _materialize(nc.NCCLCollConfig(**{a.name: given[a.field.api_kind] for a in plain}))
    for a in plain:
        assert getattr(low, a.field.pyname) == given[a.field.api_kind], a.name
    event = next(a for a in exposed if a.field.api_kind == "EVENT")
    low = _materialize(nc.NCCLCollConfig(**{event.name: 0x1234}))
    assert getattr(low, event.field.pyname) == 0x1234


def test_vendor_options_use_the_field_table():
    """VendorOption's fields are the ARG fields of ConfigExt's parts, and each
    reaches its field of the linked ConfigExt nodes."""
    import dataclasses

    from nccl.core.coll_config import _materialize

    parts = gen_structs._vendor_parts(STRUCTS)
    key = [f for part, s in parts if not s.union for f in gen_structs._arg_fields(s)]
    values = [f for part, s in parts if s.union for f in gen_structs._arg_fields(s)]
    assert [f.name for f in dataclasses.fields(nc.VendorOption)] == \
        [f.api_args[0] for f in key + values] == \
        ["vendor_id", "option_id", "int_value", "str_value", "raw_value"]
    given = {"int": 3, "str": "ring"}
    options = [nc.VendorOption(7, i, **{f.api_args[0]: given.get(gen_structs.KINDS[f.kind], 0x1234)})
               for i, f in enumerate(values)]
    held = _materialize(nc.NCCLCollConfig(vendor_options=options))
    assert held.ptr == held.cfg.ptr and held.cfg.ext == held.nodes[0].ptr
    for i, (node, f) in enumerate(zip(held.nodes, values)):
        assert (node.key.vendor_id, node.key.option_id) == (7, i)
        assert getattr(node.val, f.pyname) == getattr(options[i], f.api_args[0]), f.pyname
        assert node.next == (held.nodes[i + 1].ptr if i + 1 < len(values) else 0)


def test_pyi_struct_classes_render_every_field():
    tree = ast.parse(gen_structs.render_pyi_structs())
    classes = {c.name: c for c in tree.body if isinstance(c, ast.ClassDef)}
    assert set(classes) == {s.pyname for s in STRUCTS}
    for s in STRUCTS:
        names = set()
        for node in classes[s.pyname].body:
            if isinstance(node, ast.AnnAssign):
                names.add(node.target.id)
            elif isinstance(node, ast.FunctionDef):
                names.add(node.name)
        assert names == {f for f, _, _ in _nccl._struct_layouts()[s.pyname][1]}


COLLS, RULES = gen_colls.parse_collectives()


@pytest.mark.parametrize("c", COLLS, ids=lambda c: c.method)
def test_every_call_has_its_signature_and_docstring(c):
    import inspect

    fn = getattr(nc.Communicator, c.method)
    params = list(inspect.signature(fn).parameters.values())[1:]
    assert [p.name for p in params] == [a.keyword for a in c.args]
    for i, p in enumerate(params):
        assert (p.default is inspect.Parameter.empty) == (i < c.required), p
        want = (inspect.Parameter.POSITIONAL_OR_KEYWORD if i < c.positional
                else inspect.Parameter.KEYWORD_ONLY)
        assert p.kind == want, p
    doc = fn.__doc__
    assert doc.startswith(c.summary[:40]) and "Raises:" in doc and "NcclInvalid" in doc
    assert all(f"    {a.keyword}: " in doc for a in c.args)
    assert c.example.splitlines()[0] in doc


def test_every_c_method_has_a_signature():
    import inspect

    base = _nccl._CommunicatorBase
    names = [n for n, v in vars(base).items() if callable(v) and not n.startswith("__")]
    assert len(names) >= len(COLLS) + 5
    for n in names:
        inspect.signature(getattr(base, n))
        assert getattr(base, n).__doc__.strip(), n


def test_pyi_methods_render_the_table():
    tree = ast.parse("class C:\n" + gen_colls.render_pyi_communicator())
    methods = {f.name: f for f in tree.body[0].body}
    assert list(methods) == [c.method for c in COLLS]
    for c in COLLS:
        a = methods[c.method].args
        assert [x.arg for x in a.args[1:] + a.kwonlyargs] == [x.keyword for x in c.args]


@pytest.mark.skipif(not host_available(), reason="host backend not built")
@pytest.mark.parametrize("nranks", [2, 3])
def test_docstring_examples_run(tmp_path, nranks):
    code = ["import numpy, nccl.core"]
    for c in COLLS:
        body = c.example.replace("\n", "\n    ")
        code += [f"def example_{c.method}():", f"    {body}", f"example_{c.method}()"]
    code.append("report(ok=True)")
    reports = run_ranks(tmp_path, "\n".join(code) + "\n", nranks)
    assert all(r["ok"] for r in reports)


def test_the_trace_compares_the_send_count_of_the_calls_the_table_says():
    from nccl import trace

    same = set(gen_colls.same_count(COLLS))
    assert trace._SAME_COUNT == same
    assert {"allreduce", "gather"} <= same and not {"broadcast", "alltoallv", "send"} & same


def test_a_collective_added_to_the_table_reaches_the_trace(tmp_path):
    old = "N4P_COLL(alltoallv,"
    new = "N4P_COLL(allmax, R_REDUCE, ncclAllReduce, ncclAllReduce, 2, 3, (A_SEND, A_RECV, " \
          "A_STREAM))\nN4P_COLL_DOC(allmax, \"Max.\", \"pass\")\n" + old
    stale = _tree_with(tmp_path, "collectives.def", old, new)
    assert '"allreduce_with_bias", "allmax"}' in stale["nccl/trace.py"]


def test_the_bench_knows_the_rccl_only_calls_from_the_tables():
    """A collective of the benchmark is RCCL-only where the function its
    Communicator method calls is an ``rccl`` entry of the API table."""
    from gen import api as gen_api
    from nccl.bench.collectives import COLLECTIVES, method_name

    rccl = {e.name for e in gen_api.parse_table() if e.since == "rccl"}
    fns = {c.method: c.fn for c in COLLS}
    for name, coll in COLLECTIVES.items():
        fn = fns.get(method_name(coll, nc.Communicator))
        assert coll.rccl_symbol == (fn if fn in rccl else None), name
    assert {c.rccl_symbol for c in COLLECTIVES.values()} == {
        None, "ncclAllReduceWithBias", "ncclAllToAllv"}


def test_an_rccl_only_function_reaches_the_bench(tmp_path):
    old = "ncclAlltoAll             | allto_all                  | 2.28.3 |"
    stale = _tree_with(tmp_path, "nccl_api.def", old, old.replace("2.28.3", "rccl  "))
    assert '"alltoall": "ncclAlltoAll"' in stale["nccl/bench/collectives.py"]


def test_a_vendor_value_added_to_the_table_reaches_vendor_option(tmp_path):
    old = "N4P_STRUCT_END(ncclConfigExtVal_t, 8)"
    stale = _tree_with(tmp_path, "structs.def", old, "N4P_FIELD(ncclConfigExtVal_t, float, f, f, "
                       "F32, 0, 0, ARG(float_value, None))\n" + old)
    text = stale["nccl/core/coll_config.py"]
    assert "    raw_value: int | None = None\n    float_value: float | None = None\n" in text
    assert '("raw_value", "val", "raw", "int"),\n' in text
    assert '("float_value", "val", "f", "float"))' in text


def test_the_unique_id_size_comes_from_the_table(tmp_path):
    from nccl._launch import uniqueid
    from nccl.core import constants

    assert uniqueid.UNIQUE_ID_BYTES == constants.UNIQUE_ID_BYTES == len(bytes(b.UniqueId())) == 128
    stale = _tree_with(tmp_path, "enums.def", "UNIQUE_ID_BYTES,    128,", "UNIQUE_ID_BYTES,    256,")
    assert {"nccl/_launch/uniqueid.py", "nccl/core/constants.py"} <= set(stale)
    assert "UNIQUE_ID_BYTES = 256" in stale["nccl/_launch/uniqueid.py"]
