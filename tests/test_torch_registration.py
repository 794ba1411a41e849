"""How nccl.torch comes to torch: the import, the entry point, the library.

Each case runs in a fresh interpreter (what is imported is the point).
"""
from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import clean_env, host_available
from torch_ranks import needs_torch


def run(code: str, **env: str | None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env=clean_env(**env))


def test_import_without_torch_is_a_clear_error():
    code = ("import sys\n"
            "class NoTorch:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'torch' or name.startswith('torch.'):\n"
            "            raise ImportError('No module named ' + repr(name))\n"
            "sys.meta_path.insert(0, NoTorch())\n"
            "try:\n"
            "    import nccl.torch\n"
            "except ImportError as e:\n"
            "    print('ImportError:', e)\n")
    p = run(code)
    assert p.returncode == 0, p.stderr
    assert "nccl.torch needs PyTorch: pip install 'nccl4py[torch]'" in p.stdout, p.stdout


@needs_torch
def test_torch_backends_entry_point():
    """torch 2.13 runs the torch.backends entry point while it is imported: it
    registers the backend without importing nccl.core.  torch >= 2.14 reads
    torch.distributed.backends when a group names the backend: there the
    entry point does nothing and nothing of the nccl package is imported
    (tests/test_torch_entry_points.py)."""
    code = ("import sys, torch.distributed as dist\n"
            "print('nccl4py_host' in dist.Backend.backend_list, 'nccl.core' in sys.modules,\n"
            "      dist.Backend.default_device_backend_map['cpu'],\n"
            "      hasattr(dist.Backend, '_ensure_backend_registered'), 'nccl' in sys.modules)\n")
    p = run(code, NCCL4PY_BACKEND="host")
    assert p.returncode == 0, p.stderr
    from importlib.metadata import entry_points

    if not any(ep.value == "_nccl4py_torch_autoload:autoload"
               for ep in entry_points(group="torch.backends")):
        pytest.skip("nccl4py is not installed with its metadata (entry points)")
    lazy = p.stdout.split()[3] == "True"
    expect = ["False", "False", "gloo", "True", "False"] if lazy else \
        ["True", "False", "gloo", "False", "True"]
    assert p.stdout.split() == expect, p.stdout
    p = run(code, NCCL4PY_BACKEND="host", TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split()[0] == "False", p.stdout  # the switch torch documents


def _real_nccl() -> str | None:
    import glob
    import importlib.util

    spec = importlib.util.find_spec("nvidia")
    for base in list(spec.submodule_search_locations) if spec else []:
        for path in glob.glob(f"{base}/nccl/lib/libnccl.so*"):
            return path
    return None


@needs_torch
@pytest.mark.skipif(not host_available(), reason="host backend not built")
@pytest.mark.skipif(_real_nccl() is None, reason="no nvidia-nccl wheel installed")
def test_another_library_in_the_process_is_refused():
    code = ("import torch.distributed as dist, nccl.torch\n"
            "try:\n"
            "    dist.init_process_group('nccl4py_host', store=dist.HashStore(), rank=0,\n"
            "                            world_size=1)\n"
            "except nccl.torch.UnsupportedError as e:\n"
            "    print('refused:', e)\n")
    p = run(code, NCCL_LIBRARY=_real_nccl())
    assert p.returncode == 0, p.stderr
    assert "refused: nccl4py_host needs nccl4py's host backend" in p.stdout, p.stdout
    assert "NCCL4PY_BACKEND=host" in p.stdout and "(nccl)" in p.stdout, p.stdout


@needs_torch
@pytest.mark.skipif(not host_available(), reason="host backend not built")
def test_registration_one_rank_group_and_timeouts():
    """register() twice registers once, for the cpu device; a group of one
    rank works; the timeout goes to the watchdog and the host backend's own
    limit; an explicit NCCL4PY_HOST_TIMEOUT is kept."""
    code = ("import os, datetime, torch, torch.distributed as dist, nccl.torch\n"
            "from nccl.torch import rendezvous\n"
            "nccl.torch.register(); nccl.torch.register()\n"
            "print(dist.Backend.backend_list.count('nccl4py_host'), getattr(dist.Backend, 'nccl4py_host'.upper()),\n"
            "      dist.Backend.backend_capability['nccl4py_host'],\n"
            "      nccl.torch.HostProcessGroup.__mro__[-3].__name__)\n"
            "seen = []\n"
            "real = rendezvous.nc.Communicator.init\n"
            "def spy(*a, **k):\n"
            "    seen.append((k.get('timeout'), os.environ.get('NCCL4PY_HOST_TIMEOUT')))\n"
            "    return real(*a, **k)\n"
            "rendezvous.nc.Communicator.init = spy\n"
            "dist.init_process_group('nccl4py_host', store=dist.HashStore(), rank=0,\n"
            "                        world_size=1, timeout=datetime.timedelta(seconds=42))\n"
            "t = torch.ones(3); dist.all_reduce(t); print(t.tolist())\n"
            "os.environ['NCCL4PY_HOST_TIMEOUT'] = '7'\n"
            "g = dist.new_group([0], timeout=datetime.timedelta(days=400))\n"
            "print(seen, os.environ['NCCL4PY_HOST_TIMEOUT'])\n"
            "print(repr(dist.group.WORLD).split(':')[0])\n"
            "dist.destroy_process_group()\n")
    p = run(code, NCCL4PY_BACKEND="host", NCCL4PY_HOST_TIMEOUT=None,
            TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].split() == ["1", "nccl4py_host", "['cpu']", "ProcessGroup"], lines
    assert lines[1] == "[1.0, 1.0, 1.0]"
    assert lines[2] == "[(42.0, '44.0'), (31536000.0, '7')] 7", lines
    assert lines[3] == "<HostProcessGroup '0'", lines
