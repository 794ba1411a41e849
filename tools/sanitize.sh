#!/usr/bin/env bash
# Build an ASan+UBSan copy of nccl4py in a temporary directory and run tests
# under it.
#
#   tools/sanitize.sh                 the single-process and multi-rank suites
#   tools/sanitize.sh TEST...         only these pytest paths / node ids
#   SANITIZE_KEEP=1 tools/sanitize.sh keep the temporary copy (path printed)
#   SANITIZER=thread PYTHON=/opt/python3.13t-tsan/bin/python3.13t \
#       tools/sanitize.sh tests/test_free_threading.py tests/test_threads.py
#                                     ThreadSanitizer instead: the extension and
#                                     the host backend built with -fsanitize=thread
#                                     (NCCL4PY_SANITIZE=thread), meant for a TSan
#                                     build of a free-threaded interpreter
#                                     (--disable-gil --with-thread-sanitizer); the
#                                     reports CPython itself causes are suppressed
#                                     by tools/tsan-suppressions.txt (each entry
#                                     says why); any other report fails the run.
#
# Python itself is not instrumented, so the Python run uses detect_leaks=0;
# leaks in the host backend are checked separately by its own C test under
# LeakSanitizer (make -C host asan-test, detect_leaks=1).  Every sanitizer
# report fails the run: halt_on_error / abort_on_error, and the logs
# (log_path) are scanned afterwards, also for reports from subprocesses.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
CC=${CC:-gcc}
MODE=${SANITIZER:-address}
case "$MODE" in
    address) FLAG=1 ;;
    thread) FLAG=thread ;;
    *) echo "SANITIZER=$MODE: use address (the default) or thread" >&2; exit 2 ;;
esac

WORK=$(mktemp -d "${TMPDIR:-/tmp}/nccl4py-sanitize.XXXXXX")
cleanup() { [ -n "${SANITIZE_KEEP:-}" ] && echo "kept $WORK" || rm -rf "$WORK"; }
trap cleanup EXIT

echo "== copying the tree to $WORK/src"
mkdir -p "$WORK/src" "$WORK/logs"
tar -C "$ROOT" --exclude=./.git --exclude=./build --exclude='./host/build' \
    --exclude='*.so' --exclude='*.o' --exclude='__pycache__' --exclude=.pytest_cache \
    --exclude=.benchmarks --exclude=.whl --exclude='*.egg-info' -cf - . | tar -C "$WORK/src" -xf -
cd "$WORK/src"

echo "== building with NCCL4PY_SANITIZE=$FLAG"
NCCL4PY_SANITIZE=$FLAG CC="$CC" "$PY" setup.py -q build_ext --inplace >"$WORK/logs/build.txt" 2>&1 \
    || { cat "$WORK/logs/build.txt"; exit 1; }

if [ "$MODE" = thread ]; then
    LIBTSAN=$("$CC" -print-file-name=libtsan.so)
    [ -e "$LIBTSAN" ] || { echo "sanitizer runtime not found: $LIBTSAN" >&2; exit 1; }
    export LD_PRELOAD="$LIBTSAN"  # the same runtime a TSan interpreter links
    export TSAN_OPTIONS="halt_on_error=0:second_deadlock_stack=1:log_path=$WORK/logs/tsan:suppressions=$ROOT/tools/tsan-suppressions.txt"
    export PYTHONPATH="$WORK/src${PYTHONPATH:+:$PYTHONPATH}"
    export PYTHONDONTWRITEBYTECODE=1
    export NCCL4PY_SANITIZED_TREE="$WORK/src"
    "$PY" - <<'PYEOF'
import os, subprocess, nccl._nccl as m
want = os.environ["NCCL4PY_SANITIZED_TREE"]
assert m.__file__.startswith(want), (m.__file__, want)
for f in (m.__file__, os.path.join(want, "nccl", "_lib", "libnccl4py_host.so")):
    nm = subprocess.run(["nm", "-D", f], capture_output=True, text=True).stdout
    assert "__tsan_" in nm, f"{f} is not instrumented"
