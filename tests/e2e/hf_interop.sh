#!/usr/bin/env bash
# Hugging Face interop: export writes tokenizer.json/tokenizer_config.json/generation_config.json
# and bos/eos ids; import reads an HF tokenizer.json and writes a config.yaml to fine-tune from
# (run.init_from); RoPE, head_dim and bias keys are read or refused.
source "$(dirname "$0")/common.bash"
make_corpus
"$BRAID" prepare --input corpus --out data --tokenizer bpe --vocab-size 300 --val-fraction 0.1 > prep.log
[ -f data/braid_tokenizer.json ] || fail "prepare wrote no braid_tokenizer.json"
grep -q '"eot":"<|endoftext|>"' data/braid_tokenizer.json || fail "no end-of-text token"
grep -q '"format_version":2' data/braid_tokenizer.json || fail "tokenizer format version not 2"
cat > llama.yaml <<YAML
run: {name: llama, dir: $WORK/runs}
model: {family: llama, vocab_size: 300, context_length: 32, n_layer: 2, n_embd: 32, n_head: 4, n_kv_head: 2, rope_theta: 50000}
data: {dir: $WORK/data, micro_batch: 4, seq_len: 32, grad_accum: 1, seed: 5}
optim: {lr: 0.003, warmup_steps: 2}
train: {steps: 4, log_interval: 2, eval_interval: 0, sample_tokens: 0, peak_tflops: 1.0}
checkpoint: {interval: 0, keep_last: 1}
YAML
"$BRAID" train llama.yaml > train.log
[ -f runs/llama/braid_tokenizer.json ] || fail "the run has no braid_tokenizer.json"

# ---- export ----
"$BRAID" export runs/llama --out hf > /dev/null
for f in model.safetensors config.json tokenizer.json tokenizer_config.json generation_config.json braid_tokenizer.json; do
  [ -f hf/$f ] || fail "export wrote no $f"
done
python3 - <<'PY' || fail "exported JSON files"
import json
c = json.load(open('hf/config.json')); t = json.load(open('hf/tokenizer.json'))
g = json.load(open('hf/generation_config.json')); tc = json.load(open('hf/tokenizer_config.json'))
assert c['bos_token_id'] == c['eos_token_id'] == 299, c
assert g['eos_token_id'] == 299 and tc['eos_token'] == '<|endoftext|>'
assert c['rope_parameters'] == {'rope_type': 'default', 'rope_theta': 50000.0}, c['rope_parameters']
m = t['model']
assert m['type'] == 'BPE' and len(m['vocab']) == 300 and len(m['merges']) == 43, (len(m['vocab']), len(m['merges']))
assert t['pre_tokenizer']['type'] == 'ByteLevel' and t['decoder']['type'] == 'ByteLevel'
assert t['added_tokens'][0]['id'] == 299 and t['added_tokens'][0]['special']
assert m['vocab']['Ġ'] == 32  # the byte-level character for a space
PY
echo "ok: export writes the HF tokenizer files"

# ---- import reads the HF tokenizer.json (no braid file beside it) ----
cp -r hf hf_only && rm hf_only/braid_tokenizer.json
"$BRAID" import hf_only --out runs/imported > /dev/null
[ -f runs/imported/braid_tokenizer.json ] && [ -f runs/imported/config.yaml ] || fail "import wrote no tokenizer or config.yaml"
"$BRAID" generate runs/llama --prompt "The licence " --tokens 6 --temperature 0 --ids > a.txt
"$BRAID" generate runs/imported --prompt "The licence " --tokens 6 --temperature 0 --ids > b.txt
cmp a.txt b.txt || fail "generate on the import differs: $(cat a.txt) vs $(cat b.txt)"
echo "ok: generate works on an import through its HF tokenizer.json"

# ---- fine-tune from the import with no model keys ----
"$BRAID" train runs/imported/config.yaml --set data.dir="$WORK/data" --set train.steps=2 \
  --set train.eval_interval=0 --set train.sample_tokens=0 --set train.peak_tflops=1 > ft.log
grep -q "initialised from" ft.log || fail "fine-tuning did not start from the import: $(cat ft.log)"
grep -q "rope_theta: 50000" runs/imported-finetune/config.yaml || fail "model shape not taken from init_from"
expect_fail "model.n_embd" "$BRAID" train runs/imported/config.yaml --set data.dir="$WORK/data" --set model.n_embd=64
echo "ok: run.init_from takes the model from the import"

