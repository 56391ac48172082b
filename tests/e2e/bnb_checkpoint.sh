#!/usr/bin/env bash
# A checkpoint quantised by bitsandbytes (tests/data/bnb_llama: NF4 with double quantisation)
# as lora.init_from: a QLoRA run trains on it and the loss falls. Quant states braid does not
# read are refused naming the tensor and the field: fp4, a missing blocksize, a custom
# quant_map, an 8-bit (LLM.int8) weight.
source "$(dirname "$0")/common.bash"
make_corpus
"$BRAID" prepare --input corpus --out data --tokenizer byte --val-fraction 0.1 > /dev/null
cp -r "$SRC/tests/data/bnb_llama" bnb
cat > q.yaml <<YAML
run: {name: q, dir: $WORK/runs}
data: {dir: $WORK/data, micro_batch: 4, seq_len: 32, seed: 4}
optim: {lr: 0.01, warmup_steps: 1}
train: {steps: 8, log_interval: 1, eval_interval: 0, sample_tokens: 0, peak_tflops: 1.0}
lora: {rank: 4, alpha: 8, targets: [all-linear], init_from: $WORK/bnb, base_quant: nf4}
YAML
"$BRAID" train q.yaml > q.log
grep -q "init_from: $WORK/bnb" q.log || fail "the run did not start from the bitsandbytes checkpoint"
python3 - q.log <<'PY'
import json, sys
losses = [json.loads(l)["loss"] for l in open(sys.argv[1]) if l.startswith("{") and '"loss"' in l]
if len(losses) < 8:
    losses = [float(l.split("loss")[1].split()[0]) for l in open(sys.argv[1]) if " loss " in l]
print("losses:", losses)
if not losses[-1] < losses[0]:
    sys.exit(f"FAIL: the loss did not fall ({losses[0]} -> {losses[-1]})")
PY
# Edited copies: the header and the JSON bytes are changed in place (same lengths).
edit() {  # edit DIR OLD NEW: replaces the bytes OLD with NEW in DIR/model.safetensors
  python3 - "$1/model.safetensors" "$2" "$3" <<'PY'
import sys
p, old, new = sys.argv[1], sys.argv[2].encode(), sys.argv[3].encode()
b = open(p, "rb").read()
assert b.count(old) >= 1 and len(old) == len(new), (old, new)
open(p, "wb").write(b.replace(old, new))
PY
}
refused() {  # refused DIR WANT: importing DIR fails saying WANT
  expect_fail "$2" "$BRAID" import "$1" --out "runs/imp_$1"
  [ ! -e "runs/imp_$1" ] || fail "a refused import wrote runs/imp_$1"
}
cp -r bnb fp4 && edit fp4 bitsandbytes__nf4 bitsandbytes__fp4
refused fp4 "model.layers.0.mlp.down_proj.weight.quant_state.bitsandbytes__fp4: quant_type 'fp4' is not supported"
cp -r bnb noblock && edit noblock '"blocksize"' '"blocksizX"'
refused noblock "the quant state has no 'blocksize'"
cp -r bnb map && python3 - map/model.safetensors <<'PY'
import json, struct, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
off = 8 + n + h["model.layers.0.self_attn.q_proj.weight.quant_map"]["data_offsets"][0]
b[off:off + 4] = struct.pack("<f", -0.99)  # a custom table
open(p, "wb").write(bytes(b))
PY
refused map "model.layers.0.self_attn.q_proj.weight.quant_map is not the NF4 table"
cp -r bnb int8 && edit int8 'q_proj.weight.absmax"' 'q_proj.weight.SCB"   '
refused int8 "q_proj.weight.SCB is a bitsandbytes 8-bit (LLM.int8) weight"
echo "ok: bitsandbytes checkpoint trains; unsupported states refused by name"
