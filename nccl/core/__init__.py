"""``nccl.core``: the Pythonic API of nccl4py (drop-in for nccl4py 0.2 and 0.3).

    from nccl.core import Communicator, get_unique_id, SUM
    with Communicator.init(nranks, rank, uid) as comm:
        comm.allreduce(x, y, SUM)

Buffers are anything with DLPack, the buffer protocol or
``__cuda_array_interface__`` (torch, CuPy, JAX, NumPy, ...), or explicit
``(buf, count)``, ``(buf, dtype)``, ``(buf, count, dtype)`` specs.
"""
from .typing import *  # noqa: F401,F403
from .typing import __all__ as _typing_all
from .constants import *  # noqa: F401,F403
from .constants import __all__ as _constants_all
from .enums import NcclCftCap, NcclCftTeamMode, NcclHostCftMode, NcclNvlsHostMode
from .properties import NCCLCommProperties
from .params import dump_params, params
from .encryption import set_encryption
from .team import (GinBarrierRequirement, LLA2ARequirement, LsaBarrierRequirement, NCCLTeam,
                   TeamRequirement)
from .coll_config import NCCLCollConfig, VendorOption
from .config import NCCLConfig, NCCLDevCommRequirements, WaitSignalDesc
from .communicator import CPUDevice, Communicator
from .resources import CustomRedOp, DevCommResource, RegisteredBufferHandle, RegisteredWindowHandle
from .devhandles import CftLeInfo, GinBarrierHandle, LLA2AHandle, LsaBarrierHandle, MultimemHandle
from .group import GroupSimInfo, group, group_end, group_simulate_end, group_start
from .utils import (LibraryInfo, UniqueId, Version, VersionInfo, __version__, get_error_string,
                    get_lib_path, get_lib_version, get_unique_id, get_version, show_versions)
from .memory import HostBuffer, mem_alloc, mem_free
from . import buffer, cuda  # nccl4py 0.6's submodules

__all__ = [*_typing_all, *_constants_all,
           "NcclHostCftMode", "NcclNvlsHostMode", "NcclCftTeamMode", "NcclCftCap",
           "NCCLCollConfig", "VendorOption", "NCCLCommProperties", "NCCLTeam",
           "TeamRequirement", "LsaBarrierRequirement", "GinBarrierRequirement", "LLA2ARequirement",
           "params", "dump_params", "set_encryption",
           "NCCLConfig", "WaitSignalDesc", "NCCLDevCommRequirements", "Communicator", "CPUDevice",
           "RegisteredBufferHandle", "RegisteredWindowHandle", "CustomRedOp", "DevCommResource",
           "MultimemHandle", "LsaBarrierHandle", "GinBarrierHandle", "LLA2AHandle", "CftLeInfo",
           "group", "group_start", "group_end", "group_simulate_end", "GroupSimInfo",
           "__version__", "LibraryInfo", "VersionInfo", "get_version", "show_versions",
           "Version", "get_lib_version", "get_lib_path", "UniqueId",
           "get_unique_id", "get_error_string", "mem_alloc", "mem_free", "HostBuffer",
           "cupy", "torch"]


def __getattr__(name: str):
    if name in ("torch", "cupy"):
        import importlib

        mod = importlib.import_module(f"nccl.core.interop.{name}")
        globals()[name] = mod
        return mod
    raise AttributeError(f"module 'nccl.core' has no attribute {name!r}")
