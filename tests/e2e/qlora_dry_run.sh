#!/usr/bin/env bash
# `braid train --dry-run` on a QLoRA config builds the quantised base as the run does and prints
# the planner's categories beside the bytes held: the base's codes and constants, the other
# frozen weights, the adapters, masters and 8-bit moments. The codes match the plan exactly,
# the weights within 2%, an nf4 base holds under 0.53 bytes per weight, and the quantised run's
# weights are under 40% of the same run's with a bf16 base.
source "$(dirname "$0")/common.bash"
llama_hf_base 256 1
for quant in nf4 int8 none; do
  cat > q_$quant.yaml <<YAML
run: {name: q_$quant, dir: $WORK/runs}
data: {dir: $WORK/data, micro_batch: 2, seq_len: 32, seed: 4}
optim: {name: adamw8bit, lr: 0.01, warmup_steps: 1}
train: {steps: 4, precision: bf16, sample_tokens: 0, peak_tflops: 1.0}
lora: {rank: 8, alpha: 16, targets: [all-linear], init_from: $WORK/hf, base_quant: $quant}
YAML
  "$BRAID" train q_$quant.yaml --dry-run > dry_$quant.log
  [ ! -e runs/q_$quant ] || fail "--dry-run wrote a run directory"
done
cat dry_nf4.log
python3 - dry_nf4.log dry_int8.log dry_none.log <<'PY'
import sys
def rows(path):
    out = {}
    for line in open(path):
        parts = line.split()
        if len(parts) >= 3:
            try:
                out[" ".join(parts[:-2])] = (float(parts[-2]), float(parts[-1]))
            except ValueError:
                pass
        if line.strip().startswith("quantised base:"):
            out["bytes_per_weight"] = float(line.split(",")[-1].split()[0])
    return out
nf4, int8, none = (rows(p) for p in sys.argv[1:4])
def fail(msg):
    sys.exit("FAIL: " + msg)
for name, r, bpw in (("nf4", nf4, (0.5, 0.53)), ("int8", int8, (1.0, 1.03))):
    for key in ("base codes", "base constants", "other frozen", "adapters", "weights",
                "master weights", "optimizer"):
        if key not in r: fail(f"{name}: no '{key}' row")
    plan, got = r["base codes"]
    if abs(plan - got) > 0.002: fail(f"{name}: base codes planned {plan} vs held {got} MiB")
    plan, got = r["weights"]
    if abs(plan - got) > 0.02 * got: fail(f"{name}: weights planned {plan} vs measured {got} MiB")
    lo, hi = bpw
    if not lo <= r["bytes_per_weight"] <= hi:
        fail(f"{name}: {r['bytes_per_weight']} bytes per quantised weight, expected {lo}..{hi}")
if "base codes" in none: fail("a bf16 base printed quantised rows")
if nf4["weights"][1] > 0.4 * none["weights"][1]:
    fail(f"nf4 weights {nf4['weights'][1]} MiB not under 40% of the bf16 base's {none['weights'][1]}")
if not nf4["weights"][1] < int8["weights"][1] < none["weights"][1]:
    fail("weights do not shrink from bf16 to int8 to nf4")
print("ok: nf4 %.3f, int8 %.3f, bf16 %.3f MiB of weights" %
      (nf4["weights"][1], int8["weights"][1], none["weights"][1]))
PY
