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



# The only places C imports a module of the package: at module init, and the
# discovery module of a library when it is first loaded (lazylib.c).
IMPORT = re.compile(r'PyImport_ImportModule\("(nccl[\w.]*)"\)')
IMPORTS_AT_INIT = {("errors.c", "nccl._errors")}
# still imported on first use: the dtype objects buffer.c looks up
NOT_YET_REGISTERED = {("buffer.c", "nccl._dtypes")}


def test_c_imports_no_package_module_on_a_call_path():
    """What C needs from nccl.* is fetched at module init or registered by the
    Python module at its import (_register), never imported by a call."""
    found = {(p.name, m.group(1)) for p in sorted((ROOT / "src").rglob("*.c"))
             for m in IMPORT.finditer(p.read_text())}
    assert found - IMPORTS_AT_INIT == NOT_YET_REGISTERED, found


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
