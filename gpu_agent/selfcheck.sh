#!/usr/bin/env bash
# The rerun agent's GPU self-check, one command (docs/design.md §11):
#
#     gpu_agent/selfcheck.sh [selfcheck options, e.g. --samples rmsnorm_h4096_bf16]
#
# For a machine with an NVIDIA GPU, nvcc and no network. It makes what it needs importable
# from what it carries, then runs `python -m gpu_agent.selfcheck`: every sample of
# gpu_agent/samples through the production harness on the measuring backend, adversarial
# samples refused by the check each names, honest ones passing and timed within 3 % of an
# independent timing, results signed as rerun/v1 envelopes. Prints a table (and writes it,
# row by row, to $OUT/selfcheck-table.txt when $OUT is set); exits non-zero on any failure.
#
# Time: the whole script fits SELFCHECK_BUDGET_S (default 560 s, inside one 10-minute call).
# Each stage has its own bound — PyCUDA's build at most SELFCHECK_BUILD_S (default 300 s) —
# and the samples get what is left of the budget, less a margin for the final table.
#
# What it installs, only when not already importable, from gpu_agent/wheels/ (or
# $KERNELINDEX_WHEELS) with `pip --no-index` into a private target directory:
#   * the project's Python dependencies that the harness and the signing import (the DIST
#     map below: pydantic, rfc8785, cryptography, ruamel.yaml, msgspec, ml_dtypes, numpy...;
#     tests/gpu_agent/test_selfcheck_install.py runs the self-check with exactly these);
#   * PyCUDA: a wheel if one is there, else its sdist, built against the local CUDA
#     toolkit (configure.py --no-cuda-enable-curand). gpu_agent/wheels/README.md says how to
#     fill that directory on a machine with network access.
# Environment: PYTHON (default python3), KERNELINDEX_WHEELS, SELFCHECK_SITE (install target,
# default /tmp/kernelindex-selfcheck-site), SELFCHECK_BUDGET_S, SELFCHECK_BUILD_S, CUDA_HOME,
# OUT (where the table and the JSON reports go).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 2
PY="${PYTHON:-python3}"
WHEELS="${KERNELINDEX_WHEELS:-$ROOT/gpu_agent/wheels}"
SITE="${SELFCHECK_SITE:-/tmp/kernelindex-selfcheck-site}"
BUDGET="${SELFCHECK_BUDGET_S:-560}"
BUILD_LIMIT="${SELFCHECK_BUILD_S:-300}"
# Kept back from the samples: the final table, and the child processes' shutdown.
MARGIN=30
CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
export PATH="$PATH:$CUDA_HOME/bin"
export PYTHONPATH="$SITE:$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
START=$SECONDS

step() { printf '\n== [%3ds] %s\n' "$((SECONDS - START))" "$*"; }
die() {
    printf '\nSELFCHECK FAILED: %s\n' "$*" >&2
    exit 1
}

missing_modules() {
    # Prints the modules among "$@" that do not import.
    "$PY" - "$@" <<'EOF'
import importlib, sys
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except Exception:
        print(name)
EOF
}

pip_offline() {
    mkdir -p "$SITE"
    "$PY" -m pip install --quiet --disable-pip-version-check --no-index --find-links "$WHEELS" \
        --target "$SITE" --upgrade "$@"
}

step "device and toolchain"
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total,clocks.sm,temperature.gpu \
        --format=csv || die "nvidia-smi cannot read the GPU"
else
    echo "nvidia-smi not found (the backend reads the device through the driver itself)"
fi
command -v nvcc >/dev/null 2>&1 || die "nvcc not found (set CUDA_HOME or put it on PATH)"
nvcc --version | tail -n 2
"$PY" --version || die "no Python at '$PY' (set PYTHON)"

