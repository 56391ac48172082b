#!/usr/bin/env bash
# A run logs its kernel-group times; braid plan --calibrate writes a profile with every table;
# braid plan --compare sets the prediction beside the run, group by group; bad input is refused.
source "$(dirname "$0")/common.bash"
make_corpus
"$BRAID" prepare --input corpus --out data --tokenizer bpe --vocab-size 300 --val-fraction 0.1 > /dev/null
cat > llama.yaml <<YAML
run: {name: llama, dir: $WORK/runs}
model: {family: llama, vocab_size: 300, context_length: 32, n_layer: 2, n_embd: 32, n_head: 4, n_kv_head: 2}
data: {dir: $WORK/data, micro_batch: 4, seq_len: 32, grad_accum: 2, seed: 5}
train: {steps: 6, log_interval: 2, eval_interval: 0, sample_tokens: 0}
checkpoint: {interval: 0, keep_last: 1}
YAML
"$BRAID" train llama.yaml > train.log
grep -q "^time per step .*gemm .*attention .*optimizer .*other" train.log || fail "no time split at the end of training"
# Every timed window has the groups, and they never add up to more than the step.
grep '"step_s"' runs/llama/metrics.jsonl > windows.txt
[ "$(wc -l < windows.txt)" = 3 ] || fail "expected 3 log windows"
while read -r line; do
  for g in gemm attention lm_head elementwise activation optimizer other; do
    echo "$line" | grep -q "\"$g\":" || fail "kernel_s lacks $g: $line"
  done
  step=$(echo "$line" | grep -o '"step_s":[^,}]*' | cut -d: -f2)
  sum=$(echo "$line" | grep -o '"kernel_s":{[^}]*}' | grep -o ':[0-9.e+-]*' | tr -d : | awk '{s += $1} END {printf "%.12g", s}')
  awk -v s="$sum" -v t="$step" 'BEGIN { exit !(s <= t * 1.000001 && s > 0.5 * t) }' ||
    fail "kernel groups add up to $sum for a $step s step"
done < windows.txt

"$BRAID" plan --calibrate --calibrate-seconds 0.02 --calibrate-rounds 1 --out profile.json > calibrate.log
for key in gemm_f32_train_tflops gemm_f32_train_llama_tflops block_elementwise_gbs block_elementwise_llama_gbs \
           attention_tflops attention_gqa4_tflops attention_seq_tflops attention_width_tflops lm_head_ce_tflops lm_head_vocab_tflops \
           gemm_f32_train_tokens_tflops optimizer_gbs elementwise_gbs gelu_gelems swiglu_gelems; do
  grep -q "\"$key\"" profile.json || fail "profile lacks $key"
done
"$BRAID" plan --config llama.yaml --device-profile profile.json,profile.json --compare runs/llama > compare.txt
grep -q "^predicted vs measured" compare.txt || fail "no comparison table"
for g in gemm attention lm_head elementwise activation optimizer step; do
  grep -Eq "^  $g +[0-9.]+ +[0-9.]+ +[-+][0-9.]+%" compare.txt || fail "no predicted/measured row for $g"
done
"$BRAID" plan --config llama.yaml --device-profile profile.json --compare runs/llama --json > compare.json
grep -q '"measured_step_s"' compare.json || fail "no measured_step_s in --json"
# Without --config the run's own config.yaml is used: the same prediction.
"$BRAID" plan --device-profile profile.json --compare runs/llama --json > own.json
[ "$(grep predicted_step_s own.json)" = "$(grep predicted_step_s compare.json)" ] ||
  fail "the run's config.yaml predicts differently from llama.yaml"

# Bad input: a config that is not the run's, a preset, a directory without metrics, a built-in
# GPU (no kernel rates), a missing profile.
if "$BRAID" plan --config llama.yaml --set model.n_layer=3 --device-profile profile.json --compare runs/llama 2> err.txt; then
  fail "--compare with another model succeeded"
fi
grep -q "model.n_layer 2 vs 3" err.txt || fail "error does not name the differing key: $(cat err.txt)"
if "$BRAID" plan --device-profile profile.json --compare runs/llama --layout auto 2> err.txt; then
  fail "--compare with --layout auto succeeded"
fi
grep -q "does not combine with --layout auto" err.txt || fail "unclear error: $(cat err.txt)"
if "$BRAID" plan --model gpt2-124m --device-profile profile.json --compare runs/llama 2> err.txt; then
  fail "--compare with a preset succeeded"
fi
grep -q "give its config with --config" err.txt || fail "unclear error: $(cat err.txt)"
if "$BRAID" plan --config llama.yaml --device-profile profile.json --compare nowhere 2> err.txt; then
  fail "--compare of a missing run succeeded"
fi
grep -q "nowhere/metrics.jsonl" err.txt || fail "error does not name the metrics file: $(cat err.txt)"
if "$BRAID" plan --config llama.yaml --gpu h100-sxm --gpus-per-node 1 --compare runs/llama 2> err.txt; then
  fail "--compare without a calibrated profile succeeded"
fi
grep -q "calibrated profile" err.txt || fail "unclear error: $(cat err.txt)"
if "$BRAID" plan --config llama.yaml --device-profile profile.json,missing.json 2> err.txt; then
  fail "a missing profile in the list was accepted"
fi
grep -q "missing.json" err.txt || fail "error does not name the missing profile: $(cat err.txt)"
echo "ok: kernel times logged, profile complete, comparison printed"
