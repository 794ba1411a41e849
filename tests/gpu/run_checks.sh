#!/usr/bin/env bash
# GPU check of nccl4py on one GPU with the real library: the gpu-marked tests
# and the per-call overhead against peers, in one call.  On an NVIDIA machine it
# uses NCCL (nvidia-nccl-cu13); on a ROCm machine (the platform decision of
# nccl._discovery, or NCCL4PY_PLATFORM=rocm) it uses RCCL, and the rows that
# only exist on CUDA (upstream nccl4py) are skipped.
#
# Prepare (on a machine with PyPI, from the repository root), once:
#     bash tests/gpu/run_checks.sh --prepare      # upstream nccl4py 0.3.1 and 0.6.0 wheels -> .whl/
# Check the plan without a GPU:
#     bash tests/gpu/run_checks.sh --dry-run
# Run on the GPU machine (its Python has torch, CuPy, cuda.core, mpi4py and
# nvidia-nccl-cu13; nothing can be downloaded there), from the repository root,
# bringing the .whl folder along, with a 480 s limit:
#     bash tests/gpu/run_checks.sh
# The report goes to $OUT when set, else ./gpu-report/.
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
OUTDIR=${OUT:-$PWD/gpu-report}
UPSTREAM_VERSIONS="0.3.1 0.6.0"

prepare() {
    mkdir -p .whl
    for v in $UPSTREAM_VERSIONS; do  # one at a time: pip refuses two versions of one package
        "$PY" -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
            --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 \
            --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
            -d .whl "nccl4py==$v" || return 1
    done
}

check_env() {
    local ok=0
    "$PY" - <<'PYEOF' || ok=1
import importlib.util, shutil, sys
import os, sys
sys.path.insert(0, os.getcwd())
from nccl import _discovery
rocm = _discovery.platform()[0] == "rocm"
print(f"  platform: {'rocm' if rocm else 'cuda'} ({_discovery.platform()[1]})")
need = ["torch", "numpy", "pytest"] + ([] if rocm else ["cupy", "cuda.core", "mpi4py", "nvidia.nccl"])
missing = []
for m in need:
    try:
        found = importlib.util.find_spec(m) is not None
    except ModuleNotFoundError:
        found = False
    print(f"  {'ok     ' if found else 'MISSING'} {m}")
    if not found:
        missing.append(m)
print(f"  {'ok     ' if shutil.which('gcc') or shutil.which('cc') else 'MISSING'} C compiler")
sys.exit(1 if missing else 0)
PYEOF
    for v in $UPSTREAM_VERSIONS; do
        ls .whl/nccl4py-"$v"-*.whl >/dev/null 2>&1 \
            && echo "  ok      .whl/nccl4py-$v wheel" \
            || echo "  MISSING .whl/nccl4py-$v wheel (run --prepare; its upstream rows are skipped)"
    done
    return $ok
}

plan() {
    cat <<PLAN
plan:
  1. build nccl4py in place: $PY setup.py build_ext --inplace (no downloads)
  2. install upstream nccl4py $UPSTREAM_VERSIONS from .whl/, each into a private folder
  3. NCCL4PY_TEST_LIBRARY=<libnccl.so.2 of nvidia-nccl, or librccl.so on ROCm> $PY -m pytest -m gpu tests/gpu (240 s limit)
     (includes tests/gpu/test_gpu_watchdog.py: the watchdog's events, abort and NcclTimeoutError)
  4. $PY bench/gpu_call_overhead.py --calls 10000 --upstream <folder> ... --out $OUTDIR (150 s limit)
  5. write $OUTDIR/report.md (tests summary + overhead table) and the raw numbers
PLAN
}

case "${1:-}" in
    --prepare) prepare; exit $? ;;
    --dry-run)
        echo "environment:"
        check_env && env_ok=1 || env_ok=0
        plan
        if [ "$env_ok" = 1 ]; then echo "dry run: ready"; else echo "dry run: this machine lacks what the GPU run needs (listed above); the plan is unchanged"; fi
        exit 0 ;;
    "") ;;
    *) echo "usage: $0 [--prepare | --dry-run]" >&2; exit 2 ;;
esac

mkdir -p "$OUTDIR"
start=$(date +%s)
echo "environment:"; check_env || true
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
"$PY" setup.py build_ext --inplace > "$OUTDIR/build.log" 2>&1 || { echo "build failed"; tail -20 "$OUTDIR/build.log"; exit 1; }
UPARG=()
for v in $UPSTREAM_VERSIONS; do
    UP=/tmp/nccl4py-upstream-$v
    rm -rf "$UP"
    if ls .whl/nccl4py-"$v"-*.whl >/dev/null 2>&1; then
        "$PY" -m pip install -q --no-index --no-deps --target "$UP" .whl/nccl4py-"$v"-*.whl \
            && UPARG+=(--upstream "$UP") || echo "upstream $v install failed"
    fi
done
LIB=$("$PY" - <<'PYEOF'
import os
import nccl._discovery as d
if d.platform()[0] == "rocm":
    paths = [p for _, p in d._rocm_candidates() if os.path.isabs(p) and os.path.exists(p)]
    print(paths[0] if paths else "librccl.so")
else:
    w = d._wheel_libraries()
    print(w[0] if w else "libnccl.so.2")
PYEOF
)
NCCL4PY_TEST_LIBRARY=$LIB timeout 240 "$PY" -m pytest -m gpu tests/gpu -q -rs \
    --junitxml="$OUTDIR/gpu-tests.xml" 2>&1 | tee "$OUTDIR/gpu-tests.log"
tests_rc=${PIPESTATUS[0]}
timeout 150 "$PY" bench/gpu_call_overhead.py --calls 10000 "${UPARG[@]}" --out "$OUTDIR" \
    2>&1 | tee "$OUTDIR/bench.log"
{
    echo "# nccl4py GPU check"
    echo
    echo "- date: $(date -u +%FT%TZ); GPU: $( (nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || rocm-smi --showproductname) 2>/dev/null | head -3 | tr '\n' ' ')"
    echo "- library: $LIB"
    echo "- gpu tests: exit $tests_rc; $(tail -1 "$OUTDIR/gpu-tests.log")"
    echo "- wall time: $(( $(date +%s) - start )) s"
    echo
    cat "$OUTDIR/overhead.md" 2>/dev/null
} > "$OUTDIR/report.md"
cat "$OUTDIR/report.md"
exit "$tests_rc"
