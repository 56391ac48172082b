#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite (ctest).
# BRAID_TEST_SANITIZE=1 (opt-in; .ci/run with BRAID_CI_SANITIZE=1) then builds a second tree, build-asan/ (or
# $BRAID_ASAN_BUILD_DIR), with AddressSanitizer + UBSan and runs the whole suite again there.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${BRAID_BUILD_DIR:-$here/build}
bash "$here/tools/setup.sh"
# Open MPI refuses to run as root unless told; tests run under mpirun in CI containers.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
(cd "$build" && ctest --output-on-failure -j "$(nproc)" "$@")

if [ "${BRAID_TEST_SANITIZE:-0}" = 1 ]; then
  asan=${BRAID_ASAN_BUILD_DIR:-$here/build-asan}
  start=$(date +%s)
  # CUDA off: the sanitizers instrument host code only, and the GPU smoke test skips anyway.
  cmake -S "$here" -B "$asan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBRAID_SANITIZE=ON \
    -DBRAID_CUDA=OFF >/dev/null
  cmake --build "$asan" -j "$(nproc)"
  built=$(date +%s)
  # Leak reports are off: Open MPI and oneDNN keep allocations until exit by design. Every
  # other finding (overflow, use after free, undefined behaviour) fails its test.
  export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:detect_odr_violation=0
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  (cd "$asan" && ctest --output-on-failure -j "$(nproc)" "$@")
  echo "sanitizer stage: build $((built - start)) s, tests $(( $(date +%s) - built )) s"
fi
