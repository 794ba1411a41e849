"""Every public function of nccl.bindings and nccl._nccl has a signature that
inspect can read (a __text_signature__ for the C ones) and a docstring that
says more than its name: what it does, and for the API-table wrappers the C
symbol it calls and the errors it raises.

The C fast paths of nccl.core.Communicator (_CommunicatorBase methods) have
a test of their own below, and the classes (struct types, enums, exceptions)
are not covered here.
"""
from __future__ import annotations

import inspect
import pydoc
import re

from gen import api as gen_api
import pytest

import nccl._nccl as ext
import nccl.bindings as b
from conftest import ROOT


def _public_functions():
    out = {}
    for mod in (b, ext):
        for name in dir(mod):
            obj = getattr(mod, name)
            if name.startswith("_") or isinstance(obj, type) or not callable(obj):
                continue
            out[name] = obj
    return out


FUNCTIONS = _public_functions()


def test_the_functions_are_found():
    # the API table, the GPU runtime layer and the module's own functions
    names = set(FUNCTIONS)
    assert {e.pyname for e in gen_api.parse_table()} <= names
    assert {"gpu_runtime_malloc", "check_status", "get_library_path", "resolve_buffer"} <= names


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_signature_and_docstring(name):
    fn = FUNCTIONS[name]
    sig = inspect.signature(fn)  # ValueError without a text signature
    doc = inspect.getdoc(fn) or ""
    first = doc.split("\n\n")[0]
    assert len(doc) >= 60 and not first.startswith(name + "("), (name, doc)
    for param in sig.parameters:
        if param != "self" and fn.__module__ != "nccl.bindings.nccl":
            assert param in doc, (name, param)


@pytest.mark.parametrize("entry", gen_api.parse_table(), ids=lambda e: e.pyname)
def test_table_wrappers_say_what_they_call(entry):
    doc = getattr(b, entry.pyname).__doc__
    assert f"Calls {entry.name}" in doc
    assert "FunctionNotFoundError" in doc and "NotSupportedError" in doc
    if entry.ret == "status":
        assert "NCCLError" in doc
    if entry.optional_out is not None and not entry.optional_out.k.struct:
        assert "nccl4py 0.2" in doc and "nccl4py 0.3" in doc
    assert list(inspect.signature(getattr(b, entry.pyname)).parameters) == \
        [p.pyname for p in entry.py_params]


def test_signatures_bind_like_the_calls():
    """The signature of a wrapper with an optional trailing argument binds
    both forms; one with the argument in the middle binds the 0.3 form."""
    sig = inspect.signature(b.comm_query_properties)
    sig.bind(1)
    sig.bind(1, 2)
    sig = inspect.signature(b.comm_split)
    sig.bind(1, 2, 3, 4, 5)
    assert list(sig.parameters) == ["comm", "color", "key", "newcomm", "config"]


COMMUNICATOR_METHODS = sorted(
    name for name, obj in vars(ext._CommunicatorBase).items()
    if not name.startswith("_") and callable(obj))


@pytest.mark.parametrize("name", COMMUNICATOR_METHODS)
def test_communicator_methods_have_signatures(name):
    inspect.signature(getattr(ext._CommunicatorBase, name))


def test_help_of_communicator_starts_with_the_collectives():
    import nccl.core as nc

    text = pydoc.render_doc(nc.Communicator, renderer=pydoc.plaintext)
    top = "\n".join(text.splitlines()[:30])
    table = (ROOT / "src" / "collectives.def").read_text()
    methods = re.findall(r"^N4P_COLL\((\w+),", table, re.M)
    assert len(methods) >= 10
    missing = [m for m in methods if not re.search(rf"\b{m}\(", top)]
    assert missing == [], f"help(Communicator) does not show {missing} near the top"
