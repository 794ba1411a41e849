"""How torch finds nccl4py_host without `import nccl.torch`, on torch 2.13 and >= 2.14.

torch >= 2.14 loads the ``torch.distributed.backends`` entry point when a group
names the backend; torch 2.13 runs the ``torch.backends`` entry point
(``_nccl4py_torch_autoload``) while it is imported.  Each case runs in a fresh
interpreter (what is imported is the point).
"""
from __future__ import annotations

import subprocess
import sys
import textwrap
from importlib.metadata import entry_points

import pytest

from conftest import clean_env
from torch_ranks import needs_host, needs_torch, run_job


def run(code: str, **env: str | None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=300, env=clean_env(NCCL4PY_BACKEND="host", **env))


def _installed() -> None:
    lazy = [ep.value for ep in entry_points(group="torch.distributed.backends")
            if ep.name == "nccl4py_host"]
    eager = [ep.value for ep in entry_points(group="torch.backends") if ep.name == "nccl4py_host"]
    if not eager:
        pytest.skip("nccl4py is not installed with its metadata (entry points)")
    assert lazy == ["nccl.torch.registration:register"], lazy
    assert eager == ["_nccl4py_torch_autoload:autoload"], eager


# Stand-ins for torch and torch.distributed, so that both branches of the
# torch.backends entry point run whichever torch (if any) is installed.
STAND_INS = """
import sys, types, warnings
torch = types.ModuleType("torch")
dist = types.ModuleType("torch.distributed")
torch.distributed = dist
sys.modules["torch"], sys.modules["torch.distributed"] = torch, dist
calls = []
class Backend:
    _plugins = {}
    backend_list = []
    @classmethod
    def register_backend(cls, name, func, devices=None):
        calls.append((name, devices))
        cls._plugins[name.upper()] = func
dist.Backend = Backend
dist.is_available = lambda: AVAILABLE
def ours():
    return sorted(m for m in sys.modules if m == "nccl" or m.startswith("nccl."))
"""


def test_torch_backends_entry_point_with_stand_ins():
    """torch with the lazy group: nothing imported; torch 2.13's: registered
    for the CPU without nccl.core; no torch.distributed: nothing; nccl.torch
    failing to import: a warning, never an exception out of torch's import."""
    code = STAND_INS + textwrap.dedent("""
        import _nccl4py_torch_autoload as hook
        AVAILABLE = True
        Backend._ensure_backend_registered = classmethod(lambda cls, name: None)
        hook.autoload()
        print("lazy", calls, ours())
        AVAILABLE = False
        del Backend._ensure_backend_registered
        hook.autoload()
        print("unavailable", calls, ours())
        AVAILABLE = True
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "nccl.torch":
                    raise ImportError("blocked")
        sys.meta_path.insert(0, Block())
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            hook.autoload()
        print("broken", calls, [str(x.message) for x in w])
        sys.meta_path.pop(0)
        hook.autoload()
        print("eager", calls, "nccl.torch.registration" in ours(), "nccl.core" in ours())
    """)
    p = run(code)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == [
        "lazy [] []",
        "unavailable [] []",
        "broken [] ['nccl4py could not register the nccl4py_host backend: blocked']",
        "eager [('nccl4py_host', ['cpu'])] True False",
    ], p.stdout


LAZY_OR_SKIP = """
import sys, torch, torch.distributed as dist
if not hasattr(dist.Backend, "_ensure_backend_registered"):
    print("no lazy group"); sys.exit(0)
ours = [m for m in sys.modules if m == "nccl" or m.startswith("nccl.")]
assert not ours and "nccl4py_host" not in dist.Backend.backend_list, ours
"""


def _lazy(p: subprocess.CompletedProcess) -> list[str]:
    assert p.returncode == 0, p.stderr
    if p.stdout.strip() == "no lazy group":
        pytest.skip("this torch (< 2.14) has no torch.distributed.backends group")
    return p.stdout.split()


@needs_torch
@needs_host
@pytest.mark.parametrize("autoload", ["1", "0"])
def test_init_process_group_loads_the_backend(autoload):
    """Importing torch >= 2.14 imports nothing of nccl; init_process_group
    naming the backend loads it (TORCH_DEVICE_BACKEND_AUTOLOAD, the switch of
    the other group, does not matter)."""
    _installed()
    code = LAZY_OR_SKIP + textwrap.dedent("""
        dist.init_process_group("nccl4py_host", store=dist.HashStore(), rank=0, world_size=1)
        t = torch.arange(3.0)
        dist.all_reduce(t)
        print(type(dist.group.WORLD).__name__, t.tolist() == [0.0, 1.0, 2.0],
              "nccl.torch" in sys.modules, dist.get_backend())
        dist.destroy_process_group()
    """)
    out = _lazy(run(code, TORCH_DEVICE_BACKEND_AUTOLOAD=autoload))
    assert out == ["HostProcessGroup", "True", "True", "nccl4py_host"], out


@needs_torch
@needs_host
def test_new_group_and_is_backend_available_load_the_backend():
    _installed()
    code = LAZY_OR_SKIP + textwrap.dedent("""
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        print("nccl.torch" in sys.modules)
        g = dist.new_group([0], backend="nccl4py_host")
        t = torch.ones(2)
        dist.all_reduce(t, group=g)
        print(type(g).__name__, t.tolist(), dist.is_backend_available("nccl4py_host"))
        dist.destroy_process_group()
    """)
    assert _lazy(run(code)) == ["False", "HostProcessGroup", "[1.0,", "1.0]", "True"]
    code = LAZY_OR_SKIP + "print(dist.is_backend_available('nccl4py_host'))\n"
    assert _lazy(run(code)) == ["True"]


@needs_torch
@needs_host
@pytest.mark.parametrize("other", ["gloo", "nccl"])
def test_mixed_group(tmp_path, other):
    """"cpu:nccl4py_host,cuda:<other>": on torch >= 2.14 the CPU's backend of
    torch's group is a HostBackend, and collectives, sends and receives,
    batch_isend_irecv of 16 MiB and DDP (against gloo) run through it; the
    group's destruction destroys its communicator.  torch 2.13 cannot call a
    Python backend: the group is refused, naming the other backend."""
    results, out = run_job(tmp_path, "torch_mixed.py", 2,
                           ["tcp://127.0.0.1:{port}", f"cpu:nccl4py_host,cuda:{other}"])
    assert sorted(results) == [0, 1], out[-4000:]
    for r in (0, 1):
        res = results[r]["results"]
        if not res["python backends"]:
            assert res["init"].startswith(
                f"UnsupportedError: nccl4py_host beside cuda:{other} in one group needs "
                "torch >= 2.14 (this is 2.13"), res
            assert "make a group per backend" in res["init"], res
            continue
        if other == "nccl" and res["init"] != "ok":
            # torch's own: a CPU-only build, or no GPU for ProcessGroupNCCL
            assert ("NCCL built in" in res["init"] or "no GPUs found" in res["init"]), res
            pytest.skip(f"torch cannot make an NCCL backend here: {res['init']}")
        assert res["init"] == "ok" and res["checks"] == "ok", res
        assert res["destroyed"] is True, res
