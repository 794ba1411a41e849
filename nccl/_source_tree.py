"""``import nccl`` from a source checkout whose C extension is not built.

After ``pip install .`` (not ``-e``) the built extension (``nccl/_nccl*.so``)
and the host backend (``nccl/_lib/``) are in site-packages, not in the
checkout.  Python run from the checkout's root (``python -m nccl.run``,
``python -m nccl``, ``python -c ...``) finds the checkout's ``nccl/`` first,
which has the Python files but not the build.  In that case ``nccl``
takes its submodules from the installed copy instead (it points the
package's ``__path__`` there, the standard way for a package to say where
its submodules live), so every command works from the checkout as from
anywhere else.  When the two copies are of different versions, a warning
says which one runs.  With no installed copy either, :func:`missing_build`
gives the one line that says what to do.

For a package that has its extension, :func:`use_installed_copy` returns
after one check per extension suffix.
"""
from __future__ import annotations

import importlib.machinery
import os
import re
import sys

__all__ = ["has_extension", "installed_copy", "use_installed_copy", "missing_build"]

_VERSION = re.compile(r'^__version__\s*=\s*"([^"]+)"', re.M)


def has_extension(pkg_dir: str) -> bool:
    """True when *pkg_dir* holds ``_nccl`` built for this interpreter."""
    return any(os.path.isfile(os.path.join(pkg_dir, "_nccl" + suffix))
               for suffix in importlib.machinery.EXTENSION_SUFFIXES)


def installed_copy(pkg_dir: str) -> str | None:
    """Another ``nccl`` package on ``sys.path`` with its extension built, or None."""
    for entry in sys.path:
        candidate = os.path.join(entry or os.getcwd(), "nccl")
        try:
            if os.path.samefile(candidate, pkg_dir):
                continue
        except OSError:  # no such directory
            continue
        if os.path.isfile(os.path.join(candidate, "__init__.py")) and has_extension(candidate):
            return candidate
    return None


def _version_in(pkg_dir: str) -> str | None:
    try:
        with open(os.path.join(pkg_dir, "_version.py"), encoding="utf-8") as f:
            m = _VERSION.search(f.read())
    except OSError:
        return None
    return m.group(1) if m else None


def use_installed_copy(path: list[str]) -> None:
    """Called by ``nccl/__init__.py`` with its ``__path__``: when the package
    directory lacks the extension and an installed copy has it, take the
    submodules from there."""
    here = path[0] if path else ""
    if not here or has_extension(here):
        return
    other = installed_copy(here)
    if other is None:
        return
    path[:] = [other]
    mine, theirs = _version_in(here), _version_in(other)
    if mine != theirs:
        import warnings

        warnings.warn(f"nccl4py {theirs} installed at {other} runs, not the source checkout "
                      f"{os.path.dirname(here)} ({mine}), whose C extension is not built; "
                      "`pip install -e .` there makes the checkout itself importable",
                      RuntimeWarning, stacklevel=3)


def missing_build() -> str | None:
    """The one line that says what to do when ``nccl`` comes from a source
    tree without its build (and no installed copy was found); None otherwise."""
    import nccl

    here = os.path.dirname(os.path.abspath(nccl.__file__))
    if has_extension(nccl.__path__[0]):
        return None
    root = os.path.dirname(here)
    return (f"nccl is imported from the source tree {root}, where its C extension is not "
            f"built: run `pip install -e .` in {root} (or `pip install .` and then run from "
            "another directory)")