step "Python dependencies"
# module name -> what pip installs it as (the names here are what the harness imports).
declare -A DIST=(
    [numpy]=numpy [ml_dtypes]=ml_dtypes [pydantic]=pydantic [rfc8785]=rfc8785
    [cryptography]=cryptography [typing_extensions]=typing_extensions
    [ruamel.yaml]=ruamel.yaml [msgspec]=msgspec
)
mapfile -t MISSING < <(missing_modules "${!DIST[@]}")
if ((${#MISSING[@]})); then
    echo "missing: ${MISSING[*]}; installing from $WHEELS"
    [ -d "$WHEELS" ] || die "no $WHEELS to install ${MISSING[*]} from (see gpu_agent/wheels/README.md)"
    PKGS=()
    for m in "${MISSING[@]}"; do PKGS+=("${DIST[$m]}"); done
    pip_offline "${PKGS[@]}" || die "cannot install ${PKGS[*]} from $WHEELS"
    mapfile -t STILL < <(missing_modules "${!DIST[@]}")
    ((${#STILL[@]} == 0)) || die "still not importable after installing: ${STILL[*]}"
fi
echo "ok: ${!DIST[*]}"

step "PyCUDA"
if [ -z "$(missing_modules pycuda.driver)" ]; then
    echo "already importable"
else
    [ -d "$WHEELS" ] || die "PyCUDA is not importable and there is no $WHEELS to install it from"
    if ls "$WHEELS"/pycuda-*.whl >/dev/null 2>&1; then
        echo "installing the PyCUDA wheel from $WHEELS"
        pip_offline pycuda || die "the PyCUDA wheel in $WHEELS does not install here"
    else
        SDIST="$(ls "$WHEELS"/pycuda-*.tar.gz 2>/dev/null | sort | tail -n 1)"
        [ -n "$SDIST" ] || die "PyCUDA is not importable and $WHEELS has neither a pycuda wheel nor an sdist"
        BUILD="$(mktemp -d)"
        echo "building PyCUDA from $(basename "$SDIST") against $CUDA_HOME (a few minutes)"
        tar -xzf "$SDIST" -C "$BUILD" || die "cannot unpack $SDIST"
        SRC="$(ls -d "$BUILD"/pycuda-*/ | head -n 1)"
        (cd "$SRC" && "$PY" configure.py --cuda-root="$CUDA_HOME" --no-cuda-enable-curand \
            >"$BUILD/configure.log" 2>&1) || die "PyCUDA configure.py failed (see $BUILD/configure.log)"
        # The link needs -lcuda: the toolkit's stub, else the driver's libcuda.so.1 (a
        # toolkit without stubs, as on a minimal nvcc install, has no libcuda.so at all).
        if ! ls "$CUDA_HOME"/lib64/stubs/libcuda.so "$CUDA_HOME"/lib64/libcuda.so >/dev/null 2>&1; then
            DRIVER_LIB="$( (ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 /{print $NF; exit}'); \
                ls /usr/local/nvidia/lib64/libcuda.so.1 /usr/lib/x86_64-linux-gnu/libcuda.so.1 2>/dev/null)"
            DRIVER_LIB="$(echo "$DRIVER_LIB" | head -n 1)"
            [ -n "$DRIVER_LIB" ] || die "no libcuda.so to link PyCUDA against (no toolkit stub, no driver library)"
            mkdir -p "$BUILD/libcuda" && ln -sf "$DRIVER_LIB" "$BUILD/libcuda/libcuda.so"
            export LIBRARY_PATH="$BUILD/libcuda${LIBRARY_PATH:+:$LIBRARY_PATH}"
            echo "linking against the driver's $DRIVER_LIB"
        fi
        # setuptools compiles extension sources one at a time unless told otherwise.
        printf '\n[build_ext]\nparallel = %s\n' "$(nproc)" >>"$SRC/setup.cfg"
        # Build dependencies come from this Python (numpy, setuptools, wheel), not the network.
        timeout --kill-after=10 "$BUILD_LIMIT" "$PY" -m pip wheel --quiet --no-deps \
            --no-build-isolation --no-index -w "$BUILD/dist" "$SRC" >"$BUILD/build.log" 2>&1 ||
            die "building PyCUDA failed or took over ${BUILD_LIMIT}s (last lines of $BUILD/build.log: $(tail -n 5 "$BUILD/build.log"))"
        pip_offline "$BUILD"/dist/pycuda-*.whl ||
            die "PyCUDA built but does not install: its dependencies (pytools, platformdirs, mako...) must be in $WHEELS"
    fi
    [ -z "$(missing_modules pycuda.driver)" ] || die "PyCUDA installed but 'import pycuda.driver' still fails"
fi
"$PY" -c "import pycuda, pycuda.driver as d; d.init(); print('pycuda', pycuda.VERSION_TEXT, '| devices:', d.Device.count())" ||
    die "PyCUDA cannot initialise the driver"

DEADLINE=$((BUDGET - (SECONDS - START) - MARGIN))
((DEADLINE >= 60)) || die "only ${DEADLINE}s of the ${BUDGET}s budget left for the samples"
step "samples end to end (deadline ${DEADLINE}s of the ${BUDGET}s budget)"
# The self-check stops starting work at its deadline; the hard limit ends a case that hangs.
timeout --kill-after=10 "$((DEADLINE + MARGIN - 10))" \
    "$PY" -m gpu_agent.selfcheck --deadline-s "$DEADLINE" "$@"
STATUS=$?
case $STATUS in
0) step "self-check passed" ;;
124 | 137) die "the self-check ran past its time limit" ;;
*) die "the self-check found failures (exit $STATUS)" ;;
esac
