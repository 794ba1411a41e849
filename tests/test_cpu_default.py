"""On a machine without a visible GPU the bundled host backend is the
default, also when an NCCL wheel is installed; naming a library or a
platform keeps the seed's discovery order; with a GPU visible nothing falls
back.  "A GPU is visible" is tested with a fake /dev (NCCL4PY_TEST_DEV_DIR)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import REAL_NCCL, ROOT, clean_env, host_available, mpiexec, run_python
from nccl import _discovery


@pytest.fixture
def nodev(tmp_path):
    d = tmp_path / "dev-without-gpu"
    d.mkdir()
    (d / "nvidiactl").touch()  # a driver control node is not a GPU
    (d / "null").touch()
    return d


@pytest.fixture
def gpudev(tmp_path):
    d = tmp_path / "dev-with-gpu"
    d.mkdir()
    (d / "nvidia0").touch()
    (d / "nvidiactl").touch()
    return d


@pytest.fixture
def env(monkeypatch, tmp_path, nodev):
    """No GPU, an NCCL wheel on sys.path, no variable set."""
    for var in ("NCCL_LIBRARY", "NCCL4PY_BACKEND", "NCCL4PY_PLATFORM", "ROCM_PATH", "HIP_PATH",
                "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
                "ROCR_VISIBLE_DEVICES"):
        monkeypatch.delenv(var, raising=False)
    wheel = tmp_path / "site" / "nvidia" / "nccl" / "lib"
    wheel.mkdir(parents=True)
    (wheel / "libnccl.so.2").write_bytes(b"")
    monkeypatch.setattr(sys, "path", [str(tmp_path / "site")])
    monkeypatch.setenv(_discovery.TEST_DEV_DIR_ENV, str(nodev))
    monkeypatch.setattr(_discovery, "_find_library", lambda name: None)
    monkeypatch.setattr(_discovery, "_hip_runtime_hint", lambda: None)
    monkeypatch.setattr(_discovery, "host_backend_path", lambda: str(tmp_path / "libhost.so"))
    (tmp_path / "libhost.so").write_bytes(b"")
    monkeypatch.wheel = str(wheel / "libnccl.so.2")  # type: ignore[attr-defined]
    return monkeypatch


def paths(cands):
    return [p for _, p in cands]


def test_no_gpu_with_an_nccl_wheel_selects_the_host_backend(env, tmp_path):
    decision, cands = _discovery.candidates()
    assert paths(cands) == [str(tmp_path / "libhost.so")]
    assert decision.startswith("no GPU is visible") and "host backend" in decision


@pytest.mark.parametrize("var,value", [("CUDA_VISIBLE_DEVICES", ""),
                                       ("CUDA_VISIBLE_DEVICES", "-1")])
def test_hidden_gpus_select_the_host_backend(env, tmp_path, gpudev, var, value):
    env.setenv(_discovery.TEST_DEV_DIR_ENV, str(gpudev))
    env.setenv(var, value)
    decision, cands = _discovery.candidates()
    assert paths(cands) == [str(tmp_path / "libhost.so")]
    assert f"{var}={value!r} hides" in decision


def test_platform_named_keeps_the_seed_order(env):
    env.setenv("NCCL4PY_PLATFORM", "cuda")
    decision, cands = _discovery.candidates()
    assert paths(cands)[:2] == [env.wheel, "libnccl.so.2"]
    assert "librccl.so" in paths(cands) and not any("libhost" in p for p in paths(cands))
    assert decision == "platform cuda first: NCCL4PY_PLATFORM=cuda"
    env.setenv("NCCL4PY_PLATFORM", "rocm")
    _, cands = _discovery.candidates()
    assert paths(cands)[0] == "/opt/rocm/lib/librccl.so"


def test_nccl_library_is_still_alone(env):
    env.setenv("NCCL_LIBRARY", "/x/libmine.so")
    assert _discovery.candidates()[1] == [("NCCL_LIBRARY", "/x/libmine.so")]


def test_gpu_visible_never_falls_back(env, gpudev):
    env.setenv(_discovery.TEST_DEV_DIR_ENV, str(gpudev))
    decision, cands = _discovery.candidates()
    assert paths(cands)[0] == env.wheel
    assert not any("libhost" in p for p in paths(cands))
    assert decision.startswith("GPUs are visible (1 NVIDIA GPU device node(s)")


def test_missing_host_backend_is_said(env, tmp_path):
    env.setattr(_discovery, "host_backend_path", lambda: str(tmp_path / "absent.so"))
    decision, cands = _discovery.candidates()
    assert paths(cands)[0] == env.wheel
    assert "host backend is missing" in decision and "absent.so" in decision


def test_visible_gpus_counts(tmp_path, nodev, gpudev):
    assert _discovery.visible_gpus({}, str(nodev))[0] == 0
    assert _discovery.visible_gpus({}, str(gpudev))[0] == 1
    (gpudev / "nvidia1").touch()
    assert _discovery.visible_gpus({}, str(gpudev))[0] == 2
    assert _discovery.visible_gpus({"CUDA_VISIBLE_DEVICES": "1"}, str(gpudev))[0] == 1
    assert _discovery.visible_gpus({"CUDA_VISIBLE_DEVICES": ""}, str(gpudev))[0] == 0
    assert _discovery.visible_gpus({"HIP_VISIBLE_DEVICES": ""}, str(gpudev))[0] == 2
    # visibility variables do not create GPUs on a machine without any
    assert _discovery.visible_gpus({"CUDA_VISIBLE_DEVICES": "0,1"}, str(nodev))[0] == 0
    amd = tmp_path / "amd"
    (amd / "dri").mkdir(parents=True)
    (amd / "kfd").touch()
    assert _discovery.visible_gpus({}, str(amd))[0] == 1
    for i in range(3):
        (amd / "dri" / f"renderD{128 + i}").touch()
    assert _discovery.visible_gpus({}, str(amd))[0] == 3
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        assert _discovery.visible_gpus({name: "-1"}, str(amd))[0] == 0
    assert _discovery.gpus_visible({}, str(amd)) and not _discovery.gpus_visible({}, str(nodev))


def test_bad_dev_dir_is_an_error(env, tmp_path):
    env.setenv(_discovery.TEST_DEV_DIR_ENV, str(tmp_path / "nope"))
    with pytest.raises(ValueError, match="NCCL4PY_TEST_DEV_DIR"):
        _discovery.candidates()


# ------------------------------------------------- the real loader, end to end

def _wheel():
    wheels = _discovery._wheel_libraries()
    if not wheels:
        pytest.skip("no nvidia-nccl wheel installed (pip install nvidia-nccl-cu13)")
    return wheels[0]


LOADED = "import nccl.bindings as b; print(b.get_library_path())"


@REAL_NCCL
@pytest.mark.skipif(not host_available(), reason="host backend not built")
def test_loader_without_gpu_loads_the_host_backend(nodev):
    _wheel()
    p = run_python(LOADED, clean_env(**{_discovery.TEST_DEV_DIR_ENV: str(nodev)}))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == _discovery.host_backend_path()


@REAL_NCCL
def test_loader_with_a_gpu_loads_the_nccl_wheel(gpudev):
    wheel = _wheel()
    p = run_python(LOADED, clean_env(**{_discovery.TEST_DEV_DIR_ENV: str(gpudev)}))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == wheel


@REAL_NCCL
def test_loader_with_platform_named_loads_the_nccl_wheel(nodev):
    wheel = _wheel()
    p = run_python(LOADED, clean_env(NCCL4PY_PLATFORM="cuda",
                                     **{_discovery.TEST_DEV_DIR_ENV: str(nodev)}))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == wheel


# ----------------------------------------------------------- python -m nccl

def run_main(env, *args):
    return subprocess.run([sys.executable, "-m", "nccl", *args], env=env, capture_output=True,
                          text=True, timeout=60)


def _numbers_or_null(obj, where="$"):
    """Every value under a key that names a count is an int or None."""
    bad = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if (k.endswith("count") or k in ("visible", "api_functions")) and \
                    not (v is None or (isinstance(v, int) and not isinstance(v, bool))):
                bad.append(f"{where}.{k}={v!r}")
            bad += _numbers_or_null(v, f"{where}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            bad += _numbers_or_null(v, f"{where}[{i}]")
    return bad


@pytest.mark.skipif(not host_available(), reason="host backend not built")
def test_main_states_the_cpu_decision(nodev):
    env = clean_env(**{_discovery.TEST_DEV_DIR_ENV: str(nodev)})
    p = run_main(env)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "GPUs visible: 0 (no GPU device node" in out
    assert "decision: no GPU is visible" in out
    assert f"bundled host backend: present ({_discovery.host_backend_path()}); chosen" in out
    assert out.count(_discovery.host_backend_path()) == 3  # host line, candidate, loaded
    j = json.loads(run_main(env, "--json").stdout)
    assert j["host_backend"] == {"path": _discovery.host_backend_path(), "present": True,
                                 "chosen": True}
    assert j["gpus"]["visible"] == 0
    assert [c["status"] for c in j["candidates"]] == ["loaded"]
    assert _numbers_or_null(j) == []


def test_main_lists_each_candidate_once(gpudev):
    """With a GPU visible and nothing loadable, every candidate is listed once
    (the loader's error, which lists them too, is shown without its list)."""
    env = clean_env(NCCL4PY_PLATFORM="rocm", ROCM_PATH="/nonexistent-rocm", LD_LIBRARY_PATH="",
                    **{_discovery.TEST_DEV_DIR_ENV: str(gpudev)})
    code = ("import sys; sys.path[:] = [p for p in sys.path if 'site-packages' not in p "
            "or 'nccl4py' in p]; from nccl.__main__ import main; main([])")
    p = run_python(code, env)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    cands = [ln for ln in lines if ln.startswith("  - [")]
    assert len(cands) >= 4 and len(set(cands)) == len(cands)
    for path in ("/nonexistent-rocm/lib/librccl.so", "/opt/rocm/lib/librccl.so"):
        assert sum(path in ln for ln in lines) == 1, p.stdout
    assert "no NCCL/RCCL library could be loaded." in p.stdout
    assert "bundled host backend: present" in p.stdout and "; not chosen" in p.stdout


def test_main_json_counts_are_numbers_or_null():
    from nccl._diagnostics import gpu_runtime

    class Broken:
        @staticmethod
        def gpu_runtime_info():
            return {"loaded": True, "platform": "cuda", "path": "/x/libcudart.so"}

        @staticmethod
        def gpu_runtime_device_count():
            raise RuntimeError("cudaErrorInsufficientDriver")

    r = gpu_runtime(Broken)
    assert r["device_count"] is None and "InsufficientDriver" in r["device_count_error"]
    assert gpu_runtime(object())["device_count"] is None
    assert _numbers_or_null({"a": {"device_count": "3"}}) == ["$.a.device_count='3'"]


# ------------------------------------ examples and the bench on a CPU machine

def _mpi_job(nodev, *command, **env):
    if mpiexec() is None:
        pytest.skip("no mpiexec (pip install mpich mpi4py)")
    pytest.importorskip("mpi4py")
    _wheel()  # the situation of the issue: an NCCL wheel is installed
    return subprocess.run([mpiexec(), "-n", "2", sys.executable, *command],
                          env=clean_env(**{_discovery.TEST_DEV_DIR_ENV: str(nodev)}, **env),
                          capture_output=True, text=True, timeout=300, cwd=ROOT)


@REAL_NCCL
@pytest.mark.skipif(not host_available(), reason="host backend not built")
def test_get_version_without_gpu(nodev):
    _wheel()
    p = run_python("import nccl; print(nccl.get_version())",
                   clean_env(**{_discovery.TEST_DEV_DIR_ENV: str(nodev)}))
    assert p.returncode == 0, p.stderr
    assert "libnccl4py_host.so" in p.stdout


@REAL_NCCL
@pytest.mark.skipif(not host_available(), reason="host backend not built")
def test_example_under_mpiexec_without_gpu_uses_numpy(nodev):
    p = _mpi_job(nodev, "examples/01_basic/01_allreduce.py")
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count("SUCCESS") == 2


@REAL_NCCL
@pytest.mark.skipif(not host_available(), reason="host backend not built")
def test_bench_under_mpiexec_without_gpu_uses_numpy(nodev):
    p = _mpi_job(nodev, "-m", "nccl.bench", "all_reduce", "-b", "8", "-e", "1K", "-f", "8",
                 "-n", "2")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "host memory (nccl4py host backend)" in p.stdout
    assert "# Result: OK" in p.stdout


@REAL_NCCL
def test_gpu_library_without_gpu_says_what_to_do(nodev):
    p = _mpi_job(nodev, "-m", "nccl.bench", "all_reduce", "-b", "8", "-e", "8",
                 NCCL4PY_PLATFORM="cuda")
    assert p.returncode != 0
    assert "NCCL needs GPU arrays, but no GPU is visible" in p.stderr, p.stderr
    assert "NCCL4PY_BACKEND=host" in p.stderr
