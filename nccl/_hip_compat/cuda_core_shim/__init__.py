"""A cuda.core look-alike for ROCm, on nccl's C runtime layer (no hip-python).

``nccl._hip_compat.register()`` installs the modules built here under every
spelling of cuda.core that nccl4py and typical user code import::

    cuda.core               Device Stream StreamOptions Buffer MemoryResource
                            IsStreamType IsStreamT DevicePointerType DevicePointerT
                            (and the sub-modules below as attributes)
    cuda.core.system        get_num_devices
    cuda.core.utils         StridedMemoryView args_viewable_as_strided_memory
    cuda.core.typing        IsStreamType IsStreamT DevicePointerType DevicePointerT
    cuda.core._stream       Stream StreamOptions IsStreamType IsStreamT
    cuda.core._memory       Buffer MemoryResource DevicePointerType DevicePointerT
    cuda.core._memory._buffer   (same as cuda.core._memory)
    cuda.core.experimental[.system|.utils|.typing|._stream|._memory|._memory._buffer]
                            the same module objects as the cuda.core spellings

Names are resolved on first use; any other name raises ``AttributeError``
saying that the HIP shim does not provide it.
"""
from __future__ import annotations

import importlib
import importlib.machinery
import types
from typing import Any

__all__ = ["SERVED", "build_modules", "is_shim_module"]

_IMPL = {
    "Device": "_core", "Stream": "_core", "StreamOptions": "_core", "Buffer": "_core",
    "MemoryResource": "_core", "get_num_devices": "_core",
    "StridedMemoryView": "_utils", "args_viewable_as_strided_memory": "_utils",
    "IsStreamType": "_typing", "IsStreamT": "_typing", "DevicePointerType": "_typing",
    "DevicePointerT": "_typing",
}
_TYPING = ("IsStreamType", "IsStreamT", "DevicePointerType", "DevicePointerT")

# module suffix (after "cuda.core") -> (is a package, names served)
SERVED = {
    "": (True, ("Device", "Stream", "StreamOptions", "Buffer", "MemoryResource") + _TYPING),
    ".system": (False, ("get_num_devices",)),
    ".utils": (False, ("StridedMemoryView", "args_viewable_as_strided_memory")),
    ".typing": (False, _TYPING),
    "._stream": (False, ("Stream", "StreamOptions", "IsStreamType", "IsStreamT")),
    "._memory": (True, ("Buffer", "MemoryResource", "DevicePointerType", "DevicePointerT")),
    "._memory._buffer": (False, ("Buffer", "MemoryResource", "DevicePointerType",
                                 "DevicePointerT")),
}
_SHIM_MARK = "__nccl_hip_shim__"


def _make_getattr(modname: str, names: tuple[str, ...], ns: dict):
    def __getattr__(name: str):
        if name in names:
            impl = importlib.import_module(f"{__name__}.{_IMPL[name]}")
            value = getattr(impl, name)
            ns[name] = value  # later lookups skip this function
            return value
        raise AttributeError(
            f"module {modname!r} has no attribute {name!r}: {modname}.{name} is not provided "
            "by the HIP shim of cuda.core (nccl._hip_compat.cuda_core_shim)")

    return __getattr__


def is_shim_module(mod) -> bool:
    return getattr(mod, _SHIM_MARK, False) is True


def build_modules() -> dict[str, types.ModuleType]:
    """``{sys.modules key: module}`` for every spelling (not yet installed)."""
    mods: dict[str, Any] = {}
    for suffix, (is_pkg, names) in SERVED.items():
        name = "cuda.core" + suffix
        mod: Any = types.ModuleType(name, f"HIP shim of {name} (nccl._hip_compat.cuda_core_shim).")
        mod.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=is_pkg)
        if is_pkg:
            mod.__path__ = []
        mod.__all__ = list(names)
        mod.__getattr__ = _make_getattr(name, names, mod.__dict__)
        setattr(mod, _SHIM_MARK, True)
        mods[name] = mod
    core = mods["cuda.core"]
    for suffix in SERVED:
        if suffix.count(".") == 1:  # direct children of cuda.core
            setattr(core, suffix[1:], mods["cuda.core" + suffix])
    mods["cuda.core._memory"]._buffer = mods["cuda.core._memory._buffer"]
    core.experimental = core
    for suffix in SERVED:
        mods["cuda.core.experimental" + suffix] = mods["cuda.core" + suffix]
    return mods
