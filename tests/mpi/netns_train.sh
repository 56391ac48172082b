#!/usr/bin/env bash
# Data-parallel training across two "nodes" (network namespaces joined by a veth pair, 2 ranks
# each; tests/mpi/netns_lib.bash): `braid train` with dp=4 must give the losses of one rank
# with 4x the gradient accumulation (the same sequences per step). Exit 77 (skip) where
# namespaces cannot be made.
# With a source directory as the 4th argument, the ranks run the binary of a tools/package.sh
# tarball unpacked into a fresh folder (a deployment as docs/multinode.md describes it) instead.
#   netns_train.sh <mpirun> <braid> <workdir> [<source dir>]
set -u
NETNS_MPIRUN=$1 braid=$2 work=$3 src=${4:-}
source "$(dirname "$0")/netns_lib.bash"
fail() { echo "FAIL: $*" >&2; exit 1; }

netns_require
rm -rf "$work"
mkdir -p "$work/corpus" || fail "cannot create $work"
cd "$work"
if [ -n "$src" ]; then
  bash "$src/tools/package.sh" "$(dirname "$braid")" "$work/braid.tar.gz" >package.log 2>&1 ||
    { cat package.log; fail "tools/package.sh failed"; }
  mkdir fresh && tar -C fresh -xzf braid.tar.gz || fail "cannot unpack the tarball"
  braid=$(echo "$work"/fresh/braid-*/bin/braid)
  [ -x "$braid" ] || fail "no bin/braid in the tarball"
  echo "running the packaged binary $braid"
fi
head -c 40000 /usr/share/common-licenses/GPL-3 >corpus/a.txt
"$braid" prepare --input corpus --out data --tokenizer byte >/dev/null || fail "prepare failed"
cat >cfg.yaml <<YAML
run: {name: unset, dir: $work/runs}
model: {family: gpt2, vocab_size: 256, context_length: 32, n_layer: 2, n_embd: 32, n_head: 2}
data: {dir: $work/data, micro_batch: 2, seq_len: 32, grad_accum: 1, seed: 5}
optim: {lr: 0.003, warmup_steps: 2, decay_steps: 8}
train: {steps: 8, log_interval: 1, eval_interval: 0, sample_tokens: 0, peak_tflops: 1.0}
checkpoint: {interval: 4, keep_last: 1}
YAML

# The reference: one rank, 4 micro-batches per step.
"$braid" train cfg.yaml --set run.name=single --set data.grad_accum=4 >single.log 2>&1 ||
  { cat single.log; fail "the single-rank run failed"; }

netns_up "$work"
before=$(netns_veth_bytes)
netns_mpirun -np 4 "$work/rank_probe.sh" "$braid" train cfg.yaml --set run.name=dp4 \
  --set parallel.dp=4 >dp4.log 2>&1
rc=$?
after=$(netns_veth_bytes)
cat dp4.log
echo "netns_train: exit code $rc; node B received $((after - before)) bytes over the veth"
[ "$rc" -eq 0 ] || fail "the dp=4 run across the two namespaces exited $rc"
netns_check_spread 2 || fail "ranks were not placed 2 per node (see $work/placement)"
[ $((after - before)) -gt 100000 ] || fail "only $((after - before)) bytes crossed the veth"

# step -> step_loss of every train record.
losses() { grep '"event":"train"' "$1" | sed -E 's/.*"step":([0-9]+).*/\1 &/; s/ .*"step_loss":([-0-9.eE+]+).*/ \1/'; }
losses runs/single/metrics.jsonl >single.losses
losses runs/dp4/metrics.jsonl >dp4.losses
[ "$(wc -l <single.losses)" -eq 8 ] || fail "the single-rank run logged $(wc -l <single.losses) steps, not 8"
paste single.losses dp4.losses | tee compare.txt
# The gradients are the same sums taken in another order (each rank sums its own micro-batch,
# the all-reduce sums the ranks), so losses agree to float rounding, not bit for bit: f32
# rounding is ~6e-8 relative per operation, and 8 steps of a 2-layer model stay far below
# 1e-6 (2.6e-9 measured), while a different batch moves the loss by 1e-3 or more.
awk 'NF != 4 || $1 != $3 { bad = 1; print "step mismatch: " $0 }
     { d = $2 - $4; if (d < 0) d = -d; r = d / ($2 < 0 ? -$2 : $2); if (r > worst) worst = r;
       if (r > 1e-6) { bad = 1; print "step " $1 ": " $2 " vs " $4 } }
     END { printf "largest relative loss difference %.3g (limit 1e-6)\n", worst; exit bad }' \
  compare.txt || fail "dp=4 across two nodes does not match the single-rank losses"
echo PASS
