#!/usr/bin/env bash
# Runs an MPI program on 4 ranks across two "nodes" (network namespaces joined by a veth pair,
# 2 ranks each; tests/mpi/netns_lib.bash) and checks that it passed, that each node ran 2 ranks
# and that the ranks talked over the veth. Exit 77 (skip) where namespaces cannot be made.
#   netns_two_nodes.sh <mpirun> <workdir> <program> [args...]
set -u
NETNS_MPIRUN=$1 work=$2
shift 2
source "$(dirname "$0")/netns_lib.bash"
fail() { echo "FAIL: $*" >&2; exit 1; }

netns_require
rm -rf "$work"
mkdir -p "$work" || fail "cannot create $work"
netns_up "$work"
before=$(netns_veth_bytes)
netns_mpirun -np 4 "$work/rank_probe.sh" "$@"
rc=$?
after=$(netns_veth_bytes)
echo "netns_two_nodes: exit code $rc; node B received $((after - before)) bytes over the veth"
[ "$rc" -eq 0 ] || fail "the 4-rank job across the two namespaces exited $rc"
grep -q "$NETNS_B" "$work/agent.log" || fail "mpirun never used the rsh agent for node B"
netns_check_spread 2 || fail "ranks were not placed 2 per node (see $work/placement)"
# Start-up alone exchanges a few kB; a collective test moves far more.
[ $((after - before)) -gt 100000 ] || fail "only $((after - before)) bytes crossed the veth"
echo PASS
