#!/usr/bin/env bash
# Compiles every C file of the extension (src/*.c, src/gen/*.c) against the
# headers of Pythons this machine has no interpreter for, taken from Debian
# sid's libpythonX.Y-dev packages, once as they are and once with
# Py_GIL_DISABLED defined (Debian ships no free-threaded headers; the
# difference is that macro in pyconfig.h).  Any diagnostic fails.
#
#   bash tools/check_python_headers.sh            # 3.14 and 3.15
#   bash tools/check_python_headers.sh 3.15
#
# A private apt configuration (its own sources.list and lists directory)
# fetches the packages; the machine's apt setup is neither used nor changed.
# Environment: CC (default gcc).
set -euo pipefail
cd "$(dirname "$0")/.."
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(3.14 3.15)
cc=${CC:-gcc}
[ -f src/gen/api_table.h ] || python3 tools/gen

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
arch=$(dpkg --print-architecture)
echo "deb [arch=$arch signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian sid main" \
    > "$work/sources.list"
mkdir -p "$work/lists/partial"
apt=(-o Dir::Etc::sourcelist="$work/sources.list" -o Dir::Etc::sourceparts=/dev/null
     -o Dir::State::Lists="$work/lists" -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=
     -o APT::Sandbox::User=root)
apt-get -qq "${apt[@]}" update
failed=0
for v in "${versions[@]}"; do
    (cd "$work" && apt-get -qq "${apt[@]}" download "libpython$v-dev")
    dpkg-deb -x "$work"/libpython"$v"-dev_*.deb "$work/root"
    inc=$work/root/usr/include
    full=$(sed -n 's/^#define PY_VERSION *"\(.*\)"/\1/p' "$inc/python$v/patchlevel.h")
    for ft in "" -DPy_GIL_DISABLED=1; do
        bad=0
        for f in src/*.c src/gen/*.c; do
            if ! out=$("$cc" -std=c11 -O2 -Wall -Wextra -fvisibility=hidden -fPIC -pthread $ft \
                        -Isrc -I"$inc/python$v" -I"$inc" -c "$f" -o /dev/null 2>&1) || [ -n "$out" ]; then
                echo "$f (Python $full${ft:+, free-threaded}):" >&2
                echo "$out" >&2
                bad=$((bad + 1))
            fi
        done
        echo "Python $full${ft:+ with Py_GIL_DISABLED}: $(ls src/*.c src/gen/*.c | wc -l) files, $bad with a diagnostic"
        failed=$((failed + bad))
    done
done
[ "$failed" = 0 ]
