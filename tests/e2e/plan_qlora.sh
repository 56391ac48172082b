#!/usr/bin/env bash
# `braid plan --lora --base-quant nf4|int8|none`: the frozen base's bytes per GPU for Llama-3 8B
# on one RTX 4090 (seq 2048, micro-batch 1, full checkpointing, adamw8bit on the adapters).
# Weights: the blocks' 6.98 B parameters at 4.127 bits (NF4 + double-quantised constants),
# 8 bits (int8) or 16 (bf16), plus the 1.05 B embedding and head parameters in bf16 and the
# adapters: 5.32, 8.47 and 14.97 GiB. Misuse is refused by name.
source "$(dirname "$0")/common.bash"
weights() {
  "$BRAID" plan --model llama3-8b --gpu rtx-4090 --gpus-per-node 1 --lora --base-quant "$1" \
    --seq 2048 --checkpointing full --global-batch 16 --micro-batch 1 --optimizer adamw8bit > plan_$1.txt
  grep -E '^  weights ' plan_$1.txt | awk '{print $2}'
}
[ "$(weights nf4)" = 5.32 ] || fail "nf4 base: $(cat plan_nf4.txt)"
[ "$(weights int8)" = 8.47 ] || fail "int8 base: $(cat plan_int8.txt)"
[ "$(weights none)" = 14.97 ] || fail "bf16 base: $(cat plan_none.txt)"
grep -q "fits, " plan_nf4.txt || fail "QLoRA 8B does not fit a 24 GiB GPU: $(cat plan_nf4.txt)"
set +e
out=$("$BRAID" plan --model llama3-8b --gpu rtx-4090 --base-quant nf4 2>&1); rc=$?
set -e
[ $rc -ne 0 ] && echo "$out" | grep -qF -- "add --lora" || fail "--base-quant without LoRA: $out"
set +e
out=$("$BRAID" plan --model llama3-8b --gpu rtx-4090 --lora --base-quant fp4 2>&1); rc=$?
set -e
[ $rc -ne 0 ] && echo "$out" | grep -qF -- "expected none, int8 or nf4" || fail "bad --base-quant: $out"
echo "ok: plan --base-quant"
