#!/usr/bin/env bash
# tests/mpi/failure.sh across two "nodes" (network namespaces, tests/mpi/netns_lib.bash) with
# node B listed first, so the failing rank 1 runs on the node mpirun is not on: the job must
# still end non-zero within timeout + 5 s, naming the rank and the operation. Exit 77 (skip)
# where namespaces cannot be made.
#   netns_failure.sh <mpirun> <braid_mpi_failure> <throw|kill|absent> <timeout_s> <workdir>
set -u
NETNS_MPIRUN=$1 driver=$2 mode=$3 timeout_s=$4 work=$5
here=$(dirname "$0")
source "$here/netns_lib.bash"
netns_require
rm -rf "$work"
mkdir -p "$work" || { echo "FAIL: cannot create $work" >&2; exit 1; }
NETNS_B_FIRST=1 netns_up "$work"
# failure.sh adds --oversubscribe -np 4; the wrapper adds the hostfile and the transport.
printf '#!/bin/bash\nexec "%s" "%s" "$@"\n' "$work/rank_probe.sh" "$driver" >"$work/driver"
chmod +x "$work/driver"
# What launching across the two nodes costs by itself (remote daemon, wire-up, teardown) is
# not failure latency: time an empty job and allow for it.
t0=$(date +%s.%N)
timeout 60 "$work/mpirun" --oversubscribe -np 4 true || { echo "FAIL: an empty 4-rank job failed" >&2; exit 1; }
export FAILURE_START_S=$(echo "$(date +%s.%N) - $t0" | bc)
echo "netns_failure: an empty 4-rank job across the two nodes took $FAILURE_START_S s"
bash "$here/failure.sh" "$work/mpirun" "$work/driver" "$mode" 4 "$timeout_s" || exit 1
# Rank 1 (the one that fails) ran on node B, away from mpirun.
grep -qx "$NETNS_B" "$work/placement/rank1" || { echo "FAIL: rank 1 did not run on node B" >&2; exit 1; }
echo "netns_failure: rank 1 ran on node B ($NETNS_B)"
