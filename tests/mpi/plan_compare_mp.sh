#!/usr/bin/env bash
# `braid plan --compare` on multi-rank runs: tiny dp=2, pp=2 (1f1b), tp=2 and dp=2 x tp=2 x pp=2
# runs under mpirun; the comparison must take each run's layout from its run directory and
# print every row (step, bubble fraction under pp, non-kernel time, exposed communication,
# memory by category) with numbers, in text and --json; a measured communication fit in the
# profile must change the prediction; bad input (no metrics, no run record, a config or
# layout option that is not the run's, an unmodelled schedule) is refused by name.
#   plan_compare_mp.sh <mpirun> <braid> <workdir>
set -euo pipefail
MPIRUN=$1
BRAID=$2
WORK=$3
rm -rf "$WORK"
mkdir -p "$WORK/corpus"
cd "$WORK"
fail() { echo "FAIL: $*" >&2; exit 1; }
head -c 60000 /usr/share/common-licenses/GPL-3 > corpus/a.txt
"$BRAID" prepare --input corpus --out data --tokenizer byte --val-fraction 0.1 > /dev/null
cat > c.yaml <<YAML
run: {name: one, dir: $WORK/runs}
model: {family: gpt2, vocab_size: 256, context_length: 16, n_layer: 4, n_embd: 32, n_head: 4}
data: {dir: $WORK/data, micro_batch: 2, seq_len: 16, grad_accum: 4, seed: 3}
optim: {warmup_steps: 2}
train: {steps: 6, log_interval: 2, eval_interval: 0, sample_tokens: 0, peak_tflops: 1.0}
checkpoint: {interval: 0, keep_last: 1}
parallel: {timeout_s: 60}
YAML
mpi() {
  local np=$1; shift
  "$MPIRUN" --oversubscribe -np "$np" "$BRAID" train c.yaml "$@" > /dev/null
}
mpi 2 --set run.name=dp2 --set data.grad_accum=2
mpi 2 --set run.name=pp2 --set parallel.pp=2 --set parallel.schedule=1f1b
mpi 2 --set run.name=tp2 --set parallel.tp=2
mpi 2 --set run.name=tp2sp --set parallel.tp=2 --set parallel.sequence_parallel=true
mpi 8 --set run.name=3d --set parallel.tp=2 --set parallel.pp=2 --set data.grad_accum=2

# The profile of one rank (OMP_NUM_THREADS=1, as the ranks ran).
"$BRAID" plan --calibrate --calibrate-seconds 0.02 --calibrate-rounds 1 --out profile.json > /dev/null
grep -q '"threads": 1' profile.json || fail "the profile does not record its thread count"

num='[0-9]+\.[0-9]+'
row() {  # row FILE NAME: "  NAME  predicted  measured  error%" with numbers
  grep -Eq "^  $2 +$num +$num +[-+]$num%" "$1" || { cat "$1"; fail "$1: no numeric row '$2'"; }
}
check() {  # check RUN LAYOUT-LINE PP
  local run=$1
  "$BRAID" plan --device-profile profile.json --compare runs/$run > $run.txt
  grep -q "^layout $2" $run.txt || { cat $run.txt; fail "$run: no layout line '$2'"; }
  row $run.txt "step s"
  row $run.txt "weights"
  row $run.txt "grads"
  row $run.txt "optimizer"
  row $run.txt "activations"
  row $run.txt "total \\(allocator\\)"
  # Non-kernel time and exposed communication: both sides numeric (the planner's may be 0: a
  # data-parallel all-reduce it hides behind the backward pass).
  for r in "non-kernel s" "exposed comm s"; do
    grep -Eq "^  $r +$num +$num " $run.txt || { cat $run.txt; fail "$run: no numeric row '$r'"; }
  done
  if [ "$3" -gt 1 ]; then
    row $run.txt "bubble fraction"
    grep -Eq "^  measured bubble per stage: $num% $num%" $run.txt || fail "$run: no per-stage bubble"
  fi
  "$BRAID" plan --device-profile profile.json --compare runs/$run --json > $run.json
  for key in '"ranks"' '"step s"' '"non-kernel s"' '"exposed comm s"' '"memory_mib"' '"activations"'; do
    grep -q "$key" $run.json || fail "$run: --json lacks $key"
  done
  if [ "$3" -gt 1 ]; then
    grep -q '"bubble fraction"' $run.json || fail "$run: --json lacks the bubble fraction"
    grep -q '"measured_bubble_per_stage"' $run.json || fail "$run: --json lacks the stage bubbles"
  fi
  echo "$run: every row present"
}
check dp2 "dp=2 tp=1 pp=1 (2 ranks)" 1
check pp2 "dp=1 tp=1 pp=2 schedule 1f1b v=1 (2 ranks)" 2
check tp2 "dp=1 tp=2 pp=1 (2 ranks)" 1
check 3d "dp=2 tp=2 pp=2 schedule 1f1b v=1 (8 ranks)" 2
# The layout came from the run: the tp=2 run's rank holds half the block weights of one rank's.
w_tp=$(grep -E "^  weights +$num +$num" tp2.txt | awk '{print $2}')
w_dp=$(grep -E "^  weights +$num +$num" dp2.txt | awk '{print $2}')
awk -v a="$w_tp" -v b="$w_dp" 'BEGIN { exit !(a < 0.75 * b) }' || fail "tp=2 weights $w_tp vs dp=2 $w_dp"