print("instrumented (TSan):", m.__file__)
PYEOF
    [ $# -gt 0 ] || set -- tests/test_free_threading.py tests/test_threads.py
    echo "== pytest under TSan: $*"
    rc=0
    "$PY" -m pytest -q -p no:cacheprovider "$@" || rc=$?
    reports=$(ls "$WORK"/logs/tsan.* 2>/dev/null || true)
    if [ -n "$reports" ]; then
        echo "== TSan reports:"
        for f in $reports; do echo "--- $f"; head -80 "$f"; done
        rc=1
    fi
    echo "TSan reports: $(echo -n "$reports" | grep -c . || true)"
    [ $rc -eq 0 ] && echo "SANITIZE OK" || echo "SANITIZE FAILED ($rc)"
    exit $rc
fi

LIBASAN=$("$CC" -print-file-name=libasan.so)
LIBUBSAN=$("$CC" -print-file-name=libubsan.so)
for f in "$LIBASAN" "$LIBUBSAN"; do
    [ -e "$f" ] || { echo "sanitizer runtime not found: $f" >&2; exit 1; }
done

export LD_PRELOAD="$LIBASAN:$LIBUBSAN"
export ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=1:log_path=$WORK/logs/asan"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$WORK/logs/ubsan"
export PYTHONPATH="$WORK/src${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
export NCCL4PY_SANITIZED_TREE="$WORK/src"

echo "== checking that the instrumented copy is the one imported"
"$PY" - <<'PYEOF'
import os, subprocess, nccl._nccl as m
want = os.environ["NCCL4PY_SANITIZED_TREE"]
assert m.__file__.startswith(want), (m.__file__, want)
nm = subprocess.run(["nm", "-D", m.__file__], capture_output=True, text=True).stdout
assert "__asan_" in nm and "__ubsan_" in nm, "extension is not instrumented"
host = os.path.join(want, "nccl", "_lib", "libnccl4py_host.so")
nm = subprocess.run(["nm", "-D", host], capture_output=True, text=True).stdout
assert "__asan_" in nm, "host backend is not instrumented"
print("instrumented:", m.__file__)
PYEOF

if [ $# -eq 0 ]; then
    set -- tests/test_marshal.py tests/test_bad_input.py tests/test_buffer_resolution.py \
        tests/test_stream_resolution.py tests/test_structs.py tests/test_core_calls.py \
        tests/test_refcounts.py tests/test_host_collectives.py tests/test_host_misc.py \
        tests/test_core_multirank.py tests/test_faults.py
fi
echo "== pytest under ASan+UBSan: $*"
rc=0
"$PY" -m pytest -q -p no:cacheprovider -x "$@" || rc=$?

echo "== host backend C test under ASan+UBSan+LSan (detect_leaks=1)"
env -u LD_PRELOAD -u ASAN_OPTIONS -u UBSAN_OPTIONS make -s -C host asan-test BUILD="$WORK/hostbuild" \
    >"$WORK/logs/host-asan.txt" 2>&1 || { tail -50 "$WORK/logs/host-asan.txt"; rc=1; }
tail -3 "$WORK/logs/host-asan.txt"

reports=$(ls "$WORK"/logs/asan.* "$WORK"/logs/ubsan.* 2>/dev/null || true)
if [ -n "$reports" ]; then
    echo "== sanitizer reports:"
    for f in $reports; do echo "--- $f"; head -60 "$f"; done
    rc=1
fi
if grep -qE "ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:" "$WORK/logs/host-asan.txt"; then
    echo "== sanitizer report in the host backend's C test"; rc=1
fi
echo "sanitizer reports: $(echo -n "$reports" | grep -c . || true)"
[ $rc -eq 0 ] && echo "SANITIZE OK" || echo "SANITIZE FAILED ($rc)"
exit $rc
