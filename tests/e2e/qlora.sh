#!/usr/bin/env bash
# QLoRA end to end: a LoRA run over an NF4 base (lora.base_quant) from an exported HF model,
# trained with adamw8bit; its checkpoints hold no quantised base, so eval and merge-lora read
# the base from lora.init_from and quantise it as training did. The merged HF model (f32)
# evaluates exactly like the run with its adapters; the bf16 export within bf16 rounding; the
# run differs from the base. The checkpoints keep the base by reference (file and checksum): a
# changed or missing base is refused by name on resume, eval and merge; the intact one resumes.
source "$(dirname "$0")/common.bash"
llama_hf_base 64 3
cat > q.yaml <<YAML
run: {name: q, dir: $WORK/runs}
data: {dir: $WORK/data, micro_batch: 4, seq_len: 32, seed: 4}
optim: {name: adamw8bit, lr: 0.01, warmup_steps: 1}
train: {steps: 4, log_interval: 1, eval_interval: 0, sample_tokens: 0, peak_tflops: 1.0}
checkpoint: {interval: 2, keep_last: 2}
lora: {rank: 4, alpha: 8, targets: [all-linear], init_from: $WORK/hf, base_quant: nf4}
YAML
"$BRAID" train q.yaml > q.log
loss_of() { grep '"loss"' "$1" | sed 's/.*"loss": *\([^,}]*\).*/\1/'; }
"$BRAID" eval runs/q --data data/val.bin > q_eval.json
grep -q '"adapter": true' q_eval.json || fail "eval on the QLoRA run does not apply the adapter"
"$BRAID" eval hf --data data/val.bin > base_eval.json
"$BRAID" merge-lora runs/q --out merged > merge.log
"$BRAID" eval merged --data data/val.bin > merged_eval.json
"$BRAID" merge-lora runs/q --out merged16 --dtype bf16 > /dev/null
grep -q '"torch_dtype": "bfloat16"' merged16/config.json || fail "--dtype bf16 not in config.json"
"$BRAID" eval merged16 --data data/val.bin > merged16_eval.json
q=$(loss_of q_eval.json); m=$(loss_of merged_eval.json); m16=$(loss_of merged16_eval.json)
b=$(loss_of base_eval.json)
echo "val loss: base $b, QLoRA run $q, merged f32 $m, merged bf16 $m16"
[ "$q" = "$m" ] || fail "merged model ($m) does not evaluate like the QLoRA run ($q)"
[ "$q" != "$b" ] || fail "the QLoRA run evaluates like its base"
awk -v a="$q" -v c="$m16" 'BEGIN { d = a - c; if (d < 0) d = -d; exit !(d / a < 1e-2) }' ||
  fail "bf16 merge ($m16) is not within 1% of the run ($q)"
# The base stays by reference: the checkpoint holds no targeted base weight, its manifest names
# the base file with its checksum; a changed or missing base is refused, naming the file.
ck=runs/q/checkpoints/step-00000004
grep -aq "model.layers.0.self_attn.q_proj.lora_A.weight" $ck/model.safetensors || fail "no adapter in the checkpoint"
grep -aq "model.layers.0.self_attn.q_proj.weight" $ck/model.safetensors && fail "the checkpoint copies the quantised base"
grep -q "\"quantised_base\"" $ck/manifest.json || fail "the manifest does not name the base"
grep -q "$WORK/hf" $ck/manifest.json || fail "the manifest does not name the base directory"
grep -q "braid-mix64-v1:" $ck/manifest.json || fail "the manifest has no checksum of the base"
expect_error() {  # expect_error WANT CMD...: CMD fails saying WANT
  local want=$1; shift
  set +e; out=$("$@" 2>&1); rc=$?; set -e
  [ $rc -ne 0 ] || fail "expected a failure of: $*"
  echo "$out" | grep -qF -- "$want" || fail "expected '$want' from: $*; got: $out"
  echo "ok (exit $rc): $want"
}
cp hf/model.safetensors base_copy.safetensors
python3 -c "
import sys; p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[-3] ^= 1; open(p, 'wb').write(b)
" hf/model.safetensors
expect_error "$WORK/hf/model.safetensors, which has changed" "$BRAID" train q.yaml --set train.steps=6
expect_error "$WORK/hf/model.safetensors, which has changed" "$BRAID" eval runs/q --data data/val.bin
cp base_copy.safetensors hf/model.safetensors
mv hf hf_gone
expect_error "$WORK/hf/model.safetensors, which is missing" "$BRAID" merge-lora runs/q --out m2
mv hf_gone hf
"$BRAID" train q.yaml --set train.steps=6 > q_resumed.log
grep -q "resumed from" q_resumed.log || fail "the QLoRA run did not resume"
echo "ok: QLoRA merge ($b -> $q)"
