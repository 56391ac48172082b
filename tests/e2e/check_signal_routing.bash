#!/usr/bin/env bash
# bash check_signal_routing.bash PID (a helper of the preemption tests, not a test itself):
# braid process PID routes SIGTERM, SIGINT and SIGUSR1 to its one "braid-signals" thread: that
# thread does not block them, and every thread created after it (OpenMP's, MPI's, the data
# loader's) and the main thread do. Threads that libraries start
# before main() (OpenBLAS's pool) have lower thread IDs than the signal thread and are only
# listed. Exit 1 naming the offending thread.
set -euo pipefail
pid=$1
mask=$(( (1 << (15 - 1)) | (1 << (2 - 1)) | (1 << (10 - 1)) ))  # SIGTERM, SIGINT, SIGUSR1
sig_tid=
for t in /proc/"$pid"/task/*; do
  [ "$(cat "$t/comm" 2>/dev/null)" = braid-signals ] && { [ -z "$sig_tid" ] || { echo "FAIL: two braid-signals threads" >&2; exit 1; }; sig_tid=${t##*/}; }
done
[ -n "$sig_tid" ] || { echo "FAIL: process $pid has no braid-signals thread" >&2; exit 1; }
checked=0
for t in /proc/"$pid"/task/*; do
  tid=${t##*/}
  blk=$(awk '/^SigBlk/ {print $2}' "$t/status" 2>/dev/null) || continue  # the thread ended
  [ -n "$blk" ] || continue
  blocks=$(( (0x$blk & mask) == mask ))
  if [ "$tid" = "$sig_tid" ]; then
    [ $(( 0x$blk & mask )) -eq 0 ] || { echo "FAIL: braid-signals blocks them (SigBlk $blk)" >&2; exit 1; }
  elif [ "$tid" = "$pid" ] || [ "$tid" -gt "$sig_tid" ]; then
    [ "$blocks" = 1 ] || { echo "FAIL: thread $tid ($(cat "$t/comm")) of $pid does not block SIGTERM/SIGINT/SIGUSR1 (SigBlk $blk)" >&2; exit 1; }
    checked=$((checked + 1))
  else
    echo "note: thread $tid ($(cat "$t/comm")) started before main(); SigBlk $blk"
  fi
done
echo "ok: process $pid: $checked threads block SIGTERM/SIGINT/SIGUSR1; thread $sig_tid (braid-signals) takes them"
