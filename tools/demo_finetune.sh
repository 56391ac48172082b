#!/usr/bin/env bash
# The fine-tuning path end to end on this machine, in a few minutes on a CPU:
#   1. pretrain a small Llama on the license texts (configs/demo_pretrain.yaml),
#   2. export it as a Hugging Face directory (what a downloaded model looks like),
#   3. write instruction data as prompt/completion JSONL and prepare it with that model's
#      tokenizer,
#   4. LoRA fine-tune (configs/demo_lora.yaml), evaluate and sample with the adapter,
#   5. merge the adapter into an HF model.
# Everything goes under demo/ (or $DEMO_DIR). Run from anywhere:
#   bash tools/demo_finetune.sh
# Options (environment): DEMO_DIR, BRAID (default build/braid), DEMO_PRETRAIN_STEPS (400),
# DEMO_LORA_STEPS (150); MPIRUN="mpirun -np 2" runs the LoRA step on 2 data-parallel ranks.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
BRAID=${BRAID:-$here/build/braid}
out=${DEMO_DIR:-$here/demo}
pre_steps=${DEMO_PRETRAIN_STEPS:-400}
lora_steps=${DEMO_LORA_STEPS:-150}
read -r -a mpirun <<<"${MPIRUN:-}"
[ -x "$BRAID" ] || { echo "demo_finetune: no braid binary at $BRAID (build it: bash tools/setup.sh)" >&2; exit 1; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
licenses=/usr/share/common-licenses
step() { echo; echo "== $*"; }

step "1. pretrain a small Llama on $licenses"
"$BRAID" prepare --input "$licenses" --out "$out/data/text" --tokenizer bpe --vocab-size 512 \
  --val-fraction 0.05 --force
"$BRAID" train "$here/configs/demo_pretrain.yaml" --set "run.dir=$out/runs" \
  --set "data.dir=$out/data/text" --set "train.steps=$pre_steps"

step "2. export it as a Hugging Face directory"
"$BRAID" export "$out/runs/demo_pretrain" --out "$out/hf/base" --force

step "3. instruction data: prompt/completion JSONL, prepared with the model's tokenizer"
mkdir -p "$out/jsonl"
python3 - "$licenses" "$out/jsonl" <<'PY'
import json, os, random, re, sys
src, dst = sys.argv[1], sys.argv[2]
names = ["GPL-3", "Apache-2.0", "MPL-2.0", "Artistic", "LGPL-2.1"]
samples = []
for name in names:
    path = os.path.join(src, name)
    if not os.path.exists(path):
        continue
    text = re.sub(r"\s+", " ", open(path, encoding="utf-8", errors="replace").read())
    for s in re.split(r"(?<=[.;:]) ", text):
        words = s.split()
        if 6 <= len(words) <= 30:
            samples.append({"prompt": "Which license says: \"" + " ".join(words) + "\"?\n",
                            "completion": "The " + name + " license.\n"})
random.Random(0).shuffle(samples)
cut = max(1, len(samples) // 20)
for part, rows in (("train", samples[cut:]), ("val", samples[:cut])):
    with open(os.path.join(dst, part + ".jsonl"), "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
print(f"{len(samples)} prompt/completion pairs from {len(names)} licenses")
PY
"$BRAID" prepare --input "$out/jsonl" --out "$out/data/chat" --tokenizer "$out/hf/base" --force

step "4. LoRA fine-tune, evaluate and sample with the adapter"
"${mpirun[@]}" "$BRAID" train "$here/configs/demo_lora.yaml" --set "run.dir=$out/runs" \
  --set "lora.init_from=$out/hf/base" --set "data.dir=$out/data/chat" \
  --set "train.steps=$lora_steps"
"$BRAID" eval "$out/runs/demo_lora"
"$BRAID" eval "$out/runs/demo_lora" --no-adapter
prompt=$(head -1 "$out/jsonl/val.jsonl" | python3 -c 'import json,sys; print(json.load(sys.stdin)["prompt"], end="")')
"$BRAID" generate "$out/runs/demo_lora" --prompt "$prompt" --tokens 12 --temperature 0

step "5. merge the adapter into a Hugging Face model"
"$BRAID" merge-lora "$out/runs/demo_lora" --out "$out/hf/merged" --force
"$BRAID" generate "$out/hf/merged" --prompt "$prompt" --tokens 12 --temperature 0
echo
echo "demo done: $out (hf/merged loads with transformers' AutoModelForCausalLM)"
