"""Low-level bindings: one function per C function of NCCL/RCCL.

Addresses, handles and streams are Python ints.  Functions that create a
handle accept both calling conventions of upstream nccl4py (0.2: the handle
is returned; 0.3: the address of caller storage such as ``box.address``
of a ``box = PointerBox()`` kept in a variable is passed and the status is
returned; ``PointerBox().address`` is a temporary's, freed before the call).

Lifetimes are the caller's business here: the memory behind an address, and
the storage an out-parameter points to, must stay valid until the library is
done with it - for a call queued in a group, until the outermost
``group_end`` returns (``nccl.core`` keeps its arguments alive by itself).
Arguments are integers (``__index__``); floats are a ``TypeError``.
"""
from __future__ import annotations

import re

from nccl._enums import *  # noqa: F401,F403
from nccl._errors import FunctionNotFoundError, NCCLError, NotSupportedError  # noqa: F401
from nccl._nccl import *  # noqa: F401,F403
from nccl._nccl import _struct_layouts, get_library_path  # noqa: F401

# A struct's words: a run of capitals before the next word, "A2A" (all-to-all)
# as one, or a capital and its lower-case letters and digits.
_WORD = re.compile(r"[A-Z]\d[A-Z](?![a-z])|[A-Z]+(?=[A-Z]\d[A-Z](?![a-z])|[A-Z][a-z]|$)"
                   r"|[A-Z][a-z0-9]*")


def _dtype_name(struct_name: str) -> str:
    """The dtype attribute of a struct class: ``LLA2AHandle`` -> ``ll_a2a_handle_dtype``."""
    return "_".join(w.lower() for w in _WORD.findall(struct_name)) + "_dtype"


# every struct of the table (src/structs.def) has its dtype
_DTYPE_NAMES = {_dtype_name(name): name for name in _struct_layouts()}
# the 0.3 name of ResourceWindowVidmem
ResourceWindow_vidmem = ResourceWindowVidmem  # noqa: F405
_dtypes: dict = {}


def _make_dtype(struct_name: str):
    import numpy as np

    size, fields = _struct_layouts()[struct_name]
    if not fields:
        return np.dtype({"names": ["internal"], "formats": [(np.int8, size)], "offsets": [0],
                         "itemsize": size})
    fmt = {"u8": np.uint64, "u4": np.uint32, "i4": np.int32, "u1": np.uint8, "f4": np.float32,
           "p": np.intp, "u1x4": (np.uint8, (4,)), "px4": (np.intp, (4,))}

    def one(code: str):
        if code[0] == "?":
            return (np.bool_, (int(code[1:]),))
        if code[0] == "S":  # a struct of the table
            return _make_dtype(code[1:])
        return fmt[code]

    return np.dtype({"names": [f[0] for f in fields], "formats": [one(f[2]) for f in fields],
                     "offsets": [f[1] for f in fields], "itemsize": size})


def __getattr__(name: str):
    """NumPy structured dtypes of the structs, built on first use."""
    if name in _DTYPE_NAMES:
        if name not in _dtypes:
            _dtypes[name] = _make_dtype(_DTYPE_NAMES[name])
        return _dtypes[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
