#!/usr/bin/env bash
# The recipes in configs/ as the guide gives them: tools/demo_finetune.sh end to end (pretrain a
# small Llama, export it as an HF directory, prepare prompt/completion JSONL with its tokenizer,
# LoRA fine-tune on 2 data-parallel ranks, eval and generate with the adapter, merge), then
# configs/llama_lora_chat.yaml on that HF directory and configs/gpt2_124m.yaml (one real
# step of the full 124M model through --dry-run), with only paths and lengths overridden.
#   recipes.sh <mpirun> <braid> <workdir> <source dir>
set -euo pipefail
MPIRUN=$1 BRAID=$2 WORK=$3 SRC=$4
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK"
fail() { echo "FAIL: $*" >&2; exit 1; }

DEMO_DIR=$WORK/demo DEMO_PRETRAIN_STEPS=40 DEMO_LORA_STEPS=8 BRAID=$BRAID \
  MPIRUN="$MPIRUN --oversubscribe -np 2" bash "$SRC/tools/demo_finetune.sh" > demo.log 2>&1 ||
  { tail -30 demo.log; fail "tools/demo_finetune.sh failed"; }
grep -q '"dp": 2' demo/runs/demo_lora/run.json || fail "the LoRA step did not run on 2 ranks"
grep -q '"adapter": true' demo.log || fail "eval did not apply the adapter"
grep -q '"adapter": false' demo.log || fail "eval --no-adapter did not run"
for f in config.json model.safetensors tokenizer.json; do
  [ -s "demo/hf/merged/$f" ] || fail "merge-lora wrote no $f"
done
[ -s demo/runs/demo_lora/adapter/adapter_model.safetensors ] || fail "no PEFT adapter"
grep -q "demo done" demo.log || fail "the demo did not finish"

# The full LoRA recipe on the demo's HF model (standing in for models/base).
"$BRAID" train "$SRC/configs/llama_lora_chat.yaml" --set "run.dir=$WORK/runs" \
  --set "lora.init_from=$WORK/demo/hf/base" --set "data.dir=$WORK/demo/data/chat" \
  --set data.seq_len=128 --set train.steps=2 --set train.eval_interval=2 > lora_recipe.log 2>&1 ||
  { tail -20 lora_recipe.log; fail "configs/llama_lora_chat.yaml failed"; }
grep -q "step      2/2" lora_recipe.log || grep -q "step 2/2" lora_recipe.log ||
  { tail -5 lora_recipe.log; fail "the LoRA recipe did not train 2 steps"; }

# GPT-2 124M as written (50304 x 768, 12 layers, context 1024), one micro-batch of one sequence.
"$BRAID" train "$SRC/configs/gpt2_124m.yaml" --dry-run --set "data.dir=$WORK/demo/data/text" \
  --set data.micro_batch=1 --set data.grad_accum=1 > gpt2_recipe.log 2>&1 ||
  { tail -20 gpt2_recipe.log; fail "configs/gpt2_124m.yaml --dry-run failed"; }
# 124.4M parameters: 237.4 MiB of bf16 weights (the recipe's precision), 474.8 MiB of f32 masters.
grep -Eq "^  weights +237\.4" gpt2_recipe.log && grep -Eq "^  master weights +474\.8" gpt2_recipe.log ||
  { cat gpt2_recipe.log; fail "not the 124M model in bf16"; }
grep -q "micro-batch 1 x 1024" gpt2_recipe.log || fail "not context 1024"
echo PASS
