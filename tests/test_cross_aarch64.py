"""aarch64 on an x86-64 machine: the extension and the host backend
cross-compiled with Debian's gcc-aarch64-linux-gnu through setup.py (the
same BuildExt and compiler object as a native build), with no x86 code in
them, and the host backend's C test (tests/test_host.c) run under
qemu-aarch64 (Debian's qemu-user, with the libc6-dev-arm64-cross sysroot).

The extension needs the target's pyconfig.h (Python.h includes it; sizes
and features are per architecture).  Instead of a second Python for arm64,
the build uses a copy of this Python's headers whose pyconfig.h has the x86
assembler features undefined, with every SIZEOF_*/ALIGNOF_* it states
checked against the cross compiler first: a compile check, not a run (an
aarch64 interpreter under qemu would be one; the release workflow builds
and tests the aarch64 wheels natively)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from conftest import ROOT, clean_env

CROSS = "aarch64-linux-gnu-gcc"
NM = "aarch64-linux-gnu-nm"
QEMU = "qemu-aarch64"
SYSROOT = Path("/usr/aarch64-linux-gnu")
EM_AARCH64 = 183

needs_cross = pytest.mark.skipif(
    shutil.which(CROSS) is None or shutil.which(NM) is None,
    reason=f"{CROSS} is not installed (apt-get install gcc-aarch64-linux-gnu "
           "libc6-dev-arm64-cross; .ci/run does)")

# x86 features pyconfig.h may state that an aarch64 build must not see.
X86_ONLY = ("HAVE_GCC_ASM_FOR_X64", "HAVE_GCC_ASM_FOR_X87", "HAVE_GCC_ASM_FOR_MC68881")
C_TYPES = {"INT": "int", "LONG": "long", "LONG_LONG": "long long", "SHORT": "short",
           "FLOAT": "float", "DOUBLE": "double", "LONG_DOUBLE": "long double",
           "VOID_P": "void *", "SIZE_T": "size_t", "WCHAR_T": "wchar_t", "PID_T": "pid_t",
           "OFF_T": "off_t", "TIME_T": "time_t", "FPOS_T": "fpos_t", "PTHREAD_T": "pthread_t",
           "PTHREAD_KEY_T": "pthread_key_t", "UINTPTR_T": "uintptr_t", "_BOOL": "_Bool"}
HEADERS = "#include <stddef.h>\n#include <stdint.h>\n#include <stdio.h>\n#include <time.h>\n" \
          "#include <wchar.h>\n#include <pthread.h>\n#include <sys/types.h>\n"


def run(cmd, timeout, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    assert p.returncode == 0, f"{cmd}\n{p.stdout[-6000:]}\n{p.stderr[-6000:]}"
    return p


def aarch64_python_headers(where: Path) -> Path:
    """A copy of this Python's include directory with an aarch64 pyconfig.h
    (checked against the cross compiler before it is used)."""
    inc = where / "python-include"
    shutil.copytree(sysconfig.get_paths()["include"], inc)
    text = (inc / "pyconfig.h").read_text()
    for macro in X86_ONLY:
        text = re.sub(rf"^#define {macro}\b.*$", f"/* #undef {macro} (aarch64) */", text,
                      flags=re.M)
    (inc / "pyconfig.h").write_text(text)
    checks = []
    for kind, name, value in re.findall(r"^#define (SIZEOF|ALIGNOF)_(\w+) (\d+)$", text, re.M):
        ctype = C_TYPES.get(name) or ("max_align_t" if name == "MAX_ALIGN_T" else None)
        if ctype is None:
            continue
        op = "sizeof" if kind == "SIZEOF" else "_Alignof"
        checks.append(f'_Static_assert({op}({ctype}) == {value}, "{kind}_{name}");')
    assert len(checks) >= 8, text[:2000]
    probe = where / "pyconfig_check.c"
    probe.write_text(HEADERS + "\n".join(checks) + "\n")
    run([CROSS, "-std=c11", "-c", str(probe), "-o", str(where / "pyconfig_check.o")], 120)
    return inc


def elf_machine(path: Path) -> int:
    head = path.read_bytes()[:20]
    assert head[:4] == b"\x7fELF", path
    return int.from_bytes(head[18:20], "little")


def copy_tree(dst: Path) -> Path:
    ignore = shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "*.so", "*.o",
                                    "__pycache__", ".pytest_cache", ".hypothesis", ".mypy_cache")
    shutil.copytree(ROOT, dst, ignore=ignore)
    return dst


@pytest.mark.heavy("aarch64 cross-build of the extension and the host backend (gcc)")
@needs_cross
def test_cross_build_has_no_x86_code(tmp_path):
    tree = copy_tree(tmp_path / "tree")
    inc = aarch64_python_headers(tmp_path)
    out, temp = tmp_path / "lib", tmp_path / "temp"
    env = clean_env(CC=CROSS, LDSHARED=f"{CROSS} -shared", CFLAGS=f"-I{inc}", LDFLAGS=None,
                    CPPFLAGS=None)
    p = run([sys.executable, "setup.py", "build_ext", "-b", str(out), "-t", str(temp)], 1200,
            cwd=tree, env=env)
    log = p.stdout + p.stderr
    assert CROSS in log  # the cross compiler did compile it, through setup.py
    assert not re.findall(r"^\S+:\d+:\d+: warning:.*$", log, re.M), log[-6000:]
    (ext,) = out.glob("nccl/_nccl*.so")
    host = out / "nccl" / "_lib" / "libnccl4py_host.so"
    assert elf_machine(ext) == EM_AARCH64 and elf_machine(host) == EM_AARCH64
    # The x86 kernel files compile to no code at all (lowp_avx512.c leaves an
    # empty table, which lowp_select.c never takes off x86-64), and the
    # library has no x86 function.
    objs = {o.name: o for o in temp.rglob("*.o")}
    for name in ("lowp_avx2.o", "lowp_avx512.o"):
        code = [ln for ln in run([NM, "--defined-only", str(objs[name])], 60).stdout.splitlines()
                if ln.split()[1] in "TtWw"]
        assert code == [], (name, code)
    functions = [ln.split()[2] for ln in run([NM, str(host)], 60).stdout.splitlines()
                 if len(ln.split()) == 3 and ln.split()[1] in "TtWw"]
    assert "ncclAllReduce" in functions
    x86 = [f for f in functions if re.search(r"avx|_mm\d*_|cpuid|f16c", f, re.I)]
    assert x86 == [], x86


@pytest.mark.heavy("the host backend's C test built for aarch64 and run under qemu-aarch64")
@needs_cross
@pytest.mark.skipif(shutil.which(QEMU) is None or not SYSROOT.is_dir(),
                    reason=f"{QEMU} or {SYSROOT} missing (apt-get install qemu-user "
                           "libc6-dev-arm64-cross; .ci/run does)")
@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_host_c_test_under_qemu(tmp_path):
    build = tmp_path / "build"
    run(["make", "-s", "-C", str(ROOT / "host"), f"CC={CROSS}", f"BUILD={build}",
         f"{build}/test_host"], 1200, env=clean_env())
    assert elf_machine(build / "test_host") == EM_AARCH64
    env = clean_env(QEMU_LD_PREFIX=str(SYSROOT), NCCL_DEBUG="INFO",
                    NCCL4PY_HOST_KERNELS="avx512")
    p = run([QEMU, "-L", str(SYSROOT), str(build / "test_host")], 1800, env=env,
            cwd=tmp_path)
    assert "OK (0 failures)" in p.stdout, p.stdout[-6000:] + p.stderr[-3000:]
    # asked for the most, the kernels taken are the portable ones
    taken = set(re.findall(r"16- and 8-bit float kernels: (\w+)", p.stdout + p.stderr))
    assert taken == {"portable"}, taken
