"""Library discovery and loading.

The candidate order is checked directly against nccl._discovery (with the
environment and sys.path controlled); the C loader is checked in
subprocesses with small stub libraries built here: the first loadable
candidate wins, every failure is reported with its dlerror(), NCCL_LIBRARY
is used alone, and missing symbols raise NotImplementedError.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from conftest import build_stub, clean_env, run_python
from nccl import _discovery


@pytest.fixture
def env(monkeypatch, tmp_path):
    """A machine with one visible NVIDIA GPU (a fake /dev) and nothing else."""
    for var in ("NCCL_LIBRARY", "NCCL4PY_BACKEND", "NCCL4PY_PLATFORM", "ROCM_PATH", "HIP_PATH",
                "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
                "ROCR_VISIBLE_DEVICES"):
        monkeypatch.delenv(var, raising=False)
    dev = tmp_path / "dev-with-gpu"
    dev.mkdir()
    (dev / "nvidia0").touch()
    monkeypatch.setenv(_discovery.TEST_DEV_DIR_ENV, str(dev))
    monkeypatch.setattr(_discovery, "_find_library", lambda name: None)
    monkeypatch.setattr(_discovery, "_hip_runtime_hint", lambda: None)
    return monkeypatch


def paths(cands):
    return [p for _, p in cands]


def test_nccl_library_is_used_alone(env):
    env.setenv("NCCL_LIBRARY", "/x/libmine.so")
    env.setenv("NCCL4PY_BACKEND", "host")
    decision, cands = _discovery.candidates()
    assert cands == [("NCCL_LIBRARY", "/x/libmine.so")]
    assert "NCCL_LIBRARY" in decision


def test_host_backend_selection(env):
    env.setenv("NCCL4PY_BACKEND", "host")
    _, cands = _discovery.candidates()
    assert paths(cands) == [_discovery.host_backend_path()]
    env.setenv("NCCL4PY_BACKEND", "bogus")
    with pytest.raises(ValueError, match="NCCL4PY_BACKEND"):
        _discovery.candidates()


def test_rocm_order(env, tmp_path):
    env.setattr(_discovery, "_find_library", lambda name: f"/ldcache/lib{name}.so")
    env.setenv("NCCL4PY_PLATFORM", "rocm")
    env.setenv("ROCM_PATH", "/rocm")
    env.setenv("HIP_PATH", "/hip")
    env.setenv("CUDA_HOME", "/cuda")
    env.setattr(sys, "path", [str(tmp_path)])
    decision, cands = _discovery.candidates()
    assert paths(cands) == [
        "/ldcache/librccl.so", "/rocm/lib/librccl.so", "/hip/lib/librccl.so",
        "/opt/rocm/lib/librccl.so", "librccl.so",
        "/cuda/lib64/libnccl.so.2", "/ldcache/libnccl.so", "libnccl.so.2"]
    assert "rocm" in decision


def test_cuda_order_with_wheel_first(env, tmp_path):
    wheel = tmp_path / "nvidia" / "nccl" / "lib"
    wheel.mkdir(parents=True)
    (wheel / "libnccl.so.2").write_bytes(b"")
    env.setattr(sys, "path", [str(tmp_path)])
    env.setenv("CUDA_HOME", "/cuda")
    env.setenv("ROCM_PATH", "/rocm")
    decision, cands = _discovery.candidates()
    assert paths(cands) == [
        str(wheel / "libnccl.so.2"), "/cuda/lib64/libnccl.so.2", "libnccl.so.2",
        "/rocm/lib/librccl.so", "/opt/rocm/lib/librccl.so", "librccl.so"]
    assert "platform cuda first" in decision and "GPUs are visible" in decision


def test_hip_runtime_puts_rocm_first(env, tmp_path):
    env.setattr(sys, "path", [str(tmp_path)])
    env.setattr(_discovery, "_hip_runtime_hint", lambda: "/opt/rocm/lib/libamdhip64.so exists")
    decision, cands = _discovery.candidates()
    assert paths(cands)[0] == "/opt/rocm/lib/librccl.so"
    env.setenv("NCCL4PY_PLATFORM", "cuda")
    _, cands = _discovery.candidates()
    assert paths(cands)[0] == "libnccl.so.2"
    env.setenv("NCCL4PY_PLATFORM", "metal")
    with pytest.raises(ValueError, match="NCCL4PY_PLATFORM"):
        _discovery.candidates()


# ------------------------------------------------------------ real loader

REPORT = ("import json, nccl._nccl as m; r = m._loader_report(); "
          "print(json.dumps({k: r[k] for k in ('path', 'error', 'attempts', 'decision')}))")


def report(env):
    import json

    p = run_python(REPORT, env)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_import_loads_no_library():
    code = ("import nccl, nccl.bindings, nccl.bindings.rocm_extensions, nccl._nccl as m;"
            "print([e[4] for e in m._api_table()][:3]);"
            "print(open('/proc/self/maps').read().count('recording_stub'))")
    p = run_python(code, dict(os.environ))
    assert p.returncode == 0, p.stderr
    assert p.stdout.split("\n")[:2] == ["[None, None, None]", "0"]


def test_rocm_path_then_hip_path(stub_dir):
    rocm = stub_dir / "rocm" / "lib"
    hip = stub_dir / "hip" / "lib"
    build_stub("librccl.so", noop=True, outdir=rocm)
    build_stub("librccl.so", noop=True, outdir=hip)
    env = clean_env(NCCL4PY_PLATFORM="rocm", ROCM_PATH=str(rocm.parent), HIP_PATH=str(hip.parent),
                    LD_LIBRARY_PATH="")
    r = report(env)
    assert r["path"] == str(rocm / "librccl.so")
    # a broken file at ROCM_PATH is skipped with its dlerror, HIP_PATH wins
    broken = stub_dir / "rocm-broken" / "lib"
    broken.mkdir(parents=True)
    (broken / "librccl.so").write_text("not an ELF file")
    env["ROCM_PATH"] = str(broken.parent)
    r = report(env)
    assert r["path"] == str(hip / "librccl.so")
    first = [a for a in r["attempts"] if a[1] == str(broken / "librccl.so")][0]
    assert first[2] and "librccl.so" in first[2]


def test_bare_soname_through_loader_path(stub_dir):
    d = stub_dir / "ldpath"
    build_stub("librccl.so", noop=True, outdir=d)
    env = clean_env(NCCL4PY_PLATFORM="rocm", LD_LIBRARY_PATH=str(d))
    r = report(env)
    assert Path(r["path"]).resolve() == (d / "librccl.so").resolve()


def test_fake_wheel_layout_is_preferred(stub_dir):
    site = stub_dir / "site"
    lib = site / "nvidia" / "nccl" / "lib"
    build_stub("libnccl.so.2", noop=True, outdir=lib)
    env = clean_env(NCCL4PY_PLATFORM="cuda", PYTHONPATH=str(site) + os.pathsep +
                    os.environ.get("PYTHONPATH", ""))
    r = report(env)
    assert r["path"] == str(lib / "libnccl.so.2")


def test_cuda_home_when_no_wheel_loads(stub_dir):
    """A wheel file that fails to load is reported and CUDA_HOME is next."""
    site = stub_dir / "site-broken"
    wl = site / "nvidia" / "nccl" / "lib"
    wl.mkdir(parents=True)
    (wl / "libnccl.so.2").write_text("garbage")
    cuda = stub_dir / "cuda"
    build_stub("libnccl.so.2", noop=True, outdir=cuda / "lib64")
    code = ("import sys; sys.path[:] = [p for p in sys.path if 'site-packages' not in p "
            f"or 'nccl4py' in p] + [{str(site)!r}]; " + REPORT)
    env = clean_env(NCCL4PY_PLATFORM="cuda", CUDA_HOME=str(cuda))
    p = run_python(code, env)
    import json

    r = json.loads(p.stdout)
    labels = [a[0] for a in r["attempts"]]
    assert labels[:2] == ["nvidia-nccl wheel", "$CUDA_HOME/lib64"], r
    assert r["attempts"][0][2]  # the broken wheel's dlerror
    assert r["path"] == str(cuda / "lib64" / "libnccl.so.2")


def test_nothing_loads_lists_every_candidate():
    code = ("import nccl.bindings as b\n"
            "try:\n    b.get_version()\n"
            "except b.NotSupportedError as e:\n    print('NSE', isinstance(e, RuntimeError)); print(e)\n")
    env = clean_env(NCCL_LIBRARY="/nonexistent/libnccl.so.2")
    p = run_python(code, env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("NSE True")
    assert "/nonexistent/libnccl.so.2" in p.stdout and "No such file" in p.stdout
    assert "NCCL_LIBRARY" in p.stdout
    # without NCCL_LIBRARY, both families are listed with their errors
    code2 = code.replace("b.get_version()", "b.get_unique_id()")
    env = clean_env(NCCL4PY_PLATFORM="rocm", LD_LIBRARY_PATH="", ROCM_PATH="/nonexistent-rocm")
    p = run_python("import sys; sys.path[:] = [p for p in sys.path if 'site-packages' not in p "
                   "or 'nccl4py' in p]\n" + code2, env)
    assert p.returncode == 0, p.stderr
    for expect in ("/nonexistent-rocm/lib/librccl.so", "librccl.so", "libnccl.so.2"):
        assert expect in p.stdout, p.stdout


MISSING = ("ncclCommGrow", "ncclCommRevoke", "ncclPutSignal", "ncclWaitSignal",
           "ncclAllReduceWithBias", "ncclAllToAllv")


def test_missing_symbols_raise_not_implemented(stub_dir):
    lib = build_stub("libmissing.so", omit=MISSING, outdir=stub_dir / "missing")
    code = r"""
