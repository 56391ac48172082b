#!/usr/bin/env bash
# Memory per rank of data-parallel bf16 training with and without ZeRO-1: `braid train` on
# configs/bench_gpt2.yaml (GPT-2, 23.2M parameters) under mpirun, DP ranks x 1 thread, a few
# steps, then the live MiB by category of the last train record (rank 0's metrics.jsonl; the
# ranks hold equal shares, up to the buckets' padding).
#   tools/bench_zero_precision.sh [build_dir] [ranks] [steps] [workdir]   (from the repo root)
set -euo pipefail
build=${1:-build} np=${2:-2} steps=${3:-2}
work=${4:-$(mktemp -d)}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive
here=$(pwd)
mkdir -p "$work"
if [ ! -f "$work/data/train.bin" ]; then
  "$build/braid" prepare --input /usr/share/common-licenses --out "$work/data" --tokenizer bpe \
    --vocab-size 8192 --val-fraction 0.05 --force > /dev/null
fi
mib() {  # mib RUN KEY: live MiB of KEY in the last train record
  grep '"event":"train"' "$work/runs/$1/metrics.jsonl" | tail -1 |
    sed "s/.*\"memory_mib\":{[^}]*\"$2\":\([0-9.e+-]*\).*/\1/"
}
printf "%-22s %9s %9s %9s %9s %9s\n" "bf16, dp $np" weights master grads optimizer "master+opt"
for zero in 0 1; do
  name=zero$zero
  mpirun --oversubscribe -np "$np" -x OMP_NUM_THREADS=1 "$build/braid" train \
    "$here/configs/bench_gpt2.yaml" --set run.dir="$work/runs" --set run.name=$name \
    --set data.dir="$work/data" --set train.steps="$steps" --set optim.warmup_steps=1 \
    --set train.precision=bf16 --set optim.zero=$zero --set checkpoint.resume=none \
    --set checkpoint.interval=0 --set train.peak_tflops=1 > "$work/$name.log"
  awk -v n="optim.zero $zero" -v w="$(mib $name weights)" -v m="$(mib $name master_weights)" \
      -v g="$(mib $name grads)" -v o="$(mib $name optimizer)" \
      'BEGIN { printf "%-22s %9.1f %9.1f %9.1f %9.1f %9.1f\n", n, w, m, g, o, m + o }'
done
echo "(live MiB per rank after $steps steps; run logs in $work)"
