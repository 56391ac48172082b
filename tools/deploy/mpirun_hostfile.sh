#!/usr/bin/env bash
# One braid training job over the nodes of an Open MPI hostfile (docs/multinode.md).
#   HOSTFILE=tools/deploy/hostfile THREADS=16 NET=10.0.0.0/24 \
#     tools/deploy/mpirun_hostfile.sh configs/my.yaml [--set key=value ...]
# Run it on the first node; every node needs braid at the same path, passwordless ssh, and the
# run directory (RUN_DIR) on storage they all mount. Running the same command again resumes.
# DRY_RUN=1 prints the mpirun command instead of running it.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 CONFIG.yaml [--set key=value ...]" >&2; exit 2; }
config=$1
shift
BRAID=${BRAID:-$(command -v braid || echo "$PWD/build/braid")}
MPIRUN=${MPIRUN:-mpirun}
HOSTFILE=${HOSTFILE:-hostfile}
# Ranks: every slot of the hostfile unless NP says otherwise.
NP=${NP:-$(awk '!/^[[:space:]]*(#|$)/ { n += 1; for (i = 2; i <= NF; i++) if ($i ~ /^slots=/) { sub(/slots=/, "", $i); n += $i - 1 } } END { print n }' "$HOSTFILE")}
THREADS=${THREADS:-1}            # OpenMP threads per rank (cores reserved for each rank)
RUN_DIR=${RUN_DIR:-/shared/braid/runs}  # shared by all nodes: checkpoints, logs, metrics
NET=${NET:-}                     # interface (eth0) or subnet (10.0.0.0/24) for MPI traffic

cmd=("$MPIRUN" --hostfile "$HOSTFILE" -np "$NP"
     # Fill each node's slots in turn (ranks 0..slots-1 on the first node), so the fastest
     # mesh dimension (tp) stays inside a node; each rank gets THREADS cores of its own.
     --map-by "slot:PE=$THREADS" --bind-to core
     -x "OMP_NUM_THREADS=$THREADS" -x OMP_WAIT_POLICY=passive -x OMP_PROC_BIND=close)
if [ -n "$NET" ]; then
  # Both the data path (btl) and Open MPI's own control channel (oob) on that network only.
  cmd+=(--mca btl tcp,self,vader --mca btl_tcp_if_include "$NET" --mca oob_tcp_if_include "$NET")
fi
[ "$(id -u)" -ne 0 ] || cmd+=(--allow-run-as-root)
cmd+=("$BRAID" train "$config" --set "run.dir=$RUN_DIR" --set checkpoint.resume=auto "$@")

if [ "${DRY_RUN:-0}" = 1 ]; then
  printf '%q ' "${cmd[@]}"
  echo
  exit 0
fi
exec "${cmd[@]}"
