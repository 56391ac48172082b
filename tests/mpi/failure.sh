#!/usr/bin/env bash
# Runs braid_mpi_failure under mpirun and checks that the job ends non-zero within
# timeout + 5 s, with a message naming the failing rank (1) and the operation the others
# were waiting in.
#   failure.sh <mpirun> <braid_mpi_failure> <throw|kill|absent|no_mesh> <ranks> <timeout_s>
# FAILURE_START_S: seconds the launcher itself needs to start and end a job that does nothing
# (measured by the caller, e.g. remote daemons across nodes), added to the limit; default 0.
set -u
mpirun=$1 driver=$2 mode=$3 np=$4 timeout_s=$5
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s.%N)
# The outer timeout only guards the test itself; braid must end the job well before it.
timeout $((timeout_s + 30)) "$mpirun" --oversubscribe -np "$np" "$driver" "$mode" "$timeout_s" >"$log" 2>&1
rc=$?
elapsed=$(echo "$(date +%s.%N) - $start" | bc)
cat "$log"
start_s=${FAILURE_START_S:-0}
echo "failure.sh: mode $mode, exit code $rc, elapsed ${elapsed} s (limit $timeout_s + 5 s + start-up $start_s s)"
fail() { echo "FAIL: $*"; exit 1; }
[ "$rc" -ne 0 ] || fail "the job exited 0"
[ "$rc" -ne 124 ] || fail "the job hung until the outer timeout"
awk -v e="$elapsed" -v t="$timeout_s" -v s="$start_s" 'BEGIN { exit !(e <= t + 5 + s) }' || fail "took ${elapsed} s"
expect() { grep -qE -- "$1" "$log" || fail "no line matching '$1'"; }
[ "$mode" = no_mesh ] || expect "all_reduce\(sum, f32\[65536\]\) on group 'world'"
case "$mode" in
  throw) expect "braid: rank 1: error: injected failure on rank 1" ;;
  kill) expect "process rank 1 .*signal 9" ;;
  absent)
    expect "did not finish within timeout_s = $timeout_s s; waiting on world ranks .*1"
    # The timeout, not something else, ended the job.
    awk -v e="$elapsed" -v t="$timeout_s" 'BEGIN { exit !(e >= t) }' || fail "ended after ${elapsed} s, before the timeout"
    ;;
  no_mesh)
    expect "rank [02]: start-up: creating the 'tp' communicator .* did not finish within init_timeout_s = $timeout_s s"
    ;;
  *) fail "unknown mode $mode" ;;
esac
echo "PASS"
