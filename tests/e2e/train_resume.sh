#!/usr/bin/env bash
# Train, stop, resume: losses after the resume are bit-identical to an uninterrupted run.
# Then eval/generate/export/import on the result, and the export -> import round trip.
source "$(dirname "$0")/common.bash"
make_corpus
"$BRAID" prepare --input corpus --out data --tokenizer byte --val-fraction 0.1

write_config "$WORK/data" straight straight.yaml
"$BRAID" train straight.yaml > straight.log
write_config "$WORK/data" resumed resumed.yaml
"$BRAID" train resumed.yaml --set train.steps=3 > part1.log
"$BRAID" train resumed.yaml > part2.log
grep -q "resumed from" part2.log || fail "second run did not resume"

# Per-step losses, as printed into metrics.jsonl (shortest round-trip decimal of the double).
losses() { grep '"step_loss"' "$1" | sed 's/.*"step":\([0-9]*\).*"step_loss":\([^,}]*\).*/\1 \2/' | sort -n; }
losses runs/straight/metrics.jsonl > a.txt
losses runs/resumed/metrics.jsonl > b.txt
[ "$(wc -l < a.txt)" -eq 6 ] || fail "expected 6 step losses, got $(cat a.txt)"
diff a.txt b.txt || fail "losses after resume differ from the uninterrupted run"
echo "ok: resumed losses are identical"
cat a.txt

# The same with 8-bit AdamW states (u8 codes and per-block absmax in the checkpoint).
write_config "$WORK/data" straight8 straight8.yaml
"$BRAID" train straight8.yaml --set optim.name=adamw8bit > straight8.log
write_config "$WORK/data" resumed8 resumed8.yaml
"$BRAID" train resumed8.yaml --set optim.name=adamw8bit --set train.steps=3 > part1_8.log
"$BRAID" train resumed8.yaml --set optim.name=adamw8bit > part2_8.log
grep -q "resumed from" part2_8.log || fail "adamw8bit run did not resume"
losses runs/straight8/metrics.jsonl > a8.txt
losses runs/resumed8/metrics.jsonl > b8.txt
[ "$(wc -l < a8.txt)" -eq 6 ] || fail "expected 6 adamw8bit step losses, got $(cat a8.txt)"
diff a8.txt b8.txt || fail "adamw8bit losses after resume differ from the uninterrupted run"
cmp -s a.txt a8.txt && fail "adamw8bit gave AdamW's losses: the 8-bit states were not used"
echo "ok: adamw8bit resumed losses are identical"

# The checkpoints: step 3 and 6 kept (keep_last 2), latest -> step 6.
[ "$(cat runs/straight/checkpoints/latest)" = "step-00000006" ] || fail "latest pointer"

# eval prints JSON; the same weights give the same loss through every path.
"$BRAID" eval runs/straight --data data/val.bin > eval_run.json
grep -q '"loss"' eval_run.json || fail "eval printed no loss"
"$BRAID" generate runs/straight --prompt "The " --tokens 20 --seed 1 > gen.txt
[ -s gen.txt ] || fail "generate printed nothing"
"$BRAID" export runs/straight --out hf > /dev/null
[ -f hf/model.safetensors ] && [ -f hf/config.json ] || fail "export files"
grep -q '"model_type": "gpt2"' hf/config.json || fail "config.json model_type"
expect_fail "not empty" "$BRAID" export runs/straight --out hf
"$BRAID" import hf --out imported > /dev/null
"$BRAID" eval imported --data data/val.bin > eval_imported.json
"$BRAID" eval hf --data data/val.bin > eval_hf.json
l1=$(grep '"loss"' eval_run.json); l2=$(grep '"loss"' eval_imported.json); l3=$(grep '"loss"' eval_hf.json)
[ "$l1" = "$l2" ] && [ "$l1" = "$l3" ] || fail "export/import changed the model: $l1 / $l2 / $l3"
echo "ok: export -> import round trip is exact ($l1)"
