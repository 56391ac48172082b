#!/usr/bin/env bash
# Bad input: each case is a clear message and a non-zero exit, and nothing is overwritten.
source "$(dirname "$0")/common.bash"
make_corpus
"$BRAID" prepare --input corpus --out data --tokenizer byte --val-fraction 0.1
write_config "$WORK/data" good good.yaml
"$BRAID" train good.yaml --set train.steps=3 > /dev/null
snapshot() { find runs/good -type f ! -name metrics.jsonl ! -name .lock -print0 | sort -z | xargs -0 sha256sum; }
snapshot > before.txt

# Config errors name the file, line and key.
printf 'model: {family: gpt2\n  n_layer: [\n' > malformed.yaml
expect_fail "malformed.yaml" "$BRAID" train malformed.yaml
sed 's/warmup_steps: 2/warmup_stesp: 2/' good.yaml > unknown.yaml
expect_fail "warmup_steps" "$BRAID" train unknown.yaml
sed 's/lr: 0.003/lr: fast/' good.yaml > wrongtype.yaml
expect_fail "optim.lr" "$BRAID" train wrongtype.yaml
expect_fail "n_layer" "$BRAID" train good.yaml --set model.n_layer=0
expect_fail "did you mean" "$BRAID" train good.yaml --set optim.learning_rate=1

# Token shards: missing, truncated, id outside the vocabulary.
cp -r data data_missing && rm data_missing/train.bin
write_config "$WORK/data_missing" missing missing.yaml
expect_fail "train.bin" "$BRAID" train missing.yaml
cp -r data data_trunc && truncate -s -3 data_trunc/train.bin
write_config "$WORK/data_trunc" trunc trunc.yaml
expect_fail "train.bin" "$BRAID" train trunc.yaml
write_config "$WORK/data" smallvocab smallvocab.yaml
expect_fail "vocab" "$BRAID" train smallvocab.yaml --set model.vocab_size=100

# A checkpoint with a wrong checksum is refused, and named.
cp -r runs/good runs/corrupt
ck=runs/corrupt/checkpoints/$(cat runs/corrupt/checkpoints/latest)
printf '\x01' | dd of="$ck/model.safetensors" bs=1 seek=200 conv=notrunc status=none
write_config "$WORK/data" corrupt corrupt.yaml
expect_fail "checksum" "$BRAID" train corrupt.yaml
expect_fail "checksum" "$BRAID" eval runs/corrupt --data data/val.bin

# A checkpoint from another model shape is refused with the differing key.
expect_fail "model.n_embd" "$BRAID" train good.yaml --set model.n_embd=64 --set model.n_head=2

# resume: none on a run that has checkpoints refuses rather than overwriting.
expect_fail "checkpoint.resume" "$BRAID" train good.yaml --set checkpoint.resume=none

snapshot > after.txt
diff before.txt after.txt || fail "a failing command changed the good run's files"
echo "ok: the good run is untouched"
