#!/usr/bin/env bash
# A llama-family model (RMSNorm, SwiGLU, RoPE, grouped-query attention, untied head) trains,
# samples, and survives export -> import exactly, with Llama parameter names in the file.
source "$(dirname "$0")/common.bash"
make_corpus
"$BRAID" prepare --input corpus --out data --tokenizer bpe --vocab-size 300 --val-fraction 0.1
cat > llama.yaml <<YAML
run: {name: llama, dir: $WORK/runs}
model: {family: llama, vocab_size: 300, context_length: 32, n_layer: 2, n_embd: 32, n_head: 4, n_kv_head: 2, rope_theta: 10000}
data: {dir: $WORK/data, micro_batch: 4, seq_len: 32, grad_accum: 1, seed: 5}
optim: {lr: 0.003, warmup_steps: 2}
train: {steps: 8, log_interval: 2, eval_interval: 4, eval_batches: 2, sample_tokens: 10, sample_prompt: "The ", peak_tflops: 1.0}
checkpoint: {interval: 0, keep_last: 1}
YAML
"$BRAID" train llama.yaml > train.log
grep -q "val loss" train.log || fail "no validation loss in the log"
grep -q -- "---- sample" train.log || fail "no sample at the end of training"
first=$(grep '"step_loss"' runs/llama/metrics.jsonl | head -1 | sed 's/.*"loss":\([^,]*\).*/\1/')
last=$(grep '"step_loss"' runs/llama/metrics.jsonl | tail -1 | sed 's/.*"loss":\([^,]*\).*/\1/')
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' || fail "loss did not go down: $first -> $last"

"$BRAID" export runs/llama --out hf --dtype f32 > /dev/null
grep -q '"model_type": "llama"' hf/config.json || fail "config.json model_type"
grep -q '"num_key_value_heads": 2' hf/config.json || fail "config.json kv heads"
grep -aq 'model.layers.1.self_attn.k_proj.weight' hf/model.safetensors || fail "llama names"
grep -aq 'lm_head.weight' hf/model.safetensors || fail "untied head missing"
"$BRAID" import hf --out imported > /dev/null
a=$("$BRAID" eval runs/llama --data data/val.bin | grep '"loss"')
b=$("$BRAID" eval imported --data data/val.bin | grep '"loss"')
[ "$a" = "$b" ] || fail "llama export/import changed the model: $a vs $b"
"$BRAID" generate imported --prompt "The " --tokens 5 --temperature 0 > greedy1.txt
"$BRAID" generate runs/llama --prompt "The " --tokens 5 --temperature 0 > greedy2.txt
cmp greedy1.txt greedy2.txt || fail "greedy samples differ after import"
echo "ok: llama trains ($first -> $last), export/import exact ($a)"
