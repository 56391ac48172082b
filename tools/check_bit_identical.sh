#!/usr/bin/env bash
# Checks that two braid binaries train, resume and export bit-identically. Used when a refactor
# must not change numerics.
#   tools/check_bit_identical.sh OLD_BRAID NEW_BRAID [workdir]
# One process (part "single"): the quickstart, the benchmark model and the small Llama (with
# gradient accumulation), a resumed quickstart, and their exports.
# Multi-rank (part "mp", under mpirun -np 2/4/8 --oversubscribe, OMP_NUM_THREADS=1, a 4-block
# model and a few steps): one process with the closing sample, one process fp16 with an injected
# overflow, dp=2, tp=2 (Llama), pp=2 1F1B (GPT-2's tied embedding), dp=2 x tp=2 x pp=2 with
# ZeRO-1, bf16 on tp=2, LoRA with dropout and selective checkpointing on tp=2, fp16 with loss
# scaling and ZeRO-1 on dp=2 (overflow injected on one rank), every one with gradient
# accumulation; resumes on dp=2 and fp16 dp=2, and the 3-D ZeRO checkpoint resumed on one process.
# Every run compares, OLD against NEW: the step and validation losses, gradient norms, learning rates and loss
# scales in metrics.jsonl, every
# checkpoint's safetensors bytes and manifest (the run directory's path and the resolved config
# text left out), the LoRA adapter files, and the bytes of `braid export` of the run.
# Environment: PARTS (default "single mp"), MPIRUN (default mpirun).
# Both binaries read the same prepared shards (prepared once, by OLD_BRAID).
set -euo pipefail
old=$(realpath "$1"); new=$(realpath "$2")
here=$(cd "$(dirname "$0")/.." && pwd)
work=${3:-$(mktemp -d)}
mkdir -p "$work"
work=$(realpath "$work")
parts=${PARTS:-single mp}
mpirun=${MPIRUN:-mpirun}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} OMP_WAIT_POLICY=passive
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
data="$work/data"
if [ ! -f "$data/train.bin" ]; then
  "$old" prepare --input /usr/share/common-licenses --out "$data" --tokenizer bpe \
      --vocab-size 512 --val-fraction 0.05 --force >/dev/null
fi
# losses RUN_DIR: every step and validation loss, gradient norm, learning rate and fp16 loss
# scale record, one per line.
losses() {
  grep -o '"\(step_loss\|val_loss\|grad_norm\|lr\|scale\|skipped_steps\)":[^,}]*' "$1/metrics.jsonl"
}

