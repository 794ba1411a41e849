"""``nccl.bindings``: the low-level API.

``from nccl.bindings import nccl`` (upstream 0.3 style) and
``import nccl.bindings as b; b.comm_init_rank(...)`` (0.2 / seed style) both work.
"""
from . import nccl  # noqa: F401
from .nccl import *  # noqa: F401,F403
from .nccl import __getattr__  # noqa: F401  (lazy *_dtype objects)
from .rocm_extensions import *  # noqa: F401,F403
