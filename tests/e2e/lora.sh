#!/usr/bin/env bash
# LoRA fine-tuning from an exported HF model: the shape comes from init_from, only adapters
# train, the base in the checkpoint is the HF file's byte for byte, the adapter is written in
# the PEFT layout (names and config keys), merge-lora exports a plain HF model that evaluates
# like the LoRA run, a resume continues, and --dry-run prints the memory plan and writes nothing.
source "$(dirname "$0")/common.bash"
make_corpus
"$BRAID" prepare --input corpus --out data --tokenizer byte --val-fraction 0.1 > /dev/null
for family in gpt2 llama; do
  if [ $family = gpt2 ]; then targets="[c_attn, c_proj]"; probe=transformer.h.1.attn.c_attn; fifo=true
  else targets="[q, v, down]"; probe=model.layers.1.self_attn.q_proj; fifo=false; fi
  cat > base_$family.yaml <<YAML
run: {name: base_$family, dir: $WORK/runs}
model: {family: $family, vocab_size: 256, context_length: 32, n_layer: 2, n_embd: 32, n_head: 2}
data: {dir: $WORK/data, micro_batch: 4, seq_len: 32, seed: 3}
optim: {lr: 0.003, warmup_steps: 1}
train: {steps: 3, log_interval: 1, eval_interval: 0, sample_tokens: 0, peak_tflops: 1.0}
YAML
  "$BRAID" train base_$family.yaml > base_$family.log
  "$BRAID" export runs/base_$family --out hf_$family > /dev/null
  # The model section says something else on purpose: init_from's shape wins.
  cat > lora_$family.yaml <<YAML
run: {name: lora_$family, dir: $WORK/runs}
model: {n_layer: 7}
data: {dir: $WORK/data, micro_batch: 4, seq_len: 32, seed: 4}
optim: {lr: 0.01, warmup_steps: 1}
train: {steps: 4, log_interval: 2, eval_interval: 0, sample_tokens: 0, peak_tflops: 1.0, checkpointing: full}
checkpoint: {interval: 2, keep_last: 2}
lora: {rank: 4, alpha: 8, dropout: 0.1, targets: $targets, init_from: $WORK/hf_$family}
YAML
  "$BRAID" train lora_$family.yaml --dry-run > dry_$family.log
  grep -q "activations" dry_$family.log || fail "dry run printed no memory plan"
  grep -q "planned" dry_$family.log || fail "dry run printed no planned column"
  [ ! -e runs/lora_$family ] || fail "--dry-run wrote a run directory"
  "$BRAID" train lora_$family.yaml --set train.steps=2 > lora_$family.log
  "$BRAID" train lora_$family.yaml > lora_${family}_resumed.log  # resumes at step 2
  grep -q "resumed from" lora_${family}_resumed.log || fail "$family LoRA run did not resume"
  grep -q "lora: rank 4" lora_$family.log || fail "no LoRA summary line"
  grep -q "peak memory by category" lora_${family}_resumed.log || fail "no peak memory line"
  grep -q '"peak_memory_mib"' runs/lora_$family/metrics.jsonl || fail "no per-window peaks"
  ad=runs/lora_$family/adapter
  grep -aq "base_model.model.$probe.lora_A.weight" $ad/adapter_model.safetensors || fail "PEFT name"
  grep -aq "base_model.model.$probe.lora_B.weight" $ad/adapter_model.safetensors || fail "PEFT name"
  for key in '"r": 4' '"lora_alpha": 8' '"peft_type": "LORA"' '"task_type": "CAUSAL_LM"' \
             "\"fan_in_fan_out\": $fifo" '"bias": "none"' '"use_rslora": false' \
             '"base_model_name_or_path"' '"target_modules"' '"lora_dropout"'; do
    grep -qF "$key" $ad/adapter_config.json || fail "adapter_config.json lacks $key"
  done
  # The frozen base: the exported base of the LoRA run is the input HF file, byte for byte.
  "$BRAID" export runs/lora_$family --out base_again_$family > /dev/null
  cmp hf_$family/model.safetensors base_again_$family/model.safetensors || fail "$family base changed"
  "$BRAID" merge-lora runs/lora_$family --out merged_$family > /dev/null
  grep -q "\"model_type\": \"$family\"" merged_$family/config.json || fail "merged config"
  ! grep -aq "lora_" merged_$family/model.safetensors || fail "merged model still names adapters"
  cmp -s hf_$family/model.safetensors merged_$family/model.safetensors && fail "merge changed nothing"
  base=$("$BRAID" eval hf_$family --data data/val.bin | grep '"loss"')
  merged=$("$BRAID" eval merged_$family --data data/val.bin | grep '"loss"')
  [ "$base" != "$merged" ] || fail "$family: merged model evaluates like the base"
  # eval and generate on the LoRA run apply its adapter (and say so); --no-adapter is the base.
  "$BRAID" eval runs/lora_$family --data data/val.bin > lora_eval_$family.json
  grep -q '"adapter": true' lora_eval_$family.json || fail "eval does not say the adapter is applied"
  [ "$(grep '"loss"' lora_eval_$family.json)" = "$merged" ] || fail "$family: eval on the LoRA run differs from the merged model"
  base_only=$("$BRAID" eval runs/lora_$family --data data/val.bin --no-adapter)
  echo "$base_only" | grep -q '"adapter": false' || fail "--no-adapter not reported"
  [ "$(echo "$base_only" | grep '"loss"')" = "$base" ] || fail "$family: --no-adapter is not the base"
  "$BRAID" generate runs/lora_$family --prompt "ab" --tokens 3 --temperature 0 2> gen_$family.err > /dev/null
  grep -q "LoRA adapter applied" gen_$family.err || fail "generate does not say the adapter is applied"
  "$BRAID" generate runs/lora_$family --prompt "ab" --tokens 3 --temperature 0 --no-adapter 2> gen_$family.err > /dev/null
  grep -q "base model only" gen_$family.err || fail "generate --no-adapter does not say so"
  echo "ok: $family LoRA from HF, PEFT adapter, frozen base, merge ($base -> $merged)"
done
expect_fail "lora.targets" "$BRAID" train lora_gpt2.yaml --set lora.targets=[q] --set run.name=x
expect_fail "lora.dropout" "$BRAID" train lora_gpt2.yaml --set lora.dropout=1.5
