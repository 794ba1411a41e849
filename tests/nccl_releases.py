"""The NCCL releases the heavy tier tests, and their wheels.

``RELEASES`` (oldest first) are the nvidia-nccl-cu13 releases tested side
by side (tests/test_real_nccl_releases.py): the first and last are the range
of the cu12/cu13 extras (setup.py's EXTRAS), the last is the release the
tables describe (NCCL4PY_ABI_VERSION_CODE).  :func:`fetch` downloads one
release's wheel once, keeping its headers and libnccl.so.2 in
``$NCCL4PY_TEST_CACHE`` (default ``~/.cache/nccl4py-tests``).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

RELEASES = ("2.28.3", "2.32.3", "2.32.6")

DOWNLOAD_TIMEOUT = 600  # seconds, per wheel


def cache_dir() -> Path:
    return Path(os.environ.get("NCCL4PY_TEST_CACHE") or Path.home() / ".cache" / "nccl4py-tests")


def code_of(release: str) -> int:
    """``"2.32.6"`` -> 23206."""
    major, minor, patch = (int(x) for x in release.split("."))
    return major * 10000 + minor * 100 + patch


def fetch(release: str) -> Path:
    """A folder with include/ and lib/libnccl.so.2 of nvidia-nccl-cu13==release,
    from the cache or downloaded (the test is skipped when the download fails
    or takes over DOWNLOAD_TIMEOUT seconds)."""
    cache = cache_dir()
    dest = cache / f"nvidia-nccl-cu13-{release}"
    if (dest / "lib" / "libnccl.so.2").exists() and (dest / "include" / "nccl.h").exists():
        return dest
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps",
               f"nvidia-nccl-cu13=={release}", "-d", tmp]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.skip(f"nvidia-nccl-cu13=={release} took over {DOWNLOAD_TIMEOUT} s to download")
        wheels = list(Path(tmp).glob("*.whl"))
        if p.returncode != 0 or not wheels:
            pytest.skip(f"nvidia-nccl-cu13=={release} could not be downloaded (offline?): "
                        f"{p.stderr.strip()[-300:]}")
        part = Path(tmp) / "tree"
        with zipfile.ZipFile(wheels[0]) as z:
            for name in z.namelist():
                if name.startswith("nvidia/nccl/include/") or name == "nvidia/nccl/lib/libnccl.so.2":
                    z.extract(name, part)
        shutil.rmtree(dest, ignore_errors=True)
        (part / "nvidia" / "nccl").rename(dest)
    return dest
