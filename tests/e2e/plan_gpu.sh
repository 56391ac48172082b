#!/usr/bin/env bash
# braid plan on a GPU, where this machine has none: --calibrate --device cuda fails with the
# reason and writes nothing; --compare reads a GPU run (run.json records its device) against a
# GPU profile as it reads a CPU run, and refuses a CPU profile against a GPU run and the
# reverse. The GPU run directory and profile are synthetic (a hand-written record and metrics,
# a CPU calibration relabelled as a GPU's): the measuring itself runs in tools/gpu_check.sh.
source "$(dirname "$0")/common.bash"
if "$BRAID" --version | grep -qE "^  GPUs: [0-9]+ visible"; then  # a GPU braid can use
  echo "a GPU is visible: the no-GPU failure is not tested here"
else
  expect_fail "--calibrate --device cuda: no GPU can be used" \
    "$BRAID" plan --calibrate --device cuda --out gpu_profile.json
  [ ! -e gpu_profile.json ] || fail "a refused GPU calibration wrote its profile"
fi
expect_fail "--device 'cuda:one' is not a device; expected cpu, cuda or cuda:N" \
  "$BRAID" plan --calibrate --device cuda:one --out gpu_profile.json
expect_fail "--device cuda names what --calibrate measures" \
  "$BRAID" plan --model gpt2-124m --device cuda
[ ! -e gpu_profile.json ] || fail "a refused calibration wrote its profile"

# A CPU profile, and the same rates labelled as measured on a GPU.
"$BRAID" plan --calibrate --calibrate-seconds 0.02 --calibrate-rounds 1 --out cpu.json > /dev/null
grep -q '"device": "cpu"' cpu.json || fail "a CPU profile does not say device cpu"
python3 - <<'PY'
import json
p = json.load(open("cpu.json"))
p.update(device="cuda", name="NVIDIA H200", description="synthetic GPU profile")
json.dump(p, open("gpu.json", "w"), indent=2)
PY

# A finished GPU run as braid train records one: config, run.json with rank 0's device, and
# log windows with kernel-group times.
gpu_run() {
  local dir=$1 device=$2
  mkdir -p "$dir"
  cat > "$dir/config.yaml" <<YAML
run: {name: $(basename "$dir"), dir: $WORK/runs}
model: {family: llama, vocab_size: 256, context_length: 32, n_layer: 2, n_embd: 32, n_head: 4, n_kv_head: 2}
data: {dir: $WORK/data, micro_batch: 4, seq_len: 32, grad_accum: 2, seed: 5}
optim: {warmup_steps: 1}
train: {steps: 6, log_interval: 2, eval_interval: 0, sample_tokens: 0, device: cuda}
YAML
  cat > "$dir/run.json" <<JSON
{"attempts": [{"start_step": 0, "threads": 16, "parallel_layout": {"ranks": 1, "dp": 1, "tp": 1, "pp": 1, "zero": 0},
  "devices": [{"rank": 0, "host": "gpu-host", "device": "$device"}]}]}
JSON
  : > "$dir/metrics.jsonl"
  echo '{"event": "start", "step": 0}' >> "$dir/metrics.jsonl"
  for s in 2 4 6; do
    echo "{\"event\": \"train\", \"step\": $s, \"step_s\": 0.004, \"kernel_s\": {\"gemm\": 0.0015, \"attention\": 0.0005, \"lm_head\": 0.0004, \"elementwise\": 0.0006, \"activation\": 0.0002, \"optimizer\": 0.0003, \"other\": 0.0005}}" >> "$dir/metrics.jsonl"
  done
}
gpu_run runs/gpu "cuda:0, NVIDIA H200 (sm_90, 139.8 GiB, 132 SMs) (train.device: cuda)"
gpu_run runs/cpu "cpu (train.device: cpu)"

"$BRAID" plan --device-profile gpu.json --compare runs/gpu > compare.txt
grep -q "^predicted vs measured" compare.txt || fail "no comparison of the GPU run: $(cat compare.txt)"
for g in gemm attention lm_head elementwise activation optimizer step; do
  grep -Eq "^  $g +[0-9.]+ +[0-9.]+ +[-+][0-9.]+%" compare.txt || fail "no predicted/measured row for $g"
done
grep -q "note:" compare.txt && fail "a note on a matching GPU: $(grep note: compare.txt)"
"$BRAID" plan --device-profile gpu.json --compare runs/gpu --json > compare.json
grep -q '"measured_step_s": 0.004' compare.json || fail "no measured_step_s in --json"
# Another GPU than the profile's: compared, with a note.
sed -i 's/NVIDIA H200 (sm_90[^"]*/NVIDIA A100-SXM4-80GB (sm_80, 79.2 GiB, 108 SMs)/' runs/gpu/run.json
"$BRAID" plan --device-profile gpu.json --compare runs/gpu > other.txt
grep -q "note: the profile was calibrated on NVIDIA H200, the run's rank 0 ran on cuda:0, NVIDIA A100" other.txt ||
  fail "no note on the other GPU: $(tail -3 other.txt)"

# A profile of the other device is refused, naming both files.
expect_fail "the device profile 'cpu.json' was calibrated on the CPU (cpu-calibrated) but the run trained on a GPU ($WORK/runs/gpu/run.json" \
  "$BRAID" plan --device-profile cpu.json --compare "$WORK/runs/gpu"
expect_fail "calibrate on the run's device with braid plan --calibrate --device cuda" \
  "$BRAID" plan --device-profile cpu.json --compare runs/gpu
expect_fail "the device profile 'gpu.json' was calibrated on a GPU (NVIDIA H200) but the run trained on the CPU" \
  "$BRAID" plan --device-profile gpu.json --compare runs/cpu
expect_fail "calibrated on different devices" \
  "$BRAID" plan --device-profile gpu.json,cpu.json --compare runs/gpu
echo "ok: GPU calibration refused without a GPU; GPU runs compared against GPU profiles only"
