"""RCCL-only collectives (absent from NVIDIA NCCL).

``all_reduce_with_bias(sendbuff, recvbuff, count, datatype, op, comm, stream, acc)``
    all-reduce, then add the ``count`` elements at ``acc`` to the result.

``all_to_all_v(sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls, datatype, comm, stream)``
    counts and displacements are in elements of ``datatype``, one per rank;
    pass addresses of ``size_t`` arrays or Python sequences (copied for the
    call and checked against the communicator's size).  Resolves
    ``ncclAllToAllv`` and falls back to ``ncclAlltoAllv``.

On a library without these symbols both raise ``FunctionNotFoundError``, a
``NotImplementedError`` naming the C symbol.
"""
from nccl._nccl import all_reduce_with_bias, all_to_all_v

__all__ = ["all_reduce_with_bias", "all_to_all_v"]
