"""The version of nccl4py: ``<upstream>.<release>``.

``<upstream>`` (``API_LEVEL``) is the release of NVIDIA's nccl4py whose API
this package implements; ``<release>`` counts this package's releases at
that level.  ``0.6.0.1`` is the first release with nccl4py 0.6.0's API.  By
PEP 440 it sorts after upstream ``0.6.0`` and before ``0.6.1`` and ``0.7``,
so a requirement such as ``nccl4py>=0.3`` or ``pip install -U nccl4py`` keeps
this package as long as upstream has no later release (see README.md).
"""
API_LEVEL = "0.6.0"
__version__ = "0.6.0.1"
