#!/usr/bin/env bash
# Checks that two braid binaries train, resume and export bit-identically: the step losses of
# the quickstart, the benchmark model and the small Llama (with gradient accumulation), a resumed
# run, and the exported safetensors bytes. Used when a refactor must not change numerics.
#   tools/check_bit_identical.sh OLD_BRAID NEW_BRAID [workdir]
# Both binaries read the same prepared shards (prepared once, by OLD_BRAID).
set -euo pipefail
old=$(realpath "$1"); new=$(realpath "$2")
here=$(cd "$(dirname "$0")/.." && pwd)
work=${3:-$(mktemp -d)}
mkdir -p "$work"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} OMP_WAIT_POLICY=passive
data="$work/data"
if [ ! -f "$data/train.bin" ]; then
  "$old" prepare --input /usr/share/common-licenses --out "$data" --tokenizer bpe \
      --vocab-size 512 --val-fraction 0.05 --force >/dev/null
fi
# losses RUN_DIR: every step_loss and val_loss record, one per line.
losses() { grep -o '"\(step_loss\|val_loss\)":[^,}]*' "$1/metrics.jsonl"; }
run_all() {  # run_all BIN OUT
  local bin=$1 out=$2
  rm -rf "$out"; mkdir -p "$out"
  local common=(--set run.dir="$out" --set data.dir="$data" --set train.sample_tokens=0
                --set train.log_interval=1 --set train.peak_tflops=1)
  "$bin" train "$here/configs/quickstart.yaml" "${common[@]}" --set train.steps=30 \
      --set train.eval_interval=15 --set checkpoint.interval=10 >/dev/null
  "$bin" train "$here/configs/bench_gpt2.yaml" "${common[@]}" --set train.steps=4 >/dev/null
  "$bin" train "$here/configs/llama_small.yaml" "${common[@]}" --set train.steps=8 \
      --set train.eval_interval=4 --set checkpoint.interval=4 --set checkpoint.resume=none >/dev/null
  # Resume: 5 more quickstart steps from the step-30 checkpoint.
  "$bin" train "$here/configs/quickstart.yaml" "${common[@]}" --set train.steps=35 \
      --set train.eval_interval=15 --set checkpoint.interval=10 >/dev/null
  "$bin" export "$out/quickstart" --out "$out/hf_quickstart" >/dev/null
  "$bin" export "$out/llama_small" --out "$out/hf_llama" >/dev/null
}
run_all "$old" "$work/old"
run_all "$new" "$work/new"
status=0
for r in quickstart bench_gpt2 llama_small; do
  if cmp -s <(losses "$work/old/$r") <(losses "$work/new/$r"); then
    echo "same losses: $r ($(losses "$work/new/$r" | wc -l) records)"
  else
    echo "DIFFERENT losses: $r"; diff <(losses "$work/old/$r") <(losses "$work/new/$r") | head; status=1
  fi
done
for e in hf_quickstart hf_llama; do
  if cmp -s "$work/old/$e/model.safetensors" "$work/new/$e/model.safetensors"; then
    echo "same export bytes: $e"
  else
    echo "DIFFERENT export bytes: $e"; status=1
  fi
done
exit $status
