#!/usr/bin/env bash
# `braid plan --compare` on multi-rank CPU runs of one small GPT-2: one rank, dp=2, pp=2 (1F1B)
# and tp=2, each rank on one OpenMP thread. Builds nothing.
#   tools/plan_vs_train_mp.sh [BUILD_DIR]   (default: build/; needs BUILD_DIR/braid and
#                                            BUILD_DIR/bench_allreduce)
# Every run is bracketed by calibrations as in tools/plan_vs_train.sh: as many one-thread
# `braid plan --calibrate` at once as the run has ranks, then `bench_allreduce --profile` on 2
# ranks (the planner's CPU communication fit), before and after; the run is predicted from the
# mean of all those profiles. Prints lscpu, the load average, and the comparison of each run.
# About 8 minutes on 2 cores (a calibration takes its floor, about a minute, when loaded).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
[[ "$build" = /* ]] || build="$PWD/$build"
braid="$build/braid"
bench="$build/bench_allreduce"
for b in "$braid" "$bench"; do
  [[ -x "$b" ]] || { echo "no $b; build it first (ninja -C $build braid bench_allreduce)" >&2; exit 2; }
done
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun=${MPIRUN:-mpirun}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$here"
lscpu | grep -E "^(Model name|CPU\(s\)|Thread|Core|Socket|Hypervisor|L2|L3)" || true
echo "load average at start $(cut -d' ' -f1-3 /proc/loadavg)"

"$braid" prepare --input /usr/share/common-licenses --out "$tmp/data" --tokenizer bpe \
    --vocab-size 512 --force > "$tmp/prepare.log"
# 4 blocks of width 256 (3.2M parameters), 4 micro-batches of 4 x 128 tokens per replica: about
# a second per step on one thread, so communication and the bubble are visible next to compute.
cat > "$tmp/c.yaml" <<YAML
run: {name: one, dir: $tmp/runs}
model: {family: gpt2, vocab_size: 512, context_length: 128, n_layer: 4, n_embd: 256, n_head: 4}
data: {dir: $tmp/data, micro_batch: 4, seq_len: 128, grad_accum: 4, seed: 3}
optim: {warmup_steps: 2}
train: {steps: 8, log_interval: 2, eval_interval: 0, sample_tokens: 0, peak_tflops: 1.0}
checkpoint: {interval: 0, keep_last: 1}
YAML
# calibrate TAG NP: NP one-thread calibrations at once (each rank of an NP-rank run shares the
# machine with NP - 1 others: its kernels run at the rates of that contention, not of an idle
# neighbour core), then the communication fit on 2 ranks, copied into each profile. Prints the
# comma-separated profile list.
calibrate() {
  local tag=$1 np=$2 list="" k
  "$mpirun" --oversubscribe -np "$np" sh -c "\"$braid\" plan --calibrate \
      --calibrate-seconds ${CALIBRATE_SECONDS:-20} --out $tmp/profile_${tag}_\$OMPI_COMM_WORLD_RANK.json \
      > $tmp/calibrate_${tag}_\$OMPI_COMM_WORLD_RANK.log"
  "$mpirun" --oversubscribe -np 2 "$bench" --max-mb 16 --reps 10 --overlap-mb 1 \
      --profile "$tmp/profile_${tag}_0.json" | grep "^profile" >&2
  local fit
  fit=$(grep -E '"comm_(bus_gbs|latency_us)"' "$tmp/profile_${tag}_0.json" | tr -d '\n')
  for k in $(seq 0 $((np - 1))); do
    [ "$k" = 0 ] || sed -i "s/^{/{$fit/" "$tmp/profile_${tag}_$k.json"
    list="$list${list:+,}$tmp/profile_${tag}_$k.json"
  done
  echo "$list"
}
# name | ranks | --set options
runs=(
  "one|1|"
  "dp2|2|"
  "pp2|2|--set parallel.pp=2 --set parallel.schedule=1f1b"
  "tp2|2|--set parallel.tp=2"
)
for r in "${runs[@]}"; do
  IFS='|' read -r name np sets <<< "$r"
  before=$(calibrate "${name}_before" "$np")
  load=$(cut -d' ' -f1 /proc/loadavg)
  # shellcheck disable=SC2086
  "$mpirun" --oversubscribe -np "$np" "$braid" train "$tmp/c.yaml" --set run.name=$name $sets \
      > "$tmp/$name.log"
  after=$(calibrate "${name}_after" "$np")
  echo
  echo "== $name: mpirun -np $np braid train c.yaml $sets (load average at start $load)"
  "$braid" plan --device-profile "$before,$after" --compare "$tmp/runs/$name" |
      sed -n '/^predicted vs measured/,$p'
done
