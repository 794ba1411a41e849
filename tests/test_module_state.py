"""Module state only: the C core keeps no Python object at file scope (what
is process-wide is C data: the loaded libraries), so a second module object,
in a subinterpreter, has its own state and shares the loaded library."""
from __future__ import annotations

import os
import re

import pytest

from conftest import ROOT, run_python


# a declaration at file scope (column 0) of a PyObject* / PyTypeObject* variable
DECL = re.compile(r"^(?:static\s+|extern\s+)?(?:_Thread_local\s+)?"
                  r"(?:PyObject|PyTypeObject)\s*\*\s*\w+\s*(?:\[[^\]]*\])?\s*(?:=[^;]*)?;", re.M)


def test_no_file_scope_python_objects():
    found = []
    for path in sorted((ROOT / "src").rglob("*.[ch]")):
        text = re.sub(r"/\*.*?\*/", "", path.read_text(), flags=re.S)
        found += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in DECL.finditer(text)]
    assert found == [], "file-scope Python objects (use the module state):\n" + "\n".join(found)


def test_the_scan_finds_a_file_scope_object():
    for line in ("static PyObject *g_path;", "PyObject *cache = NULL;",
                 "static PyTypeObject *types[3];", "static _Thread_local PyObject *last;"):
        assert DECL.search(line), line
    for line in ("PyObject *n4p_w_x(PyObject *mod);", "    PyObject *local = NULL;",
                 "static PyObject *\nf(void)"):
        assert not DECL.search(line), line



# C imports modules of the package only in the init functions of the module
# (n4p_init_*), and the discovery module of a library when it is first loaded
# (lazylib.c, by name from the loader's spec).
IMPORT = re.compile(r'PyImport_ImportModule\("(nccl[\w.]*)"\)')
FUNCTION = re.compile(r"^(\w+)\(", re.M)  # a definition: the name at column 0


def test_c_imports_no_package_module_on_a_call_path():
    """What C needs from nccl.* is fetched at module init or registered by the
    Python module at its import (_register), never imported by a call."""
    found = []
    for path in sorted((ROOT / "src").rglob("*.c")):
        text = path.read_text()
        for m in IMPORT.finditer(text):
            defs = [f.group(1) for f in FUNCTION.finditer(text, 0, m.start())]
            found.append((path.name, defs[-1] if defs else "", m.group(1)))
    assert found and all(fn.startswith("n4p_init_") for _, fn, _ in found), found
    assert {(f, mod) for f, _, mod in found} == {("errors.c", "nccl._errors"),
                                                 ("buffer.c", "nccl._dtypes"),
                                                 ("ndarray_fast.c", "nccl._ndarray_check")}


def test_register_refuses_unknown_names():
    from nccl import _nccl

    with pytest.raises(ValueError, match="no slot named 'nope'"):
        _nccl._register("nope", len)
    with pytest.raises(TypeError, match="name is a str"):
        _nccl._register(1, len)
    with pytest.raises(TypeError):
        _nccl._register("coll_config_materialize")

def test_a_subinterpreter_has_its_own_module_and_shares_the_library(recording_stub):
    pytest.importorskip("_testcapi")
    code = (
        "import _testcapi, nccl._nccl as m\n"
        "path = m.get_library_path()\n"
        "tried = m._loader_report()['attempts']\n"
        "sub = ('import nccl._nccl as m, nccl.bindings as b\\n'\n"
        "       'assert m.get_library_path() == %r\\n'\n"
        "       'assert m._loader_report()[\"attempts\"] == %r\\n'\n"
        "       'assert b.comm_count(0) > 0\\n') % (path, tried)\n"
        "assert _testcapi.run_in_subinterp(sub) == 0\n"
        "assert m._loader_report()['attempts'] == tried and len(tried) == 1\n"
        "print('ok')\n")
    p = run_python(code, dict(os.environ))
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stdout + p.stderr
