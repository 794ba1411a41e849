"""Internal helpers of :mod:`nccl.run` (the launcher and the rank environment).

Nothing here is public API: import from :mod:`nccl.run` instead.
"""
