#!/usr/bin/env bash
# Memory of one QLoRA step on a Llama-shaped ~1B model (TinyLlama's shape: 22 layers, width
# 2048, 32 heads, 4 KV heads, FFN 5632, vocabulary 32000; 1.10B parameters) on the CPU.
# The model is written here as a Hugging Face directory of random bf16 weights (nothing is
# downloaded); `braid train --dry-run` then builds the run as `braid train` would (NF4 base
# with double quantisation, LoRA rank 16 on every linear, bf16 compute, adamw8bit, full
# activation checkpointing, sequence 512, micro-batch 1), runs one step and prints the
# planner's bytes next to the measured ones. The script prints that table, the peak resident
# set of the process, and checks the two goals: the quantised base at most 0.56 bytes per
# weight, and the planned total within 5% of the measured peak.
# Usage: bash tools/bench_qlora_memory.sh [BRAID_BINARY] [WORK_DIR]   (about 20 GB of disk
# and 10 GB of memory while the base is loaded)
set -euo pipefail
BRAID=${1:-build/braid}
WORK=${2:-/tmp/braid_qlora_memory}
BRAID=$(readlink -f "$BRAID")
SRC=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$WORK"
cd "$WORK"
if [ ! -f hf/model.safetensors.index.json ]; then
  rm -rf hf
  python3 "$SRC/tools/write_hf_llama.py" hf --layers 22 --width 2048 --ffn 5632 --vocab 32000 \
    --heads 32 --kv-heads 4 --shards 24 --fill random
fi
if [ ! -f data/train.bin ]; then
  mkdir -p corpus
  cat /usr/share/common-licenses/* | head -c 400000 > corpus/licenses.txt
  "$BRAID" prepare --input corpus --out data --tokenizer byte --val-fraction 0.05 > /dev/null
fi
cat > qlora.yaml <<YAML
run: {name: qlora_1b, dir: $WORK/runs}
data: {dir: $WORK/data, micro_batch: 1, seq_len: 512, seed: 1}
optim: {name: adamw8bit, lr: 0.0002}
train: {steps: 10, precision: bf16, checkpointing: full, sample_tokens: 0}
lora: {rank: 16, alpha: 32, targets: all-linear, init_from: $WORK/hf, base_quant: nf4,
       double_quant: true, quant_block_size: 64}
YAML
echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset}, $(date -u +%F)"
echo "# $BRAID train qlora.yaml --dry-run"
python3 - "$BRAID" <<'PY'
import resource, subprocess, sys
out = subprocess.run([sys.argv[1], "train", "qlora.yaml", "--dry-run"], check=True,
                     capture_output=True, text=True).stdout
print(out, end="")
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
rows = {}
bpw = None
for line in out.splitlines():
    parts = line.split()
    if len(parts) >= 3:
        try: rows[" ".join(parts[:-2])] = (float(parts[-2]), float(parts[-1]))
        except ValueError: pass
    if line.strip().startswith("quantised base:"):
        bpw = float(line.split(",")[-1].split()[0])
plan, got = rows["total"]
print(f"peak resident set of the process (loading the bf16 base included): {rss:.0f} MiB")
print(f"quantised base: {bpw:.4f} bytes per weight (goal <= 0.56)")
print(f"total planned {plan:.1f} MiB vs measured peak {got:.1f} MiB: {100 * (plan - got) / got:+.1f}% (goal within 5%)")
ok = bpw <= 0.56 and abs(plan - got) <= 0.05 * got
print("goals met" if ok else "GOALS NOT MET")
sys.exit(0 if ok else 1)
PY
