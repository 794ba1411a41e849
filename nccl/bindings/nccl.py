"""Low-level bindings: one function per C function of NCCL/RCCL.

Addresses, handles and streams are Python ints.  Functions that create a
handle accept both calling conventions of upstream nccl4py (0.2: the handle
is returned; 0.3: the address of caller storage such as
``PointerBox().address`` is passed and the status is returned).

Lifetimes are the caller's business here: the memory behind an address, and
the storage an out-parameter points to, must stay valid until the library is
done with it - for a call queued in a group, until the outermost
``group_end`` returns (``nccl.core`` keeps its arguments alive by itself).
Arguments are integers (``__index__``); floats are a ``TypeError``.
"""
from __future__ import annotations

from nccl._enums import *  # noqa: F401,F403
from nccl._errors import FunctionNotFoundError, NCCLError, NotSupportedError  # noqa: F401
from nccl._nccl import *  # noqa: F401,F403
from nccl._nccl import get_library_path  # noqa: F401

_DTYPE_NAMES = {
    "unique_id_dtype": "UniqueId",
    "config_dtype": "Config",
    "sim_info_dtype": "SimInfo",
    "comm_properties_dtype": "CommProperties",
    "wait_signal_desc_dtype": "WaitSignalDesc",
    "dev_comm_requirements_dtype": "DevCommRequirements",
    "dev_comm_dtype": "DevComm",
    "coll_config_dtype": "CollConfig",
    "encryption_config_dtype": "EncryptionConfig",
    "team_dtype": "Team",
    "multimem_handle_dtype": "MultimemHandle",
    "lsa_barrier_handle_dtype": "LsaBarrierHandle",
    "gin_barrier_handle_dtype": "GinBarrierHandle",
    "cft_barrier_handle_dtype": "CftBarrierHandle",
    "ll_a2a_handle_dtype": "LLA2AHandle",
    "resource_window_vidmem_dtype": "ResourceWindowVidmem",
    "dev_resource_requirements_dtype": "DevResourceRequirements",
    "config_ext_dtype": "ConfigExt",
    "team_requirements_dtype": "TeamRequirements",
}
# the 0.3 name of ResourceWindowVidmem
ResourceWindow_vidmem = ResourceWindowVidmem  # noqa: F405
_dtypes: dict = {}


def _make_dtype(struct_name: str):
    import numpy as np

    from nccl._nccl import _struct_layouts

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
