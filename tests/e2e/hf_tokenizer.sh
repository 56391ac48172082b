#!/usr/bin/env bash
# `braid prepare --tokenizer HF_DIR`: data encoded with a Hugging Face model's tokenizer
# (bos/eos from its tokenizer_config.json), its fingerprint in meta.json, and `braid train`
# refusing data whose tokenizer is not the init_from model's.
source "$(dirname "$0")/common.bash"
FIX=$SRC/tests/data/hf_tokenizers
make_corpus
mkdir -p multi && cp "$FIX/corpus.txt" multi/a.txt && cp "$FIX/heldout.txt" multi/b.txt

# A tiny Llama trained on data prepared with the llama2-style tokenizer, exported: an HF folder
# with that tokenizer (tokenizer.json + tokenizer_config.json).
"$BRAID" prepare --input multi --input corpus --out data --tokenizer "$FIX/llama2" --val-fraction 0.1 > prep.log
python3 - "$FIX" <<'PY' || fail "meta.json / train.bin of an HF tokenizer"
import json, struct, sys
m = json.load(open('data/meta.json'))
assert m['tokenizer'] == 'hf' and m['tokenizer_fingerprint'].startswith('hf-'), m
assert m['eot'] == '</s>' and m['tokenizer_source'].endswith('llama2'), m
v = json.load(open(sys.argv[1] + '/llama2/tokenizer.json'))
assert m['vocab_size'] == len(v['model']['vocab']) + 2, m['vocab_size']  # two added tokens
PY
grep -q '"braid_config"' data/braid_tokenizer.json || fail "the data's tokenizer copy lacks its tokenizer_config values"
VOCAB=$(python3 -c "import json; print(json.load(open('data/meta.json'))['vocab_size'])")
cat > llama.yaml <<YAML
run: {name: base, dir: $WORK/runs}
model: {family: llama, vocab_size: $VOCAB, context_length: 32, n_layer: 2, n_embd: 32, n_head: 4, n_kv_head: 2}
data: {dir: $WORK/data, micro_batch: 2, seq_len: 32, grad_accum: 1, seed: 5}
optim: {lr: 0.003, warmup_steps: 1}
train: {steps: 2, log_interval: 1, eval_interval: 0, sample_tokens: 0, peak_tflops: 1.0}
checkpoint: {interval: 0, keep_last: 1}
YAML
"$BRAID" train llama.yaml > train.log
"$BRAID" export runs/base --out hf > /dev/null
python3 -c "
import json; t = json.load(open('hf/tokenizer_config.json'))
assert t['bos_token'] == '<s>' and t['add_bos_token'] is True, t
assert json.load(open('hf/tokenizer.json'))['normalizer']['type'] == 'Sequence'" \
  || fail "export did not keep the HF tokenizer and its config"
echo "ok: prepare with an HF tokenizer, train, export keeps the tokenizer"

# ---- the imported model's tokenizer decides which data it trains on ----
"$BRAID" prepare --input corpus --out data_hf --tokenizer hf > /dev/null
cmp <(python3 -c "import json; print(json.load(open('data/meta.json'))['tokenizer_fingerprint'])") \
    <(python3 -c "import json; print(json.load(open('data_hf/meta.json'))['tokenizer_fingerprint'])") \
  || fail "the export's tokenizer has another fingerprint than the one it was trained with"
ft() { "$BRAID" train llama.yaml --set run.name="$1" --set run.init_from="$WORK/hf" --set data.dir="$2"; }
ft ok "$WORK/data_hf" > ft.log
grep -q "initialised from" ft.log || fail "fine-tuning did not start: $(cat ft.log)"
"$BRAID" import hf --out runs/imported > /dev/null
ft ok2 "$WORK/data" > /dev/null || fail "fine-tuning from an import on the same tokenizer's data"
echo "ok: data prepared with the model's tokenizer trains from run.init_from"

# Another tokenizer with the same vocabulary size (same model, Metaspace pre-tokenizer) and a
# trained BPE: refused before anything is written, naming both fingerprints.
"$BRAID" prepare --input corpus --out data_mistral --tokenizer "$FIX/mistral/tokenizer.json" > /dev/null
FP_MODEL=$(python3 -c "import json; print(json.load(open('data/meta.json'))['tokenizer_fingerprint'])")
FP_DATA=$(python3 -c "import json; print(json.load(open('data_mistral/meta.json'))['tokenizer_fingerprint'])")
[ "$FP_MODEL" != "$FP_DATA" ] || fail "two tokenizers that give other ids share a fingerprint"
expect_fail "$FP_DATA" ft bad "$WORK/data_mistral"
expect_fail "uses tokenizer $FP_MODEL" ft bad "$WORK/data_mistral"
[ ! -e runs/bad ] || fail "a refused run left runs/bad"
"$BRAID" prepare --input corpus --out data_bpe --tokenizer bpe --vocab-size 300 > /dev/null
expect_fail "braid prepare --tokenizer" ft bad2 "$WORK/data_bpe"
expect_fail "braid prepare --tokenizer" "$BRAID" train llama.yaml --set run.name=bad3 \
  --set run.init_from="$WORK/runs/imported" --set data.dir="$WORK/data_bpe"

# ---- bad --tokenizer values ----
expect_fail "--tokenizer 'nosuch' does not exist" "$BRAID" prepare --input corpus --out bad_out --tokenizer nosuch
expect_fail "without tokenizer.json" "$BRAID" prepare --input corpus --out bad_out --tokenizer corpus
python3 -c "
import json; t = json.load(open('$FIX/llama2/tokenizer.json')); t['normalizer'] = {'type': 'Lowercase'}
json.dump(t, open('lower.json', 'w'))"
expect_fail 'normalizer type "Lowercase"' "$BRAID" prepare --input corpus --out bad_out --tokenizer lower.json
expect_fail "drop --vocab-size" "$BRAID" prepare --input corpus --out bad_out --tokenizer hf --vocab-size 300
[ ! -e bad_out ] || fail "a refused prepare left its output folder"
echo "ok: bad tokenizers are refused, nothing written"
