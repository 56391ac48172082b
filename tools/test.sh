#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite (ctest).
# BRAID_TEST_AVX2_CPU=1 (as .ci/run sets) then runs the unit suite and two training runs again
# on an emulated CPU without AVX-512 (tools/test_on_avx2_cpu.sh; installs qemu-user).
# BRAID_TEST_SANITIZE=1 (as .ci/run sets) then builds a second tree, build-asan/ (or
# $BRAID_ASAN_BUILD_DIR), with AddressSanitizer + UBSan and runs the whole suite again there.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${BRAID_BUILD_DIR:-$here/build}
# Every target: the suite runs the tests and benchmarks it builds.
BRAID_BUILD_TARGETS= BRAID_SETUP_QEMU=${BRAID_TEST_AVX2_CPU:-0} bash "$here/tools/setup.sh"
# Open MPI refuses to run as root unless told; tests run under mpirun in CI containers.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
(cd "$build" && ctest --output-on-failure -j "$(nproc)" "$@")

if [ "${BRAID_TEST_AVX2_CPU:-0}" = 1 ]; then
  bash "$here/tools/test_on_avx2_cpu.sh" "$build"
fi

if [ "${BRAID_TEST_SANITIZE:-0}" = 1 ]; then
  asan=${BRAID_ASAN_BUILD_DIR:-$here/build-asan}
  start=$(date +%s)
  # CUDA off: the sanitizers instrument host code only, and the GPU smoke test skips anyway.
  # -O1 -g1: quicker to compile than -O2 -g, fast enough to run the suite, and line tables
  # are all the reports need for file:line. Unity builds off: here every file compiles on its
  # own, which the default (unity) build does not check. Benchmarks are left out of this tree's
  # default build (CMakeLists.txt): ctest runs none.
  cmake -S "$here" -B "$asan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" -DBRAID_SANITIZE=ON -DBRAID_CUDA=OFF \
    -DBRAID_UNITY=OFF >/dev/null
  cmake --build "$asan" -j "$(nproc)"
  built=$(date +%s)
  # Every finding fails: ASan (overflow, use after free, ...) and UBSan abort the process
  # (exit 134, which tests/e2e's expect_fail tells from a clean error exit), and ASan and
  # LeakSanitizer reports also go to files here, so that one in a process whose failure a test
  # expects (a rank killed on purpose, a command that must fail) still fails the stage. The
  # ranks that mpirun starts run without the leak check (tests/CMakeLists.txt says why).
  logs=$asan/sanitizer-logs
  rm -rf "$logs" && mkdir -p "$logs"
  export ASAN_OPTIONS=abort_on_error=1:log_path=$logs/asan
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:abort_on_error=1
  rc=0
  (cd "$asan" && ctest --output-on-failure -j "$(nproc)" "$@") || rc=$?
  reports=$(grep -l -E 'ERROR: (Address|Leak)Sanitizer' "$logs"/asan.* 2>/dev/null || true)
  for f in $reports; do
    echo "==== sanitizer report $f"
    cat "$f"
  done
  if [ -n "$reports" ]; then
    echo "sanitizer stage: $(echo "$reports" | wc -l) report(s) above" >&2
    rc=1
  fi
  echo "sanitizer stage: build $((built - start)) s, tests $(($(date +%s) - built)) s"
  exit $rc
fi
