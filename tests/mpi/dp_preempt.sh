#!/usr/bin/env bash
# Preemption of a multi-rank job: SIGTERM reaching the ranks (as Slurm's time limit, scancel
# and srun deliver it: to every task of the step) makes every rank finish the same step, write
# one checkpoint and exit 0; a resume continues bit for bit like an uninterrupted run. Also when
# the signal reaches one rank only: the ranks agree every step, so all stop together.
#   dp_preempt.sh <mpirun> <braid> <workdir>
# (Open MPI's mpirun turns a SIGTERM sent to mpirun itself into a job kill one second later,
# `odls_base_sigkill_timeout`; docs/multinode.md says to signal the ranks.)
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/dp_common.bash"
exe=$(basename "$BRAID")

# run_until_signal NAME WHO: start a long DP=2 run, wait for 15 logged steps, SIGTERM the ranks
# (WHO=all) or rank processes' first child only (WHO=one), wait for mpirun; prints its exit code.
run_until_signal() {
  local name=$1 who=$2
  "$MPIRUN" --oversubscribe -np 2 "$BRAID" train c.yaml --set run.name=$name \
      --set data.grad_accum=2 --set train.steps=100000 --set checkpoint.interval=0 \
      --set optim.decay=constant > $name.log 2>&1 &
  local mpi_pid=$!
  for _ in $(seq 1 300); do
    [ -f runs/$name/metrics.jsonl ] && [ "$(grep -c '"step_loss"' runs/$name/metrics.jsonl)" -ge 15 ] && break
    sleep 0.1
  done
  local ranks; ranks=$(pgrep -P $mpi_pid -x "$exe" || true)
  [ "$(echo $ranks | wc -w)" = 2 ] || { kill -KILL $mpi_pid; fail "expected 2 rank processes of mpirun $mpi_pid, got '$ranks'"; }
  # Every rank takes the signals on its braid-signals thread, never on a compute thread.
  for r in $ranks; do
    bash "$HERE/../e2e/check_signal_routing.bash" "$r" >&2 || { kill -KILL $mpi_pid; fail "rank process $r: signals not routed"; }
  done
  if [ "$who" = all ]; then kill -TERM $ranks; else kill -TERM $(echo $ranks | cut -d' ' -f2); fi
  local rc=0
  timeout 60 tail --pid=$mpi_pid -f /dev/null || { kill -KILL $mpi_pid; fail "$name: the job did not end within 60 s of SIGTERM"; }
  wait $mpi_pid || rc=$?
  echo $rc
}

for who in all one; do
  rc=$(run_until_signal sig_$who $who)
  [ "$rc" = 0 ] || fail "sig_$who: mpirun exited $rc after SIGTERM (expected 0)"
  ck=$(ls runs/sig_$who/checkpoints | grep step- | tail -1)
  [ -n "$ck" ] || fail "sig_$who: no checkpoint after SIGTERM"
  stopped=$((10#${ck#step-}))
  for r in 0 1; do
    grep -q "stopped by SIGTERM after step $stopped/" runs/sig_$who/logs/rank-$r.log \
      || fail "sig_$who: rank $r did not stop at step $stopped"
  done
  echo "sig_$who: both ranks stopped after step $stopped, exit 0"
  # Resume 5 more steps; an uninterrupted run to the same step gives the same losses.
  mpi 2 --set run.name=sig_$who --set data.grad_accum=2 --set train.steps=$((stopped + 5)) \
      --set checkpoint.interval=0 --set optim.decay=constant > sig_${who}_resume.log
  grep -q "resumed from .*$ck" sig_${who}_resume.log || fail "sig_$who did not resume"
  mpi 2 --set run.name=straight_$who --set data.grad_accum=2 --set train.steps=$((stopped + 5)) \
      --set checkpoint.interval=0 --set optim.decay=constant > straight_$who.log
  diff <(losses sig_$who) <(losses straight_$who) > /dev/null \
    || fail "sig_$who: the resumed curve differs from an uninterrupted run"
  echo "sig_$who: resumed curve bit-identical to an uninterrupted run ($((stopped + 5)) steps)"
done
echo PASS