import nccl.bindings as b
from nccl.bindings import rocm_extensions as rx
calls = {
    "ncclCommGrow": lambda: b.comm_grow(0, 0, 0, 0, 0),
    "ncclCommRevoke": lambda: b.comm_revoke(0, 0),
    "ncclPutSignal": lambda: b.put_signal(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
    "ncclWaitSignal": lambda: b.wait_signal(0, 0, 0, 0),
    "ncclAllReduceWithBias": lambda: rx.all_reduce_with_bias(0, 0, 0, 0, 0, 0, 0, 0),
    "ncclAllToAllv": lambda: rx.all_to_all_v(0, 0, 0, 0, 0, 0, 0, 0, 0),
}
for sym, call in calls.items():
    try:
        call()
    except NotImplementedError as e:
        assert isinstance(e, b.FunctionNotFoundError), type(e)
        print(sym, "|", e)
    else:
        print(sym, "| no error")
print("version", b.get_version())
"""
    p = run_python(code, clean_env(NCCL_LIBRARY=str(lib)))
    assert p.returncode == 0, p.stderr
    lines = dict(l.split(" | ", 1) for l in p.stdout.splitlines() if " | " in l)
    for sym in MISSING:
        assert sym in lines[sym] and "not found" in lines[sym], lines
    assert "ncclAlltoAllv" in lines["ncclAllToAllv"]  # the alternative was tried too
    assert "version" in p.stdout


def test_alternative_symbol_is_used(stub_dir):
    """A library exporting only ncclAlltoAllv serves all_to_all_v."""
    extra = r"""
__attribute__((visibility("default"))) ncclResult_t ncclAlltoAllv(const void *s, const size_t *sc,
    const size_t *sd, void *r, const size_t *rc, const size_t *rd, ncclDataType_t t,
    ncclComm_t c, cudaStream_t st)
{ (void)s; (void)sc; (void)sd; (void)r; (void)rc; (void)rd; (void)t; (void)c; (void)st;
  return ncclInvalidUsage; }
"""
    lib = build_stub("libalt.so", noop=True, omit=("ncclAllToAllv",), outdir=stub_dir / "alt",
                     extra_c=extra)
    code = ("import nccl.bindings as b\nfrom nccl.bindings import rocm_extensions as rx\n"
            "try:\n    rx.all_to_all_v(0, 0, 0, 0, 0, 0, 0, 0, 0)\n"
            "except b.NCCLError as e:\n    print('status', e.status)\n")
    p = run_python(code, clean_env(NCCL_LIBRARY=str(lib)))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "status 5"


def test_concurrent_first_use_loads_once(stub_dir):
    code = r"""
import threading, nccl.bindings as b
res, barrier = [], threading.Barrier(8)
def go():
    barrier.wait()
    res.append(b.get_library_path())
ts = [threading.Thread(target=go) for _ in range(8)]
[t.start() for t in ts]; [t.join() for t in ts]
import nccl._nccl as m
print(len(set(res)), len(res), len(m._loader_report()["attempts"]))
"""
    lib = build_stub("libconc.so", noop=True, outdir=stub_dir / "conc")
    p = run_python(code, clean_env(NCCL_LIBRARY=str(lib)))
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["1", "8", "1"]


def test_the_host_backends_own_symbols_are_looked_up_in_one_place():
    """Only loader.c binds nccl4pyHost* symbols, from the loaded library (never
    the process-wide RTLD_DEFAULT scope); the others use n4p_host."""
    import re

    from conftest import ROOT

    found = {}
    for path in sorted((ROOT / "src").rglob("*.c")):
        text = path.read_text()
        for m in re.finditer(r"dlsym\(\s*([^,]+),\s*\"(nccl4py\w+)\"", text):
            found.setdefault(path.name, set()).add((m.group(1).strip(), m.group(2)))
        assert "RTLD_DEFAULT" not in text, path.name
    assert set(found) == {"loader.c"}, found
    assert {sym for _, sym in found["loader.c"]} == {
        "nccl4pyHostBackend", "nccl4pyHostSetInterruptCheck", "nccl4pyHostWaitState"}
