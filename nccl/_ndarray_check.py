"""The sample arrays that check the numpy.ndarray fast path (src/ndarray_fast.c).

When the C core first meets a type named ``numpy.ndarray`` it calls
``register(type)``, which this module registers at its import (nccl._nccl's init
imports it): the arrays are made with the NumPy module that type
comes from (already imported, since an instance exists; NumPy is never
imported here) and handed to ``nccl._nccl._ndarray_register``, which turns
the fast path on only where its reading of each array agrees with the buffer
protocol's.  Every built-in dtype in every byte order, and the layouts the
general path refuses or treats specially, are among them.  Nothing here may
warn (a warning turned into an error would only turn the fast path off).
"""
from __future__ import annotations

import sys
from typing import Any

from nccl import _nccl


def _layouts(np: Any, ndarray: type) -> list:
    base = np.arange(24, dtype=np.float32)
    m = base.reshape(4, 6)
    ro = np.arange(8, dtype=np.float32)
    ro.setflags(write=False)
    raw = bytearray(4 * 8 + 1)
    unaligned = ndarray((8,), np.float32, buffer=raw, offset=1)  # writable, not aligned
    # np.broadcast_arrays marks what it broadcast: writable flag, read-only buffer
    warn_1x8, warn_2x8 = (np.broadcast_arrays(np.ones((1, 8), np.float32),
                                              np.ones(8, np.float32))[1],
                          np.broadcast_arrays(np.ones((2, 8), np.float32),
                                              np.ones(8, np.float32))[1])
    return [
        base, m, m.T, m[:, :3], m[::2], base[::-1], base[1:], base[::2], m[1:2], m[:, 1:2],
        base[:0], m[:0], m.T[:0], ndarray((0, 1 << 40), np.float32),
        np.zeros((), np.float32), np.array(5, np.int64), base.reshape(1, 24, 1), m.reshape(4, 1, 6),
        ro, ro[::-1], unaligned, warn_1x8, warn_2x8,
        np.zeros(3, dtype=[("a", np.float32), ("b", np.int8)]),
        np.zeros(3, dtype=np.dtype([("a", np.float32)])),
        np.zeros(3, dtype=np.dtype((np.void, 4))),
        np.zeros(3, dtype=np.dtype(np.float32, metadata={"unit": "m"})),
        np.zeros((2, 3), dtype=np.dtype((np.float32, (2,)))),
    ]


def samples(ndarray: type) -> list:
    """The check's arrays of `ndarray` (exactly that type), or [] when it is
    not the ``ndarray`` of an imported module."""
    np = sys.modules.get(getattr(ndarray, "__module__", ""))
    if np is None or getattr(np, "ndarray", None) is not ndarray:
        return []
    out = []
    for code in np.typecodes["All"]:
        unit = "8[s]" if code in "Mm" else ""
        dt = np.dtype(code + unit if code not in "SUV" else code + "4")
        for order in ("=", "<", ">", "|"):
            out.append(np.zeros(3, dtype=dt.newbyteorder(order)))
            out.append(np.zeros((2, 3), dtype=dt.newbyteorder(order)).T)
    out += _layouts(np, ndarray)
    return [a for a in out if type(a) is ndarray]


def register(ndarray: type) -> bool:
    """Check the fast path on `ndarray`'s samples; whether it is on."""
    return _nccl._ndarray_register(ndarray, samples(ndarray))


_nccl._register("ndarray_check", register)  # what C calls (src/ndarray_fast.c)
