#!/usr/bin/env bash
# DP=2 x 1 thread against 1 rank x 2 threads on the same global batch, alternating runs of
# bench_dp train (the machine is shared: interleaving spreads its drift over both layouts).
#   tools/bench_dp.sh [build_dir] [pairs] [steps]     (from the repository root)
set -euo pipefail
build=${1:-build} pairs=${2:-2} steps=${3:-3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive
for i in $(seq "$pairs"); do
  mpirun --oversubscribe -np 2 -x OMP_NUM_THREADS=1 "$build/bench_dp" train --accum 1 --steps "$steps"
  OMP_NUM_THREADS=2 "$build/bench_dp" train --accum 2 --steps "$steps"
done | tee /dev/stderr | awk '
  function tok(   i) { for (i = 1; i < NF; i++) if ($(i + 1) == "tokens/s;") return $i }
  function share(   i) { for (i = 1; i < NF; i++) if ($(i + 1) == "%") return $i }
  /2 ranks x 1 threads/ { dp += tok(); ex += share(); n++ }
  /1 ranks x 2 threads/ { one += tok(); m++ }
  END {
    printf "mean tokens/s: DP=2 x 1 thread %.0f, 1 rank x 2 threads %.0f, ratio %.3f\n", dp / n, one / m, (dp / n) / (one / m)
    printf "DP=2 exposed all-reduce: %.1f %% of the step (mean)\n", ex / n
  }'
