#!/usr/bin/env bash
# The test suite on a CPU without AVX-512: an AMD Zen 3 (EPYC-Milan, AVX2 + FMA + F16C)
# emulated by QEMU's user mode (Debian's qemu-user; it emulates no AVX-512 at all). braid picks
# its CPU paths at run time, and BRAID_CPU_ISA caps them in the normal suite; but a capped run on
# an AVX-512 machine cannot show an AVX-512 instruction that reaches the AVX2 path (a helper
# compiled for the wrong level, an intrinsic outside its target). Here one ends the process with
# SIGILL, as it would on a real Zen 3.
#
#   bash tools/test_on_avx2_cpu.sh [BUILD_DIR]     (default build/; ctest's tests already built)
#
# Runs, under emulation (10-50x slower than the host; about 12 minutes on 2 cores):
#  1. the unit suite (braid_tests), less three tests that read the host rather than the CPU the
#     process sees: /proc/cpuinfo (the host's flags), a GEMM rate floor (emulated speed), and
#     transparent huge pages (the host's madvise);
#  2. `braid train` on a tiny GPT-2 in fp32 and a tiny Llama in bf16, whose losses must match the
#     same runs on this machine with the CPU paths capped at AVX2 (BRAID_CPU_ISA=avx2,
#     ONEDNN_MAX_CPU_ISA=AVX2) to 1e-5 relative (oneDNN blocks its GEMMs by the cache sizes the
#     CPU reports, which QEMU's may differ from, so sums may run in another order; on a Xeon
#     host they were bit for bit the same).
# QEMU_CPU overrides the emulated model (qemu-x86_64 -cpu help lists them).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$here/build}" && pwd)
cpu=${QEMU_CPU:-EPYC-Milan}
command -v qemu-x86_64 >/dev/null ||
  { echo "test_on_avx2_cpu: needs qemu-x86_64 (Debian: apt-get install qemu-user)" >&2; exit 2; }
for f in "$build/tests/braid_tests" "$build/braid"; do
  [ -x "$f" ] || { echo "test_on_avx2_cpu: $f is not built (cmake --build $build)" >&2; exit 2; }
done
# QEMU warns once per CPU feature its code generator lacks (none that braid uses): not news.
emulate() { qemu-x86_64 -cpu "$cpu" "$@" 2> >(grep -v "TCG doesn't support requested feature" >&2); }

seen=$(emulate "$build/braid" --version 2>&1 | grep -o '^cpu: [a-z0-9_]*' || true)
echo "test_on_avx2_cpu: emulated $cpu; braid reports '$seen'"
[ "$seen" = "cpu: avx2" ] || { echo "FAIL: braid should see the avx2 level under $cpu" >&2; exit 1; }

start=$(date +%s)
host_only='KernelsCpuBlocks.DetectedLevelMatchesProcCpuinfo:GemmTest.MeasurePeakIsPositive'
host_only+=':Memory.LargeBlocksAreAdvisedAsHugePages'
OMP_NUM_THREADS=2 emulate "$build/tests/braid_tests" --gtest_brief=1 --gtest_filter="-$host_only"
echo "test_on_avx2_cpu: unit suite passed under $cpu in $(($(date +%s) - start)) s"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
mkdir corpus
head -c 40000 /usr/share/common-licenses/GPL-3 > corpus/a.txt
"$build/braid" prepare --input corpus --out data --tokenizer byte --val-fraction 0.1 > /dev/null
config() {  # family, precision, run name
  cat <<YAML
run: {name: $3, dir: $work/runs}
model: {family: $1, vocab_size: 256, context_length: 32, n_layer: 2, n_embd: 64, n_head: 4}
data: {dir: $work/data, micro_batch: 4, seq_len: 32, grad_accum: 2, seed: 3}
optim: {lr: 0.003, warmup_steps: 1}
train: {steps: 4, log_interval: 1, eval_interval: 0, sample_tokens: 0, precision: $2}
YAML
}
losses() { grep '"step_loss"' "runs/$1/metrics.jsonl" | sed 's/.*"step_loss":\([^,}]*\).*/\1/'; }
for run in "gpt2 fp32" "llama bf16"; do
  set -- $run
  config "$1" "$2" "native-$1" > native.yaml
  config "$1" "$2" "emulated-$1" > emulated.yaml
  BRAID_CPU_ISA=avx2 ONEDNN_MAX_CPU_ISA=AVX2 OMP_NUM_THREADS=2 "$build/braid" train native.yaml \
    > "native-$1.log"
  OMP_NUM_THREADS=2 emulate "$build/braid" train emulated.yaml > "emulated-$1.log"
  paste <(losses "native-$1") <(losses "emulated-$1") | awk -v run="$1 $2" '
    { n++; d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5 * $1) bad = bad sprintf(" step %d: %s vs %s", n, $1, $2) }
    END { if (n != 4) { print "FAIL: " run ": " n " step losses, expected 4"; exit 1 }
          if (bad != "") { print "FAIL: " run " losses differ from the native AVX2 run:" bad; exit 1 }
          print "test_on_avx2_cpu: " run ": the 4 step losses match the native AVX2 run" }'
done
echo "test_on_avx2_cpu: passed under $cpu in $(($(date +%s) - start)) s"
