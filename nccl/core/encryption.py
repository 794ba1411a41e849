"""``set_encryption``: ask the library to encrypt its TCP sockets
(``ncclSetEncryption``, NCCL 2.32).

nccl4py 0.6 binds the C function only (``nccl.bindings.set_encryption`` with
an ``EncryptionConfig``); this is its ``nccl.core`` form.  A library without
the function (older NCCL, RCCL, the host backend) raises
``FunctionNotFoundError`` (a ``NotImplementedError``) naming it.
"""
from __future__ import annotations

from typing import Any

from nccl import bindings as _b
from nccl._errors import NcclInvalid

__all__ = ["set_encryption"]

# Every config the library accepted, kept for the life of the process: it may
# read the key later than the call.
_accepted: list[Any] = []


def set_encryption(psk: str | bytes | None = None, *, mode: int | None = None) -> None:
    """Have the library encrypt its TCP sockets with the pre-shared key
    ``psk`` (``EncryptionMode.PSK``), or send them in plain text when ``psk``
    is None (``EncryptionMode.NONE``).  Call it before creating the
    communicators it should apply to.

    ``mode`` (a ``nccl.bindings.EncryptionMode``) may be given to say which
    one is meant; it must agree with ``psk``.  ``psk`` is text, or bytes in
    UTF-8, without NUL characters; the library sets the rules on the key
    (NCCL 2.32.3 wants at least 32 bytes) and its refusal is an
    ``NCCLError`` with its message.

    Raises NcclInvalid (an unknown mode, a mode that disagrees with psk, a
    psk of another type or with NUL characters), NCCLError (the library
    refused the config) and FunctionNotFoundError (the library has no
    ncclSetEncryption).
    """
    if mode is None:
        mode = _b.EncryptionMode.NONE if psk is None else _b.EncryptionMode.PSK
    elif isinstance(mode, bool) or not isinstance(mode, int) or \
            mode not in _b.EncryptionMode.__members__.values():
        names = ", ".join(f"{m.name} = {m.value}" for m in _b.EncryptionMode)
        raise NcclInvalid(f"mode must be an EncryptionMode ({names}), got {mode!r}")
    mode = _b.EncryptionMode(mode)
    if (psk is None) != (mode == _b.EncryptionMode.NONE):
        raise NcclInvalid(f"mode {mode.name} " + ("needs a psk" if psk is None else
                                                   "takes no psk (it sends plain text)"))
    if isinstance(psk, (bytes, bytearray)):
        try:
            psk = bytes(psk).decode()
        except UnicodeDecodeError:
            raise NcclInvalid("psk as bytes must be UTF-8: the library takes it as a C "
                              "string") from None
    if psk is not None and (not isinstance(psk, str) or "\0" in psk):
        raise NcclInvalid(f"psk must be a str or bytes without NUL characters, got "
                          f"{type(psk).__name__}")
    config = _b.EncryptionConfig()
    config.mode = int(mode)
    config.psk = psk
    _b.set_encryption(config)
    _accepted.append(config)
