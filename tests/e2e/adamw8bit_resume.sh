#!/usr/bin/env bash
# optim.name: adamw8bit end to end: train, stop, resume -- losses after the resume are
# bit-identical to an uninterrupted run (the checkpoint holds the 8-bit moments exactly, codes
# and absmax); the run learns; bad settings are refused naming the key.
source "$(dirname "$0")/common.bash"
make_corpus
"$BRAID" prepare --input corpus --out data --tokenizer byte --val-fraction 0.1

write_config "$WORK/data" straight straight.yaml
write_config "$WORK/data" resumed resumed.yaml
"$BRAID" train straight.yaml --set optim.name=adamw8bit > straight.log
"$BRAID" train resumed.yaml --set optim.name=adamw8bit --set train.steps=3 > part1.log
"$BRAID" train resumed.yaml --set optim.name=adamw8bit > part2.log
grep -q "resumed from" part2.log || fail "second run did not resume"

losses() { grep '"step_loss"' "$1" | sed 's/.*"step":\([0-9]*\).*"step_loss":\([^,}]*\).*/\1 \2/' | sort -n; }
losses runs/straight/metrics.jsonl > a.txt
losses runs/resumed/metrics.jsonl > b.txt
[ "$(wc -l < a.txt)" -eq 6 ] || fail "expected 6 step losses, got $(cat a.txt)"
diff a.txt b.txt || fail "adamw8bit losses after resume differ from the uninterrupted run"
echo "ok: adamw8bit resumed losses are identical"
cat a.txt

# The checkpoint holds the moments as 8-bit codes with their block absmax.
grep -rqa '"transformer.h.0.mlp.c_fc.weight.exp_avg.codes"' runs/straight/checkpoints/step-00000006 \
  || fail "no 8-bit codes in the checkpoint"
grep -rqa '"transformer.h.0.mlp.c_fc.weight.exp_avg_sq.absmax"' runs/straight/checkpoints/step-00000006 \
  || fail "no absmax in the checkpoint"
echo "ok: the checkpoint holds codes and absmax"

# An adamw checkpoint does not silently resume as adamw8bit (its moments are f32).
write_config "$WORK/data" mixed mixed.yaml
"$BRAID" train mixed.yaml --set train.steps=3 > mixed1.log
expect_fail "exp_avg.codes" "$BRAID" train mixed.yaml --set optim.name=adamw8bit

expect_fail "optim.name" "$BRAID" train straight.yaml --set optim.name=adam8
expect_fail "adamw8bit" "$BRAID" train straight.yaml --set optim.name=adamw8bit --set optim.zero=1
