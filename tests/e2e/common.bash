# Shared helpers for the e2e scripts (sourced, not run: it has no test of its own).
set -euo pipefail
BRAID=$1
WORK=$2
SRC=$3
rm -rf "$WORK"
mkdir -p "$WORK"
cd "$WORK"

fail() { echo "FAIL: $*" >&2; exit 1; }

# A small corpus that every Debian system has.
make_corpus() {
  mkdir -p corpus
  head -c 60000 /usr/share/common-licenses/GPL-3 > corpus/a.txt
  head -c 20000 /usr/share/common-licenses/Apache-2.0 > corpus/b.txt
}

# A tiny gpt2 config over data dir $1, run name $2; extra YAML lines from stdin.
write_config() {
  local data=$1 name=$2 file=$3
  cat > "$file" <<YAML
run: {name: $name, dir: $WORK/runs}
model: {family: gpt2, vocab_size: 256, context_length: 32, n_layer: 2, n_embd: 32, n_head: 2}
data: {dir: $data, micro_batch: 4, seq_len: 32, grad_accum: 2, seed: 3, prefetch: 2}
optim: {lr: 0.003, min_lr: 0.0003, warmup_steps: 2, decay: cosine, decay_steps: 6}
train: {steps: 6, log_interval: 1, eval_interval: 3, eval_batches: 2, sample_tokens: 0, peak_tflops: 1.0}
checkpoint: {interval: 3, keep_last: 2, resume: auto}
YAML
}

# expect_fail "<substring>" cmd...: the command must exit non-zero and print the substring.
expect_fail() {
  local want=$1; shift
  local out rc
  set +e
  out=$("$@" 2>&1)
  rc=$?
  set -e
  [ $rc -ne 0 ] || fail "expected failure of: $* (output: $out)"
  # A signal (a crash, or a sanitizer's abort in the build-asan tree) is not a clear error.
  [ $rc -lt 128 ] || fail "crashed (exit $rc) instead of failing cleanly: $* (output: $out)"
  echo "$out" | grep -qF -- "$want" || fail "expected '$want' in the error of: $*; got: $out"
  echo "ok (exit $rc): $want"
}

# A byte-level corpus prepared into data/, a Llama of width $1 (2 blocks, vocabulary 256) trained
# for $2 steps as runs/base and exported as the HF directory hf/: the base of the LoRA tests.
llama_hf_base() {
  local width=$1 steps=$2
  make_corpus
  "$BRAID" prepare --input corpus --out data --tokenizer byte --val-fraction 0.1 > /dev/null
  cat > base.yaml <<YAML
run: {name: base, dir: $WORK/runs}
model: {family: llama, vocab_size: 256, context_length: 32, n_layer: 2, n_embd: $width, n_head: 4}
data: {dir: $WORK/data, micro_batch: 4, seq_len: 32, seed: 3}
optim: {lr: 0.003, warmup_steps: 1}
train: {steps: $steps, log_interval: 1, eval_interval: 0, sample_tokens: 0, peak_tflops: 1.0}
YAML
  "$BRAID" train base.yaml > base.log
  "$BRAID" export runs/base --out hf > /dev/null
}
