"""nccl4py's ``torch.backends`` entry point, which torch runs while it is imported.

torch 2.14 and later read the ``torch.distributed.backends`` entry-point group
when ``init_process_group``, ``new_group`` or ``is_backend_available`` names a
backend; nccl4py registers ``nccl4py_host`` there
(``nccl.torch.registration:register``).  On those versions ``autoload`` does
nothing, so importing torch imports nothing of the ``nccl`` package.  torch
2.13 has only this group: there it registers the backend at once
(``nccl.torch.registration.autoload``).

This module lives outside the ``nccl`` package because importing any module
of a package runs the package's ``__init__`` first.  It imports nothing
itself: torch.distributed is imported by torch before its entry points run.
"""

__all__ = ["autoload"]


def autoload() -> None:
    try:
        import torch.distributed as dist

        if not dist.is_available():
            return
        # the method that reads the torch.distributed.backends group (torch >= 2.14)
        if hasattr(dist.Backend, "_ensure_backend_registered"):
            return
    except Exception:  # never break `import torch`; registration warns
        pass
    try:
        from nccl.torch.registration import autoload as register_now
    except Exception as e:
        import warnings

        warnings.warn(f"nccl4py could not register the nccl4py_host backend: {e}",
                      RuntimeWarning, stacklevel=2)
        return
    register_now()
