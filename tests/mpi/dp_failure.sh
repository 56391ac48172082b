#!/usr/bin/env bash
# A data-parallel `braid train` whose rank 1 fails at step 3 (throws, is SIGKILLed, or never
# joins the gradient all-reduce), or is SIGKILLed when the step-20 ZeRO-1 checkpoint starts: the
# job exits non-zero within parallel.timeout_s + 5 s naming the rank and the operation, and the
# earlier checkpoint survives.
#   dp_failure.sh <mpirun> <braid> <workdir> <throw|kill|hang|kill_at_save>
source "$(dirname "$0")/dp_common.bash"
mode=$4
timeout_s=6
step=3
extra=()
if [ "$mode" = kill_at_save ]; then step=20; extra=(--set optim.zero=1); fi
start=$(date +%s.%N)
set +e
timeout $((timeout_s + 40)) \
  "$MPIRUN" --oversubscribe -np 3 "$BRAID" train c.yaml --set data.grad_accum=1 \
  --set parallel.timeout_s=$timeout_s "${extra[@]}" --test-fault "fail_at_step=1:$step:$mode" \
  > job.log 2>&1
rc=$?
set -e
elapsed=$(echo "$(date +%s.%N) - $start" | bc)
grep -v "^.\[K" job.log | grep -v "^step " | tail -20
echo "dp_failure.sh: mode $mode, exit code $rc, elapsed $elapsed s (limit $timeout_s + 5 s)"
[ "$rc" -ne 0 ] || fail "the job exited 0"
[ "$rc" -ne 124 ] || fail "the job hung until the outer timeout"
awk -v e="$elapsed" -v t="$timeout_s" 'BEGIN { exit !(e <= t + 5) }' || fail "took $elapsed s"
expect() { grep -qE -- "$1" job.log || fail "no line matching '$1'"; }
case "$mode" in
  throw) expect "braid train: rank 1: error: injected failure \(--test-fault fail_at_step\) at step 3" ;;
  kill | kill_at_save) expect "process rank 1 .*signal 9" ;;
  hang)
    expect "all_reduce\(sum, f32\[[0-9]+\]\) on group 'dp' .* did not finish within timeout_s = $timeout_s s; waiting on world ranks 1"
    awk -v e="$elapsed" -v t="$timeout_s" 'BEGIN { exit !(e >= t) }' || fail "ended before the timeout"
    ;;
  *) fail "unknown mode $mode" ;;
esac
if [ "$mode" = kill_at_save ]; then
  # Rank 0 never wrote step 20 (it waited for rank 1's moments); step 10 is intact and resumes.
  [ "$(cat runs/one/checkpoints/latest)" = step-00000010 ] || fail "latest moved"
  [ ! -e runs/one/checkpoints/step-00000020 ] || fail "a step-20 checkpoint appeared"
  "$MPIRUN" --oversubscribe -np 3 "$BRAID" train c.yaml --set data.grad_accum=1 --set optim.zero=1 > resume.log 2>&1 \
    || fail "resume after the failed save: $(tail -5 resume.log)"
  grep -q "resumed from .*step-00000010" resume.log || fail "did not resume from step 10"
fi
echo PASS
