#!/usr/bin/env bash
# Packed instruction samples over data.epochs: the run length comes from the epochs, the step
# log and metrics carry the epoch, overlong samples are truncated or dropped and counted, and
# a run stopped mid-epoch resumes bit for bit like the uninterrupted run (gpt2 and llama).
source "$(dirname "$0")/common.bash"
mkdir -p jsonl
python3 - <<'PY'
import json
lens = []
with open("jsonl/train.jsonl", "w") as f:
    for i in range(90):
        p = f"Q{i}: {i}+{i}?\n"
        c = f"{2 * i}" + "!" * (i % 7) + ("?" * 40 if i % 10 == 0 else "") + "\n"
        f.write(json.dumps({"prompt": p, "completion": c}) + "\n")
        lens.append(len((p + c).encode()))
train = lens[:81]  # the last 10 % go to val.bin
with open("expect.txt", "w") as f:
    f.write(f"{len(train)} {sum(n > 49 for n in train)}\n")
PY
read -r samples overlong < expect.txt
[ "$overlong" -gt 0 ] || fail "the test data has no sample longer than seq_len + 1"
"$BRAID" prepare --input jsonl --out data --tokenizer byte --eot none --val-fraction 0.1 > prepare.log
for family in gpt2 llama; do
  if [ $family = gpt2 ]; then
    model="{family: gpt2, vocab_size: 256, context_length: 48, n_layer: 2, n_embd: 16, n_head: 2}"
  else
    model="{family: llama, vocab_size: 256, context_length: 48, n_layer: 2, n_embd: 16, n_head: 2, n_kv_head: 1, ffn_hidden: 24}"
  fi
  cat > $family.yaml <<YAML
run: {name: $family, dir: $WORK/runs}
model: $model
data: {dir: $WORK/data, micro_batch: 2, seq_len: 48, grad_accum: 2, epochs: 2, seed: 3, prefetch: 2}
optim: {lr: 0.003, warmup_steps: 1, decay: constant}
train: {log_interval: 1, eval_interval: 0, sample_tokens: 0, peak_tflops: 1.0}
checkpoint: {interval: 5, keep_last: 3, resume: auto}
YAML
  "$BRAID" train $family.yaml > $family.log
  line=$(grep "^data: " $family.log) || fail "no data line in $family.log"
  echo "$line"
  echo "$line" | grep -q "data: $((samples)) samples per epoch" || fail "sample count: $line"
  echo "$line" | grep -q "(packed, " || fail "not packed: $line"
  echo "$line" | grep -q "longer than seq_len + 1 = 49 tokens: $overlong truncated, 0 dropped" ||
    fail "overlong count (want $overlong truncated): $line"
  grep -q '"event":"data"' runs/$family/metrics.jsonl || fail "no data record"
  steps=$(echo "$line" | sed -n 's/.*2 epochs = \([0-9]*\) steps.*/\1/p')
  n=$(grep -c '"step_loss"' runs/$family/metrics.jsonl)
  [ "$n" -eq "$steps" ] || fail "$family trained $n steps, the 2 epochs need $steps"
  grep -q '"epoch":1' runs/$family/metrics.jsonl && grep -q '"epoch":2' runs/$family/metrics.jsonl ||
    fail "metrics lack the epoch"
  # Stop mid-epoch 1 (step 7), resume: identical losses.
  "$BRAID" train $family.yaml --set run.name=${family}_r --set train.steps=7 > r1.log
  "$BRAID" train $family.yaml --set run.name=${family}_r > r2.log
  grep -q "resumed from" r2.log || fail "$family did not resume"
  python3 - runs/${family}_r/checkpoints/$(cat runs/${family}_r/checkpoints/latest)/manifest.json <<'PY' || fail "checkpoint lacks the epoch position"
import json, sys
d = json.load(open(sys.argv[1]))["state"]["data"]
assert "epoch" in d and "epoch_sequence" in d and d["global_batch"] == 4, d
PY
  losses() { grep '"step_loss"' "$1" | sed 's/.*"step":\([0-9]*\).*"step_loss":\([^,}]*\).*/\1 \2/' | sort -n; }
  losses runs/$family/metrics.jsonl > a.txt
  losses runs/${family}_r/metrics.jsonl > b.txt
  diff a.txt b.txt || fail "$family: losses after a mid-epoch resume differ"
  echo "ok: $family packed epochs resume bit for bit ($steps steps)"
done
# drop: the overlong samples are left out and counted.
"$BRAID" train gpt2.yaml --set run.name=drop --set data.overlong=drop --set train.steps=1 > drop.log
grep -q "$overlong dropped" drop.log || fail "drop count: $(grep '^data: ' drop.log)"
# Validation packs val.bin's samples as training packs them (data.packing: false: windows).
"$BRAID" train gpt2.yaml --set run.name=val --set train.steps=2 --set train.eval_interval=2 \
  --set train.eval_batches=50 > val.log
grep -q "validation: the samples of .*val.bin packed as training packs them" val.log ||
  fail "validation is not packed: $(cat val.log)"
grep -q '"event":"eval"' runs/val/metrics.jsonl || fail "no eval record"
"$BRAID" train gpt2.yaml --set run.name=val_windows --set train.steps=2 --set train.eval_interval=2 \
  --set data.packing=false > val_windows.log
! grep -q "^validation: " val_windows.log || fail "data.packing: false still packs validation"
echo "ok: validation packs samples like training (and not with data.packing: false)"
# Bad values name the key and what is right.
expect_fail "data.overlong" "$BRAID" train gpt2.yaml --set run.name=x --set data.overlong=cut
expect_fail "epochs is -1; expected >= 0" "$BRAID" train gpt2.yaml --set run.name=x --set data.epochs=-1
expect_fail "global_batch is -4; expected >= 0" "$BRAID" train gpt2.yaml --set run.name=x --set data.global_batch=-4
expect_fail "data.global_batch 6 is not a multiple of data.micro_batch 4 x 1 data-parallel ranks = 4" \
  "$BRAID" train gpt2.yaml --set run.name=x --set data.global_batch=6 --set data.micro_batch=4 --set data.grad_accum=1
expect_fail "data.grad_accum is 2 but data.global_batch 12" \
  "$BRAID" train gpt2.yaml --set run.name=x --set data.global_batch=12
expect_fail "data.packing" "$BRAID" train gpt2.yaml --set run.name=x --set data.packing=maybe
[ ! -e runs/x ] || fail "a refused config left runs/x behind"