# Sequence parallelism (the run's config says so): the norms' activations shrink, in the run
# and in the prediction, and the prediction stays within 15 % of the measured peak.
check tp2sp "dp=1 tp=2 pp=1 (2 ranks)" 1
act() { grep -E "^  activations +$num +$num" "$1" | awk '{print $'"$2"'}'; }
awk -v a="$(act tp2sp.txt 3)" -v b="$(act tp2.txt 3)" 'BEGIN { exit !(a < b) }' ||
  fail "sequence parallelism did not lower the measured activations ($(act tp2sp.txt 3) vs $(act tp2.txt 3))"
awk -v a="$(act tp2sp.txt 2)" -v b="$(act tp2.txt 2)" 'BEGIN { exit !(a < b) }' ||
  fail "the planner ignored the run's sequence_parallel ($(act tp2sp.txt 2) vs $(act tp2.txt 2))"
awk -v p="$(act tp2sp.txt 2)" -v m="$(act tp2sp.txt 3)" 'BEGIN { d = (p - m) / m; if (d < 0) d = -d; exit !(d < 0.15) }' ||
  fail "sequence-parallel activations predicted $(act tp2sp.txt 2) vs measured $(act tp2sp.txt 3) MiB"
echo "tp2 activations: $(act tp2.txt 3) MiB, with sequence parallelism $(act tp2sp.txt 3) (predicted $(act tp2sp.txt 2))"
# A measured communication fit (what tools/bench_allreduce --profile stores) is used: at
# 0.001 GB/s the tp=2 all-reduces take far longer than at the copy bandwidth.
sed 's/^{/{\n  "comm_bus_gbs": 0.001, "comm_latency_us": 30,/' profile.json > slow.json
"$BRAID" plan --device-profile slow.json --compare runs/tp2 > tp2_slow.txt
fast=$(grep -E "^  exposed comm s" tp2.txt | awk '{print $4}')
slow=$(grep -E "^  exposed comm s" tp2_slow.txt | awk '{print $4}')
awk -v f="$fast" -v s="$slow" 'BEGIN { exit !(s > 10 * f) }' ||
  fail "the profile's comm_bus_gbs did not change the prediction ($fast vs $slow s)"

# A profile calibrated on other thread counts than the ranks ran is pointed out.
sed 's/"threads": 1/"threads": 2/' profile.json > two.json
"$BRAID" plan --device-profile two.json --compare runs/tp2 > two.txt
grep -q "calibrated on 2 threads, the run's ranks ran 1" two.txt || fail "no thread-count note"

# Without --compare a config's own layout is planned (on exactly its ranks).
"$BRAID" plan --config c.yaml --set parallel.tp=2 --set parallel.pp=2 --device-profile profile.json > cfg.txt
grep -q "^layout    dp=1 tp=2 pp=2 1f1b" cfg.txt || { cat cfg.txt; fail "the config's layout was not used"; }
# parallel.dp auto on a cluster typed on the command line fills it.
"$BRAID" plan --config c.yaml --gpus-per-node 2 --device-profile profile.json > fill.txt
grep -q "^layout    dp=2 tp=1 pp=1" fill.txt || { cat fill.txt; fail "dp auto did not fill the cluster"; }

# Bad input.
refused() {  # refused PATTERN CMD...: non-zero exit and PATTERN on stderr
  local pat=$1; shift
  if "$@" > /dev/null 2> err.txt; then fail "accepted: $*"; fi
  grep -q -- "$pat" err.txt || fail "unclear error for $* (want '$pat'): $(cat err.txt)"
}
mkdir -p nometrics && cp runs/tp2/config.yaml runs/tp2/run.json nometrics/
refused "nometrics/metrics.jsonl" "$BRAID" plan --device-profile profile.json --compare nometrics
mkdir -p norecord && cp runs/tp2/config.yaml runs/tp2/metrics.jsonl norecord/
refused "norecord/run.json" "$BRAID" plan --device-profile profile.json --compare norecord
refused "parallel.tp is 1 in c.yaml but the run ran parallel.tp=2" \
  "$BRAID" plan --config c.yaml --device-profile profile.json --compare runs/tp2
refused "--tp 1 but the run ran tp=2" \
  "$BRAID" plan --tp 1 --device-profile profile.json --compare runs/tp2
refused "schedule 1f1b vs gpipe" "$BRAID" plan --config c.yaml --set parallel.pp=2 \
  --set parallel.schedule=gpipe --device-profile profile.json --compare runs/pp2
refused "model.n_layer 4 vs 2" "$BRAID" plan --config c.yaml --set parallel.tp=2 \
  --set model.n_layer=2 --device-profile profile.json --compare runs/tp2
refused "zb-h1 is not modelled" "$BRAID" plan --config c.yaml --set parallel.pp=2 \
  --set parallel.schedule=zb-h1 --device-profile profile.json
echo "ok: multi-rank comparisons complete, bad input refused"
