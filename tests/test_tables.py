"""The data-type and struct tables (src/dtypes.def, src/structs.def): the
generated parts are current, and C and Python agree with every line."""
from __future__ import annotations

import ast
import subprocess
import sys

import numpy as np
import pytest

import gen_types
import nccl.bindings as b
import nccl.core as nc
from conftest import ROOT
from nccl import _dtypes, _nccl
from nccl._errors import NcclInvalid

DTYPES, BOOL_AS = gen_types.parse_dtypes()
STRUCTS = gen_types.parse_structs()


def test_generated_parts_are_current():
    p = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_types.py"), "--check"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def test_check_mode_finds_a_stale_block(tmp_path):
    root = tmp_path / "tree"
    for rel in ("src/dtypes.def", "src/structs.def", "nccl/_enums.py", "nccl/_dtypes.py",
                "nccl/core/typing.py", "nccl/core/config.py", "nccl/core/communicator.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text((ROOT / rel).read_text())
    assert all((root / p.relative_to(ROOT)).read_text() == text
               for p, text in gen_types.generated(ROOT).items())
    table = root / "src" / "dtypes.def"
    table.write_text(table.read_text().replace("N4P_DTYPE_ALIAS(Double, Float64)\n", ""))
    stale = {p.relative_to(root).as_posix() for p, text in gen_types.generated(root).items()
             if p.read_text() != text}
    assert stale == {"nccl/_enums.py", "nccl/core/typing.py"}


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
    config = gen_types._struct(STRUCTS, "Config")
    assert set(nc.NCCLConfig.FIELDS) == {f.pyname for f in config.fields if f.api != "-"}
    props = [f.pyname for f in gen_types._struct(STRUCTS, "CommProperties").fields
             if f.api == "PROP"]
    assert all(isinstance(getattr(nc.Communicator, p), property) for p in props)
    d = nc.WaitSignalDesc(peer=3, op_count=2, signal_index=1, context=5)._lowpp
    assert (d.peer, d.op_cnt, d.sig_idx, d.ctx) == (3, 2, 1, 5)


def test_pyi_struct_classes_render_every_field():
    tree = ast.parse(gen_types.render_pyi_structs())
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
