"""Optional framework helpers: ``nccl.core.torch`` and ``nccl.core.cupy``."""