single_all() {  # single_all BIN OUT
  local bin=$1 out=$2
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

# The multi-rank layouts. Run names; each is a directory under OUT.
mp_runs=(one one_fp16 dp2 tp2 pp2 3d_zero tp2_bf16 tp2_lora_sel dp2_fp16_zero 3d_on_one)
mp_all() {  # mp_all BIN OUT
  local bin=$1 out=$2
  local gpt2="family: gpt2" llama="family: llama, n_kv_head: 2"
  for f in gpt2 llama; do
    cat > "$out/$f.yaml" <<YAML
run: {name: $f, dir: $out}
model: {${!f}, vocab_size: 512, context_length: 16, n_layer: 4, n_embd: 32, n_head: 4}
data: {dir: $data, micro_batch: 2, seq_len: 16, grad_accum: 4, seed: 3, prefetch: 2}
optim: {lr: 0.003, min_lr: 0.0003, warmup_steps: 2, decay: cosine}
train: {steps: 6, log_interval: 1, eval_interval: 3, eval_batches: 2, sample_tokens: 0, peak_tflops: 1.0}
checkpoint: {interval: 3, keep_last: 5, resume: auto}
parallel: {bucket_mb: 0.02, first_bucket_mb: 0.005, timeout_s: 300, vocab_align: 3}
YAML
  done
  one() { OMP_NUM_THREADS=1 "$bin" train "$out/$1.yaml" --set run.name="$2" "${@:3}"; }
  mpi() {
    OMP_NUM_THREADS=1 "$mpirun" --oversubscribe -np "$1" "$bin" train "$out/$2.yaml" \
        --set run.name="$3" "${@:4}"
  }
  local fp16=(--set train.precision=fp16 --set train.loss_scale_initial=1024
              --set train.loss_scale_hysteresis=1)
  # overflow STEP[:DP_RANK]: the arguments (or, for binaries older than --test-fault, the
  # environment) that make the run poison one gradient after that step's backward.
  overflow() {
    local probe
    probe=$("$bin" train /dev/null --test-fault "overflow_at_step=$1" 2>&1 || true)
    if grep -q "not expected" <<< "$probe"; then
      export BRAID_TEST_OVERFLOW_AT_STEP="${1%%:*}" BRAID_TEST_OVERFLOW_RANK=0
      [[ "$1" == *:* ]] && BRAID_TEST_OVERFLOW_RANK="${1#*:}"
      fault=()
    else
      fault=(--test-fault "overflow_at_step=$1")
    fi
  }
  no_overflow() { unset BRAID_TEST_OVERFLOW_AT_STEP BRAID_TEST_OVERFLOW_RANK; fault=(); }
  # One process: a bf16 all-reduce dtype (which a group of one never rounds to) and the sample.
  one gpt2 one --set parallel.allreduce_dtype=bf16 --set train.sample_tokens=24 \
      --set 'train.sample_prompt=The ' > "$out/one.log"
  sed -n '/^---- sample/,/^----$/p' "$out/one.log" > "$out/one/sample.txt"
  overflow 2; one gpt2 one_fp16 "${fp16[@]}" "${fault[@]}" > /dev/null; no_overflow
  mpi 2 gpt2 dp2 --set data.grad_accum=2 > /dev/null
  mpi 2 gpt2 dp2 --set data.grad_accum=2 --set train.steps=8 > /dev/null  # resumed at 6
  mpi 2 llama tp2 --set parallel.tp=2 --set parallel.allreduce_dtype=bf16 > /dev/null
  mpi 2 gpt2 pp2 --set parallel.pp=2 --set parallel.schedule=1f1b > /dev/null
  mpi 8 gpt2 3d_zero --set parallel.tp=2 --set parallel.pp=2 --set data.grad_accum=2 \
      --set parallel.schedule=1f1b --set optim.zero=1 > /dev/null
  mpi 2 gpt2 tp2_bf16 --set parallel.tp=2 --set train.precision=bf16 > /dev/null
  mpi 2 llama tp2_lora_sel --set parallel.tp=2 --set lora.rank=4 --set lora.alpha=8 \
      --set lora.dropout=0.1 --set 'lora.targets=[q,v,down]' --set train.checkpointing=selective \
      > /dev/null
  overflow 2:1
  mpi 2 gpt2 dp2_fp16_zero --set data.grad_accum=2 --set optim.zero=1 "${fp16[@]}" \
      "${fault[@]}" > /dev/null
  no_overflow
  mpi 2 gpt2 dp2_fp16_zero --set data.grad_accum=2 --set optim.zero=1 "${fp16[@]}" \
      --set train.steps=8 > /dev/null  # resumed at 6: the loss scaler's state and ZeRO's pieces
  # The 3-D ZeRO checkpoint (per-shard weights, per-rank moment pieces) on one process.
  cp -r "$out/3d_zero" "$out/3d_on_one"
  rm "$out/3d_on_one/metrics.jsonl"
  one gpt2 3d_on_one --set train.steps=8 > /dev/null
  for r in "${mp_runs[@]}"; do "$bin" export "$out/$r" --out "$out/hf_$r" > /dev/null; done
}

# same WHAT A B: byte comparison of two files, one line of output, status in $status.
status=0
same() {
  if cmp -s "$2" "$3"; then echo "same $1"; else echo "DIFFERENT $1"; status=1; fi
}
# same_manifest OLD NEW OLD_OUT NEW_OUT: the two manifests agree but for the run directory's path,
# the resolved config text, and keys only NEW has (settings added since OLD, at values that
# change nothing: the losses and tensor bytes are compared on their own). Prints the added keys.
same_manifest() {
  python3 - "$@" <<'PY'
import json, sys
old_f, new_f, old_out, new_out = sys.argv[1:5]
def load(f, out):
    return json.loads(open(f).read().replace(out, "OUT"))
old, new = load(old_f, old_out), load(new_f, new_out)
added = []
def strip(o, n, path):
    if isinstance(o, dict) and isinstance(n, dict):
        o.pop("config_yaml", None); n.pop("config_yaml", None)
        for k in list(n):
            if k not in o:
                added.append(path + k); del n[k]
            else:
                strip(o[k], n[k], path + k + ".")
    elif isinstance(o, list) and isinstance(n, list) and len(o) == len(n):
        for a, b in zip(o, n): strip(a, b, path)
strip(old, new, "")
if added: print("    keys only the new binary writes: " + ", ".join(sorted(set(added))))
sys.exit(0 if old == new else 1)
PY
}
compare_run() {  # compare_run OLD_RUN_DIR NEW_RUN_DIR NAME
  local o=$1 n=$2 r=$3
  if cmp -s <(losses "$o") <(losses "$n"); then
    echo "same losses: $r ($(losses "$n" | wc -l) records)"
  else
    echo "DIFFERENT losses: $r"; diff <(losses "$o") <(losses "$n") | head || true; status=1
  fi
  [ -d "$o/checkpoints" ] || return 0
  local count=0 bad=0 f rel
  while IFS= read -r f; do
    rel=${f#"$o"/}
    count=$((count + 1))
    if [ "${f##*.}" = json ]; then
      same_manifest "$f" "$n/$rel" "$(dirname "$o")" "$(dirname "$n")" | sort -u | head -1 \
        || { echo "  differs: $rel"; bad=1; }
    else
      cmp -s "$f" "$n/$rel" || { echo "  differs: $rel"; bad=1; }
    fi
  done < <(find "$o/checkpoints" "$o/adapter" -type f \( -name '*.safetensors' -o -name 'manifest.json' \
             -o -name 'adapter_config.json' \) 2>/dev/null | sort)
  [ "$(find "$o/checkpoints" -type f | wc -l)" = "$(find "$n/checkpoints" -type f | wc -l)" ] \
    || { echo "  different checkpoint file counts"; bad=1; }
  if [ $bad = 0 ]; then echo "same checkpoints: $r ($count files)"; else echo "DIFFERENT checkpoints: $r"; status=1; fi
}

for part in $parts; do
  case $part in
    single)
      for side in old new; do
        rm -rf "$work/$side"; mkdir -p "$work/$side"
        bin=$old; [ $side = new ] && bin=$new
        single_all "$bin" "$work/$side"
      done
      for r in quickstart bench_gpt2 llama_small; do compare_run "$work/old/$r" "$work/new/$r" "$r"; done
      for e in hf_quickstart hf_llama; do
        same "export bytes: $e" "$work/old/$e/model.safetensors" "$work/new/$e/model.safetensors"
      done
      ;;
    mp)
      for side in old new; do
        rm -rf "$work/mp_$side"; mkdir -p "$work/mp_$side"
        bin=$old; [ $side = new ] && bin=$new
        mp_all "$bin" "$work/mp_$side"
      done
      for r in "${mp_runs[@]}"; do
        compare_run "$work/mp_old/$r" "$work/mp_new/$r" "mp $r"
        same "export bytes: mp $r" "$work/mp_old/hf_$r/model.safetensors" "$work/mp_new/hf_$r/model.safetensors"
      done
      [ -s "$work/mp_old/one/sample.txt" ] || { echo "no closing sample in the one-process run"; status=1; }
      same "closing sample: mp one" "$work/mp_old/one/sample.txt" "$work/mp_new/one/sample.txt"
      ;;
    *) echo "unknown part '$part' in PARTS; expected single and/or mp" >&2; exit 2 ;;
  esac
done
exit $status
