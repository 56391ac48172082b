#!/usr/bin/env bash
# `braid train` data-parallel under mpirun against one rank on the same global batch:
# DP=2 and DP=4 over 20 steps, accumulation split across ranks, ZeRO-1 vs plain DP (and its
# optimizer memory), resume into another DP size, rank-0-only records and per-rank logs.
#   dp_train.sh <mpirun> <braid> <workdir>
# Tolerance: step losses agree to 1e-6 relative, not bit for bit: the single rank's weight
# gradient GEMMs sum over all rows of a micro-batch and over the micro-batches in one order,
# the DP run sums per-rank partials and then adds them across ranks (a different f32 summation
# order; seen: ~1e-8). The first step's loss is exact (same weights, same sequences).
source "$(dirname "$0")/dp_common.bash"

"$BRAID" train c.yaml > one.log
mpi 2 --set run.name=dp2 --set data.grad_accum=2 > dp2.log
mpi 4 --set run.name=dp4 --set data.grad_accum=1 > dp4.log
same_losses one dp2 1e-6
same_losses one dp4 1e-6
[ "$(losses one | head -1)" = "$(losses dp2 | head -1)" ] || fail "step 1 is not exact"
grep -q "parallel: dp=2 tp=1 pp=1 over 2 ranks" dp2.log || fail "no data-parallel line"

# Accumulation: 2 ranks x 1 micro-batch equal 1 rank x 2 micro-batches.
"$BRAID" train c.yaml --set run.name=one_a2 --set data.grad_accum=2 > one_a2.log
mpi 2 --set run.name=dp2_a1 --set data.grad_accum=1 > dp2_a1.log
same_losses one_a2 dp2_a1 1e-6

# ZeRO-1 equals plain DP.
mpi 2 --set run.name=z2 --set data.grad_accum=2 --set optim.zero=1 > z2.log
same_losses dp2 z2 1e-6
# Its optimizer state per rank is about 1/dp: live MiB after 2 steps of a wider model with the
# default buckets (the tiny buckets above would be dominated by the allocator's 4 KiB rounding).
wide=(--set model.n_embd=64 --set model.n_layer=4 --set train.steps=2 --set data.grad_accum=1
      --set parallel.bucket_mb=25 --set parallel.first_bucket_mb=1)
opt_mib() { grep '"event":"train"' "runs/$1/metrics.jsonl" | tail -1 | sed 's/.*"optimizer":\([0-9.e+-]*\).*/\1/'; }
for np in 2 4; do
  mpi $np --set run.name=mem$np "${wide[@]}" > mem$np.log
  mpi $np --set run.name=memz$np "${wide[@]}" --set optim.zero=1 > memz$np.log
  awk -v z="$(opt_mib memz$np)" -v d="$(opt_mib mem$np)" -v n=$np 'BEGIN { r = z / d
    printf "dp %d: optimizer MiB per rank: zero1 %s, plain %s, ratio %.3f (1/dp = %.3f)\n", n, z, d, r, 1 / n
    exit !(r > 0.9 / n && r < 1.15 / n) }' || fail "ZeRO-1 optimizer memory is not about 1/$np"
  grep -q "peak memory by category: .*optimizer" memz$np.log || fail "no memory line"
done

# Resume into a different layout: DP=2 with ZeRO-1 for 10 steps, then DP=4 without it, and
# one rank for 10 steps, then DP=2 with ZeRO-1: both continue the one-rank curve.
mpi 2 --set run.name=r1 --set data.grad_accum=2 --set optim.zero=1 --set train.steps=10 > r1a.log
mpi 4 --set run.name=r1 --set data.grad_accum=1 > r1b.log
grep -q "resumed from .*step-00000010" r1b.log || fail "r1 did not resume"
same_losses one r1 1e-6
"$BRAID" train c.yaml --set run.name=r2 --set train.steps=10 > r2a.log
mpi 2 --set run.name=r2 --set data.grad_accum=2 --set optim.zero=1 > r2b.log
grep -q "resumed from" r2b.log || fail "r2 did not resume"
same_losses one r2 1e-6
grep -q '"zero": 1' runs/r2/checkpoints/step-00000020/manifest.json || fail "manifest layout"
grep -q '"dp": 2' runs/r2/checkpoints/step-00000020/manifest.json || fail "manifest layout dp"
# ZeRO-1: each rank wrote its own part of the moments.
for r in 0 1; do
  [ -f runs/r2/checkpoints/step-00000020/optimizer-dp$r.safetensors ] || fail "no optimizer-dp$r file"
done

# Rank 0 alone records; every rank logs.
[ "$(grep -c '"event":"train"' runs/dp4/metrics.jsonl)" -eq 20 ] || fail "metrics.jsonl written by more than rank 0"
for r in 0 1 2 3; do
  grep -q "step     20/20" "runs/dp4/logs/rank-$r.log" || fail "no rank-$r log"
done
[ ! -e runs/one/logs ] || fail "a one-process run wrote rank logs"
grep -q '"dp": 4' runs/dp4/run.json || fail "run.json layout"
# run.json names every rank's host and device, in rank order.
python3 - <<'PY' || fail "run.json devices"
import json, socket
a = json.load(open("runs/dp4/run.json"))["attempts"][-1]["devices"]
assert [d["rank"] for d in a] == [0, 1, 2, 3], a
assert all(d["host"] == socket.gethostname() and d["device"].startswith("cpu") for d in a), a
PY
[ "$(grep -c 'step     20/20 | loss' dp4.log)" -eq 1 ] || fail "more than one rank printed progress"

# Bad layouts: a clear error, non-zero.
expect_fail() {
  local want=$1; shift
  set +e; out=$("$@" 2>&1); rc=$?; set -e
  [ $rc -ne 0 ] || fail "expected failure of: $*"
  echo "$out" | grep -qF -- "$want" || fail "expected '$want' from: $*; got: $out"
  echo "ok (exit $rc): $want"
}
expect_fail "start it with mpirun -np N" "$BRAID" train c.yaml --set run.name=bad1 --set parallel.dp=2
expect_fail "model.n_head is 1, which parallel.tp = 2 does not divide" mpi 2 --set run.name=bad2 --set parallel.tp=2 --set model.n_head=1
expect_fail "= 3 but the job has 2 ranks" mpi 2 --set run.name=bad3 --set parallel.dp=3
expect_fail "train.device: cuda with parallel.backend: mpi" mpi 2 --set run.name=bad4 \
  --set train.device=cuda --set parallel.backend=mpi
echo PASS
