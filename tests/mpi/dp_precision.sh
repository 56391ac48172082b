#!/usr/bin/env bash
# Data parallelism with bf16/fp16 (`braid train` under mpirun, the tiny model of dp_common.bash):
# DP=2 bf16 against one rank on the same global batch, ZeRO-1 bf16 against plain DP bf16 (losses,
# master + optimizer memory per rank, checkpoints with whole f32 masters, resume across ZeRO),
# and fp16 ZeRO-1 with an overflow on one rank only, which must skip the step on both.
#   dp_precision.sh <mpirun> <braid> <workdir>
# Tolerances (relative, per step loss):
#  - DP=2 bf16 vs one rank bf16: 1e-4. The f32 gradients differ in summation order as in fp32
#    (dp_train.sh: ~1e-8), and a master that lands on the other side of a bf16 rounding
#    boundary moves that weight by one bf16 step (2^-8 relative), so the losses drift further
#    than fp32's 1e-6. Seen here: 4.5e-6 over 20 steps. A DP bug (a missing or doubled
#    reduction, the wrong batch share) moves them by 1e-2 or more.
#  - ZeRO-1 vs plain DP, both bf16: 1e-6, as for fp32. The reduce-scatter adds the same two
#    f32 values as the all-reduce and the shard update is the same elementwise AdamW kernel;
#    only the norm (for clipping) sums its squares in another order (double). Seen: 0.
source "$(dirname "$0")/dp_common.bash"
bf=(--set train.precision=bf16)

"$BRAID" train c.yaml --set run.name=one "${bf[@]}" > one.log
mpi 2 --set run.name=dp2 --set data.grad_accum=2 "${bf[@]}" > dp2.log
mpi 2 --set run.name=z2 --set data.grad_accum=2 "${bf[@]}" --set optim.zero=1 > z2.log
grep -q "precision bf16" z2.log || fail "the ZeRO-1 run did not log bf16"
grep -q "ZeRO-1: f32 masters and moments sharded over 2 DP ranks, bf16 weights all-gathered" z2.log \
  || fail "the ZeRO-1 run did not log its sharded masters"
same_losses one dp2 1e-4
same_losses dp2 z2 1e-6
[ "$(losses one | head -1)" = "$(losses dp2 | head -1)" ] || fail "bf16 step 1 is not exact"

# The checkpoint holds whole f32 masters (rank 0 writes the gathered shards): every parameter,
# f32 only, with the plain DP run's names.
names() { head -c 65536 "$1" | tr -d '\0' | grep -ao '"[a-z_.0-9]*":{"dtype"' | sort; }
dtypes() { head -c 65536 "$1" | tr -d '\0' | grep -ao '"dtype":"[A-Z0-9]*"' | sort -u; }
ck=checkpoints/step-00000020/model.safetensors
[ "$(dtypes runs/z2/$ck)" = '"dtype":"F32"' ] || fail "ZeRO-1 bf16 checkpoint: $(dtypes runs/z2/$ck)"
[ "$(names runs/z2/$ck)" = "$(names runs/dp2/$ck)" ] || fail "ZeRO-1 checkpoint names differ"

# Resume across layouts from the f32 masters: ZeRO-1 for 10 steps then plain DP, and plain DP
# for 10 steps then ZeRO-1; both continue the plain DP curve.
mpi 2 --set run.name=r1 --set data.grad_accum=2 "${bf[@]}" --set optim.zero=1 --set train.steps=10 > r1a.log
mpi 2 --set run.name=r1 --set data.grad_accum=2 "${bf[@]}" > r1b.log
grep -q "resumed from .*step-00000010" r1b.log || fail "r1 did not resume"
same_losses dp2 r1 1e-6
mpi 2 --set run.name=r2 --set data.grad_accum=2 "${bf[@]}" --set train.steps=10 > r2a.log
mpi 2 --set run.name=r2 --set data.grad_accum=2 "${bf[@]}" --set optim.zero=1 > r2b.log
grep -q "resumed from .*step-00000010" r2b.log || fail "r2 did not resume"
same_losses dp2 r2 1e-6

