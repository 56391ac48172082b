#!/usr/bin/env bash
# Instruction data from the command line: prepare reads prompt/completion JSONL and writes the
# loss-mask flags, training with data.train_on completions gives another (finite) loss than
# with all, and a bad JSONL line stops prepare with file:line, a non-zero exit and no output.
source "$(dirname "$0")/common.bash"
mkdir -p jsonl
python3 - <<'PY'
import json
with open("jsonl/train.jsonl", "w") as f:
    for i in range(200):
        f.write(json.dumps({"prompt": f"Question {i}: what is {i} plus {i}?\n",
                            "completion": f"The answer is {2 * i}.\n"}) + "\n")
PY
"$BRAID" prepare --input jsonl --out data --tokenizer byte --eot none --val-fraction 0.1 > prepare.log
grep -q "loss mask   200 JSONL samples" prepare.log || fail "no loss-mask summary: $(cat prepare.log)"
[ -s data/train.flags.bin ] && [ -s data/val.flags.bin ] || fail "no flags files"
for on in completions all; do
  cat > $on.yaml <<YAML
run: {name: $on, dir: $WORK/runs}
model: {family: gpt2, vocab_size: 256, context_length: 64, n_layer: 1, n_embd: 16, n_head: 2}
data: {dir: $WORK/data, micro_batch: 4, seq_len: 64, seed: 3, train_on: $on}
optim: {lr: 0.003, warmup_steps: 1}
train: {steps: 3, log_interval: 1, eval_interval: 3, sample_tokens: 0, peak_tflops: 1.0}
YAML
  "$BRAID" train $on.yaml > $on.log
done
first_loss() {
  python3 -c 'import json,sys,math
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("event") == "train" and "loss" in r:
        assert math.isfinite(r["loss"]); print(r["loss"]); break' "$1"
}
a=$(first_loss runs/completions/metrics.jsonl) || fail "completions run: no finite loss"
b=$(first_loss runs/all/metrics.jsonl) || fail "all run: no finite loss"
[ -n "$a" ] && [ -n "$b" ] || fail "no step loss in metrics.jsonl"
[ "$a" != "$b" ] || fail "train_on completions and all gave the same loss $a"
printf '{"prompt": "p", "completion": "c"}\n{"prompt": "p", \n' > jsonl/train.jsonl
if "$BRAID" prepare --input jsonl --out bad --tokenizer byte --eot none > bad.log 2>&1; then
  fail "prepare accepted a line that is not JSON"
fi
grep -q "train.jsonl:2: the line is not valid JSON" bad.log || fail "no file:line: $(cat bad.log)"
[ ! -e bad ] || fail "prepare left an output folder behind"