# ---- RoPE and other keys: read or refused ----
edit() { python3 -c "import json,sys; c=json.load(open('hf/config.json')); exec(sys.argv[1]); json.dump(c, open(sys.argv[2]+'/config.json','w'))" "$1" "$2"; }
variant() { rm -rf "$1" && mkdir "$1" && cp hf/model.safetensors hf/tokenizer.json "$1"/ && edit "$2" "$1"; }
variant hf_new "c.pop('rope_theta'); c.pop('rope_scaling')"
"$BRAID" import hf_new --out runs/new > /dev/null
grep -q '"rope_theta": *50000' runs/new/checkpoints/step-00000000/manifest.json || fail "rope_parameters.rope_theta ignored"
variant hf_old "c.pop('rope_parameters')"
"$BRAID" import hf_old --out runs/old > /dev/null
grep -q '"rope_theta": *50000' runs/old/checkpoints/step-00000000/manifest.json || fail "top-level rope_theta ignored"
variant hf_yarn "c['rope_parameters']={'rope_type':'yarn','rope_theta':50000.0,'factor':4.0,'original_max_position_embeddings':8}"
"$BRAID" import hf_yarn --out runs/yarn > /dev/null
grep -q '"rope_type": *"yarn"' runs/yarn/checkpoints/step-00000000/manifest.json || fail "yarn not read"
"$BRAID" export runs/yarn --out hf_yarn_again > /dev/null
python3 -c "import json; c=json.load(open('hf_yarn_again/config.json')); p=c['rope_parameters']; assert p['rope_type']=='yarn' and p['factor']==4.0 and p['original_max_position_embeddings']==8, p; assert c['rope_scaling']['rope_type']=='yarn', c" \
  || fail "export did not write the yarn settings back"
variant hf_scaling "c.pop('rope_parameters'); c['rope_scaling']={'type':'linear','factor':2.0}"
"$BRAID" import hf_scaling --out runs/scaling > /dev/null
grep -q '"rope_type": *"linear"' runs/scaling/checkpoints/step-00000000/manifest.json || fail "linear not read"
variant hf_dynamic "c.pop('rope_parameters'); c['rope_scaling']={'rope_type':'dynamic','factor':2.0}"
expect_fail 'rope_type "dynamic"' "$BRAID" import hf_dynamic --out runs/dynamic
variant hf_field "c['rope_parameters']={'rope_type':'linear','rope_theta':50000.0,'factor':2.0,'foo':1}"
expect_fail 'field "foo"' "$BRAID" import hf_field --out runs/field
variant hf_headdim "c['head_dim']=16"
expect_fail "head_dim" "$BRAID" import hf_headdim --out runs/headdim
variant hf_bias "c['attention_bias']=True"
expect_fail "attention_bias" "$BRAID" import hf_bias --out runs/bias
variant hf_mlpbias "c['mlp_bias']=True"
expect_fail "mlp_bias" "$BRAID" import hf_mlpbias --out runs/mlpbias
variant hf_tied "c['tie_word_embeddings']=True"
expect_fail "lm_head" "$BRAID" import hf_tied --out runs/tied
echo "ok: RoPE settings, head_dim, biases and tying are read or refused"

# ---- sharded export and import ----
"$BRAID" export runs/llama --out hf_sharded --max-shard-size 40KB > export_sharded.log
grep -q "weight files" export_sharded.log || fail "export did not say it sharded: $(cat export_sharded.log)"
[ -f hf_sharded/model.safetensors.index.json ] && [ ! -f hf_sharded/model.safetensors ] || fail "no index"
[ -f hf_sharded/generation_config.json ] || fail "sharded export wrote no generation_config.json"
ls hf_sharded/model-0000?-of-0000?.safetensors > /dev/null || fail "no shards"
"$BRAID" generate hf_sharded --prompt "The licence " --tokens 6 --temperature 0 --ids > d.txt
cmp a.txt d.txt || fail "generate on the sharded export differs"
"$BRAID" import hf_sharded --out runs/from_shards > /dev/null
cp -r hf_sharded hf_broken && rm hf_broken/model-00002-of-*.safetensors
expect_fail "does not exist" "$BRAID" import hf_broken --out runs/broken
expect_fail "--max-shard-size" "$BRAID" export runs/llama --out hf_bad --max-shard-size 5XB
echo "ok: sharded export, import and a missing shard refused"

# ---- old runs: a tokenizer.json in braid's format still loads ----
cp -r runs/llama runs/oldname && mv runs/oldname/braid_tokenizer.json runs/oldname/tokenizer.json
"$BRAID" generate runs/oldname --prompt "The licence " --tokens 6 --temperature 0 --ids > c.txt
cmp a.txt c.txt || fail "old tokenizer name"
echo "ok: the old tokenizer file name still loads"
echo "all HF interop checks passed"
