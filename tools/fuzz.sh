#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, clang with ASan + UBSan) into build-fuzz/ and runs
# each for a bounded time from its seed corpus (tests/fuzz/corpus/<target>/).
#   bash tools/fuzz.sh [seconds per target, default 60] [target ...]
# Findings (crash-*, leak-*, timeout-* inputs) are left in build-fuzz/findings/<target>/.
# Exit status: non-zero when any target found something.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${BRAID_FUZZ_BUILD_DIR:-$here/build-fuzz}
seconds=${1:-60}
shift || true

# clang (libFuzzer ships with it) is needed only here, not by the normal build.
if ! command -v clang++ >/dev/null; then
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends clang
fi
# -O1: quick to compile, still fast to run under the sanitizers.
CC=clang CXX=clang++ cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
  -DBRAID_FUZZ=ON -DBRAID_CUDA=OFF >/dev/null
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for src in "$here"/tests/fuzz/fuzz_*.cpp; do targets+=("$(basename "$src" .cpp)"); done
fi
nice -n 10 cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"

export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
# Libraries braid links (Open MPI, oneDNN) keep allocations until exit; leaks are not findings.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
status=0
printf '%-22s %8s %10s %8s %s\n' target seconds execs corpus result
for t in "${targets[@]}"; do
  name=${t#fuzz_}
  seeds=$here/tests/fuzz/corpus/$name
  work=$build/corpus/$name findings=$build/findings/$name
  mkdir -p "$work" "$findings"
  log=$build/$t.log
  set +e
  "$build/tests/fuzz/$t" -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=4096 \
    -artifact_prefix="$findings/" -print_final_stats=1 "$work" "$seeds" >"$log" 2>&1
  rc=$?
  set -e
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo ?)
  size=$(ls "$work" | wc -l)
  result=ok
  if [ $rc -ne 0 ]; then result="FOUND (exit $rc): $(ls "$findings" | head -3 | tr '\n' ' ') see $log"; status=1; fi
  printf '%-22s %8s %10s %8s %s\n' "$t" "$seconds" "$execs" "$size" "$result"
done
exit $status
