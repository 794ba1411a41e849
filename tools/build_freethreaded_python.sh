#!/usr/bin/env bash
# Builds a free-threaded CPython 3.13 ("3.13t") from Debian trixie's source
# package, for the free-threading checks of .ci/run, and keeps it: when the
# prefix already holds a working interpreter of the asked kind, it does nothing.
#
#   bash tools/build_freethreaded_python.sh           # -> /opt/python3.13t
#   bash tools/build_freethreaded_python.sh --tsan    # -> /opt/python3.13t-tsan
#   bash tools/build_freethreaded_python.sh --prefix DIR [--tsan]
#   bash tools/build_freethreaded_python.sh --check [--tsan] [--prefix DIR]
#
# --check builds nothing: exit 0 when the prefix holds a working interpreter
# of that kind, 1 when not.
# --tsan adds --with-thread-sanitizer (a ThreadSanitizer build of the
# interpreter, for the thread tests under TSan).  The interpreter is
# PREFIX/bin/python3.13t either way.
#
# How: a private apt configuration (its own sources.list with trixie's deb-src
# line and its own lists directory, so the machine's apt setup is neither used
# nor changed) fetches python3.13's orig tarball (upstream's source, no Debian
# patches); then ./configure --disable-gil --prefix=PREFIX, make, make install.
# The test suite (Lib/test) is not installed; the test extension modules
# (_testcapi, ...) are built and installed.  Missing build dependencies are
# installed with apt-get when run as root (Debian 12 or 13), else named.
#
# Environment: JOBS (make's -j, default 2), N4P_FT_WORK (download and build
# directory, default /var/tmp/nccl4py-python3.13t; kept, so a second variant
# reuses the download).  Logs: N4P_FT_WORK/<variant>/{configure,make,install}.log.
# Takes 10-25 minutes on 2 cores (the TSan build the longer).
set -euo pipefail

variant=plain
prefix=
check=0
while [ $# -gt 0 ]; do
    case "$1" in
        --tsan) variant=tsan ;;
        --check) check=1 ;;
        --prefix) prefix=${2:?--prefix needs a directory}; shift ;;
        --prefix=*) prefix=${1#--prefix=} ;;
        -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "build_freethreaded_python.sh: unknown argument: $1" >&2; exit 2 ;;
    esac
    shift
done
if [ -z "$prefix" ]; then
    prefix=/opt/python3.13t
    [ "$variant" = tsan ] && prefix=/opt/python3.13t-tsan
fi
python=$prefix/bin/python3.13t
work=${N4P_FT_WORK:-/var/tmp/nccl4py-python3.13t}
jobs=${JOBS:-2}

# A working interpreter: 3.13, free-threaded, TSan exactly when asked, and the
# modules pip, venv and the tests need.
works() {
    [ -x "$python" ] || return 1
    TSAN_OPTIONS="${TSAN_OPTIONS:-} exitcode=0" \
        "$python" - "$variant" >/dev/null 2>&1 <<'EOF'
import sys, sysconfig
import ssl, ctypes, zlib, bz2, lzma, sqlite3, hashlib, ensurepip, venv
assert sys.version_info[:2] == (3, 13)
assert sysconfig.get_config_var("Py_GIL_DISABLED") == 1
tsan = "--with-thread-sanitizer" in (sysconfig.get_config_var("CONFIG_ARGS") or "")
assert tsan == (sys.argv[1] == "tsan")
EOF
}

if works; then
    echo "build_freethreaded_python.sh: $python works; nothing to do"
    exit 0
fi
if [ "$check" = 1 ]; then
    echo "build_freethreaded_python.sh: no working $variant free-threaded 3.13 at $prefix"
    exit 1
fi

mkdir -p "$work"
# One build of a variant at a time (CI and a person may start it together).
exec 9>"$work/$variant.lock"
flock 9
if works; then
    echo "build_freethreaded_python.sh: $python works; nothing to do"
    exit 0
fi
start=$SECONDS

# ----------------------------------------------------------- build dependencies
# What configure needs for the modules checked above and for readline/curses
# (uuid, ffi for ctypes, ssl for pip, ...).  Optional ones (dbm, tkinter) are
# used when present and not installed.
deps=(gcc make libc6-dev pkg-config xz-utils debian-archive-keyring
      libssl-dev zlib1g-dev libffi-dev libbz2-dev liblzma-dev libsqlite3-dev
      libreadline-dev libncurses-dev uuid-dev libexpat1-dev)
missing=()
for p in "${deps[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' \
        || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "build_freethreaded_python.sh: missing build dependencies: ${missing[*]}" >&2
        echo "  install them (apt-get install ${missing[*]}) or run as root" >&2
        exit 1
    fi
    echo "build_freethreaded_python.sh: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# -------------------------------------------------------------- the source
cd "$work"
if ! ls python3.13_*.orig.tar.xz >/dev/null 2>&1; then
    echo "build_freethreaded_python.sh: fetching python3.13's source from Debian trixie"
    echo 'deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main' \
        > sources.list
    mkdir -p lists/partial
    apt=(-o Dir::Etc::sourcelist="$work/sources.list"
         -o Dir::Etc::sourceparts=/dev/null
         -o Dir::State::Lists="$work/lists"
         -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=
         -o APT::Sandbox::User=root)
    apt-get -q "${apt[@]}" update
    apt-get -q "${apt[@]}" --download-only source python3.13
fi
tarball=$(ls python3.13_*.orig.tar.xz | sort -V | tail -n 1)

rm -rf "$work/$variant"
mkdir -p "$work/$variant"
cd "$work/$variant"
tar -xJf "$work/$tarball"
src=$(ls -d "$work/$variant"/Python-3.13.* | head -n 1)
logs=$work/$variant

run() {  # run LOG CMD...: the command's output goes to LOG, its tail to stderr on failure
    local log=$1; shift
    echo "build_freethreaded_python.sh: [$((SECONDS - start))s] $* (log: $log)"
    if ! "$@" >"$log" 2>&1; then
        tail -n 40 "$log" >&2
        echo "build_freethreaded_python.sh: failed: $*" >&2
        exit 1
    fi
}

flags=(--disable-gil --prefix="$prefix")
[ "$variant" = tsan ] && flags+=(--with-thread-sanitizer)
cd "$src"
run "$logs/configure.log" ./configure "${flags[@]}"
run "$logs/make.log" make -j"$jobs"
# TESTSUBDIRS= leaves the test suite (Lib/test, 140 MB) out of the install,
# and the install precompiles no bytecode (3 optimization levels of the whole
# standard library: 25 of the TSan build's 50 minutes on 2 loaded cores):
# PYTHON_FOR_BUILD, the built interpreter, skips the compileall runs and
# does the rest (ensurepip) as always.  Modules are compiled when first
# imported instead.
cat >"$logs/python-for-build" <<EOF
#!/bin/sh
case "\$*" in *compileall.py*) exit 0 ;; esac
exec "$src/python" -E "\$@"
EOF
chmod +x "$logs/python-for-build"
run "$logs/install.log" make install TESTSUBDIRS= PYTHON_FOR_BUILD="$logs/python-for-build"

if ! works; then
    echo "build_freethreaded_python.sh: $python was installed but does not work:" >&2
    "$python" -c 'import ssl, ctypes, zlib, bz2, lzma, sqlite3, ensurepip, venv' >&2 || true
    exit 1
fi
rm -rf "$src"
echo "build_freethreaded_python.sh: built $python in $((SECONDS - start))s"
