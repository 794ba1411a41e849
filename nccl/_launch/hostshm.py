"""Removing what a host-backend job left in ``/dev/shm`` once it has ended.

When a rank exits before creating its communicator, the ranks waiting for it
in creation are stopped by the launcher (SIGTERM), and nothing runs their
cleanup: the segment they had named would stay in /dev/shm until a later job
creates a communicator.  So once every rank has exited, the launcher asks the
bundled host backend to remove the names of the segments nobody can use any
more (``nccl4pyHostRemoveStale()``, the sweep the backend also runs when it
creates a segment).
"""

from __future__ import annotations


def remove_stale() -> int:
    """Run the host backend's sweep; how many names it removed (0 without it)."""
    try:
        import ctypes

        from nccl import _discovery

        fn = ctypes.CDLL(_discovery.host_backend_path()).nccl4pyHostRemoveStale
    except (OSError, AttributeError, ImportError):
        return 0
    fn.restype = ctypes.c_int
    fn.argtypes = []
    return int(fn())
