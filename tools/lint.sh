#!/usr/bin/env bash
# Static analysis of the C sources: cppcheck and clang-tidy.
# Files owned by the GPU runtime layer are included; every finding fails.
#   tools/lint.sh            both tools
#   LINT_TOOLS=cppcheck tools/lint.sh   only one of them
# Needs: apt-get install -y cppcheck clang-tidy
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
PY=${PYTHON:-python3}
PYINC=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['include'])")
"$PY" tools/gen   # src/gen/ must be current
SRC=$(ls src/*.c src/gen/*.c)
HOST=$(ls host/*.c | grep -v '/test_')
TOOLS=${LINT_TOOLS:-cppcheck clang-tidy}
missing=""
for tool in $TOOLS; do
    case "$tool" in
        cppcheck|clang-tidy) command -v "$tool" >/dev/null || missing="$missing $tool" ;;
        *) echo "tools/lint.sh: unknown tool '$tool' in LINT_TOOLS (cppcheck, clang-tidy)" >&2
           exit 2 ;;
    esac
done
if [ -n "$missing" ]; then
    echo "tools/lint.sh: not installed:$missing (apt-get install -y$missing; or" \
         "LINT_TOOLS=<the other one> tools/lint.sh)" >&2
    exit 2
fi
rc=0

if [[ " $TOOLS " == *" cppcheck "* ]]; then
    echo "== cppcheck $(cppcheck --version)"
    common=(--quiet --error-exitcode=1 --std=c11 --inline-suppr --enable=warning,portability,performance
            --suppressions-list=tools/cppcheck-suppressions.txt -D__GNUC__ -D__linux__ -D__x86_64__
            -D_GNU_SOURCE --library=posix)
    cppcheck "${common[@]}" -Isrc -DPY_SSIZE_T_CLEAN "-DPy_BEGIN_ALLOW_THREADS={" "-DPy_END_ALLOW_THREADS=}" "-DPy_RETURN_NONE=return Py_None" $SRC || rc=1
    cppcheck "${common[@]}" -Isrc -Ihost $HOST || rc=1
fi

if [[ " $TOOLS " == *" clang-tidy "* ]]; then
    echo "== $(clang-tidy --version | grep -i version | head -1)"
    PYINC="$PYINC" printf '%s\n' $SRC $HOST | xargs -P "$(nproc)" -I{} sh -c '
        case "$1" in
            host/*) flags="-D_GNU_SOURCE -pthread -Isrc -Ihost" ;;
            *) flags="-Isrc -I$2" ;;
        esac
        clang-tidy --quiet "$1" -- -std=c11 $flags 2>/dev/null || { echo "clang-tidy: $1"; exit 1; }
    ' _ {} "$PYINC" || rc=1
fi
[ $rc -eq 0 ] && echo "LINT OK" || echo "LINT FAILED"
exit $rc
