"""Builds the recording HIP runtime stub (tests/gpu_runtime_stub.c, whose
prototypes come from the runtime table src/gpu_runtime.h) as
``libamdhip64.so`` and points NCCL4PY_GPU_RUNTIME at it.

Test modules call :func:`use_stub` at import time, i.e. during collection,
before anything loads the GPU runtime in the test process.
"""
from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
_built: Path | None = None


def build_stub(outdir: Path | None = None) -> Path:
    global _built
    if _built is not None and outdir is None:
        return _built
    from conftest import cc

    from conftest import _STUB_DIR

    out_dir = outdir or Path(tempfile.mkdtemp(prefix="nccl4py-gpu-stub-", dir=_STUB_DIR))
    out = out_dir / "libamdhip64.so"
    subprocess.run([cc(), "-std=c11", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
                    "-pthread", f"-I{ROOT / 'src'}", "-o", str(out),
                    str(HERE / "gpu_runtime_stub.c")], check=True)
    if outdir is None:
        _built = out
    return out


def use_stub() -> Path:
    """Build the stub and make the test process's GPU runtime the stub."""
    path = build_stub()
    os.environ.setdefault("NCCL4PY_GPU_RUNTIME", str(path))
    return path


def runtime_is_stub() -> bool:
    from nccl import _runtime

    info = _runtime.info()
    return bool(info["loaded"]) and str(info["path"]).endswith("libamdhip64.so") and \
        "nccl4py-gpu-stub-" in str(info["path"])