# Fine-tuning from a run (run.init_from) in bf16, plain and ZeRO-1: the f32 weights land in
# the masters (whole or sharded) and the compute copies, so both start from the trained model.
ft=(--set data.grad_accum=2 "${bf[@]}" --set run.init_from="$WORK/runs/one" --set train.steps=3)
mpi 2 --set run.name=ft "${ft[@]}" > ft.log
mpi 2 --set run.name=ftz "${ft[@]}" --set optim.zero=1 > ftz.log
grep -q "initialised from" ftz.log || fail "ZeRO-1 fine-tuning did not initialise from the run"
same_losses ft ftz 1e-6
awk -v a="$(losses ft | head -1 | cut -d' ' -f2)" -v b="$(losses one | tail -1 | cut -d' ' -f2)" \
  'BEGIN { exit !(a < b + 0.3) }' || fail "fine-tuning did not start from the trained weights"

# LoRA + bf16 + ZeRO-1: the frozen base stays outside the buckets and keeps no master; the
# adapters' masters are sharded; the run equals plain DP.
lo=(--set data.grad_accum=2 "${bf[@]}" --set lora.rank=4 --set "lora.targets=[c_attn,c_fc]")
mpi 2 --set run.name=lo "${lo[@]}" > lo.log
mpi 2 --set run.name=loz "${lo[@]}" --set optim.zero=1 > loz.log
grep -q "lora: rank 4" loz.log || fail "no LoRA in the ZeRO-1 run"
same_losses lo loz 1e-6

# Masters + moments per rank: about 1/2 with ZeRO-1 (live MiB after 2 steps of a wider model
# with the default buckets; the tiny buckets above would be dominated by the 4 KiB rounding).
wide=(--set model.n_embd=64 --set model.n_layer=4 --set train.steps=2 --set data.grad_accum=1
      --set parallel.bucket_mb=25 --set parallel.first_bucket_mb=1 "${bf[@]}")
mib() {  # mib RUN KEY: the last train record's live MiB of KEY
  grep '"event":"train"' "runs/$1/metrics.jsonl" | tail -1 | sed "s/.*\"memory_mib\":{[^}]*\"$2\":\([0-9.e+-]*\).*/\1/"
}
mpi 2 --set run.name=mem "${wide[@]}" > mem.log
mpi 2 --set run.name=memz "${wide[@]}" --set optim.zero=1 > memz.log
awk -v zo="$(mib memz optimizer)" -v zm="$(mib memz master_weights)" \
    -v po="$(mib mem optimizer)" -v pm="$(mib mem master_weights)" 'BEGIN {
  r = (zo + zm) / (po + pm)
  printf "bf16 dp 2: optimizer + master MiB per rank: zero1 %.3f + %.3f, plain %.3f + %.3f, ratio %.3f\n", zo, zm, po, pm, r
  exit !(zm > 0 && r > 0.45 && r < 0.575) }' || fail "ZeRO-1 bf16 masters + moments are not about 1/2"

# fp16 + ZeRO-1: an inf in rank 1's gradient shard alone (after the reduce-scatter only the
# owner sees it) makes the global norm inf on both ranks, so both skip step 8 and back off.
# The same overflow without ZeRO (the all-reduce spreads it to every rank) gives the same run.
fp=(--set data.grad_accum=2 --set train.precision=fp16 --set train.loss_scale_initial=1024
    --set train.loss_scale_hysteresis=1)
mpi 2 --set run.name=h2 "${fp[@]}" --test-fault overflow_at_step=8 > h2.log
mpi 2 --set run.name=hz2 "${fp[@]}" --set optim.zero=1 --test-fault overflow_at_step=8:1 > hz2.log
for r in 0 1; do
  grep -q "step 8: fp16 overflow.*step skipped, loss scale 1024 -> 512 (backed off)" \
    runs/hz2/logs/rank-$r.log || fail "rank $r did not skip step 8"
done
[ "$(grep -c "fp16 overflow" runs/hz2/logs/rank-0.log)" -eq 1 ] || fail "expected one skipped step"
same_losses h2 hz2 1e-6
echo PASS
