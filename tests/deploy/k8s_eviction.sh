#!/usr/bin/env bash
# Eviction of a Kubeflow MPIJob's pods, simulated on this machine: every pod of
# tools/deploy/mpijob.yaml is a process tree whose entrypoint is `braid supervise`.
#   worker pod = PID, mount and UTS namespaces (unshare --pid --fork --mount-proc --uts; host
#                name pod-a or pod-b) whose PID 1 is
#                `braid supervise --stop-ranks braid -- sleep infinity` (sleep stands in for sshd)
#   launcher   = `braid supervise --run RUN -- mpirun --hostfile (pod-a, pod-b) ...` with an rsh
#                agent that enters the named pod's namespaces (nsenter) to start
#                orted there, as ssh into the pod would; so each rank runs inside its pod
# The network stays shared (all on this machine); the pods differ in what Kubernetes signals:
# eviction is SIGTERM to the pod's PID 1. Cases:
#   worker:   SIGTERM to pod-b's PID 1 -> its supervisor stops the braid rank there
#   launcher: SIGTERM to the launcher's supervisor -> SIGUSR1 to mpirun, relayed to every rank
#   all:      both at once, to every pod (a whole job preempted): each rank gets a SIGTERM from
#             its pod and the relayed SIGUSR1, which must not count as a second signal
# Each time: every rank stops after the same step, one checkpoint, mpirun exits 0, the launcher
# exits 75 (stopped: retry), and a resume continues bit for bit like an uninterrupted run.
#   k8s_eviction.sh <mpirun> <braid> <workdir>       exit 77 (skip) without root or unshare
source "$(dirname "$0")/../mpi/dp_common.bash"
exe=$(basename "$BRAID")
skip() { echo "SKIP: $*" >&2; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "PID namespaces (unshare --pid) need root; running as uid $(id -u)"
command -v nsenter >/dev/null || skip "nsenter (util-linux) is not installed"
err=$(unshare --pid --fork --mount-proc --uts true 2>&1) || skip "unshare --pid --uts refused: $err"
MPI_BIN=$(dirname "$(command -v "$MPIRUN")")

# start_pod NAME: a worker pod; its files are pod_NAME.{log,pid} ("unshare-pid init-pid").
start_pod() {
  local name=$1 up init=
  unshare --pid --fork --mount-proc --uts "$BRAID" supervise --stop-ranks "$exe" --drain-s 20 \
    -- sleep infinity >"pod_$name.log" 2>&1 &
  up=$!
  for _ in $(seq 1 100); do
    init=$(pgrep -P "$up" || true)
    [ -n "$init" ] && grep -qs "started 'sleep'" "pod_$name.log" && break
    sleep 0.05
  done
  grep -qs "started 'sleep'" "pod_$name.log" || fail "pod $name did not start: $(cat "pod_$name.log")"
  # Its own host name, as a pod has: Open MPI keys each daemon's session directory (and the
  # topology file in it) by host name, which two daemons on one name would share.
  nsenter -t "$init" -u hostname "pod-$name"
  echo "$up $init" >"pod_$name.pid"
}
pod_field() { cut -d' ' -f"$2" "pod_$1.pid"; }
stop_pod() {  # the end of a pod that was not evicted (as the operator deletes it)
  local up; up=$(pod_field "$1" 1)
  kill -TERM "$(pod_field "$1" 2)" 2>/dev/null || true
  timeout 30 tail --pid="$up" -f /dev/null || kill -KILL "$up"
}
# However the script ends, no pod outlives it (killing a pod's PID 1 ends everything in it).
cleanup() {
  set +e
  # The launcher's mpirun gets SIGTERM when its supervisor dies (PR_SET_PDEATHSIG).
  [ -n "${LAUNCHER:-}" ] && kill -KILL "$LAUNCHER" 2>/dev/null
  for p in a b; do [ -f "pod_$p.pid" ] && kill -KILL "$(pod_field $p 2)" 2>/dev/null; done
  return 0
}
trap cleanup EXIT

# mpirun's remote launcher: `agent HOST CMD...` runs CMD in HOST's pod with a clean
# environment (a fresh ssh login), so the ranks see only what mpirun forwards with -x.
cat >agent.sh <<EOF
#!/bin/bash
host=\$1
shift
case "\$host" in pod-a | pod-b) ;; *) echo "agent: unknown host '\$host'" >&2; exit 1 ;; esac
init=\$(cut -d' ' -f2 "$WORK/pod_\${host#pod-}.pid")
echo "\$host \$init" >>"$WORK/agent.log"
exec nsenter -t "\$init" -p -m -u -- env -i PATH="$MPI_BIN:/usr/bin:/bin" HOME="\${HOME:-/root}" \
  /bin/sh -c "\$*"
EOF
chmod +x agent.sh
printf 'pod-a slots=1\npod-b slots=1\n' >hostfile
common=(--set data.grad_accum=2 --set checkpoint.interval=0 --set optim.decay=constant)
# The pods' ranks see only what mpirun forwards: the sanitizer stage's options too (its
# ranks run without the leak check, as every multi-rank test's; tests/CMakeLists.txt), and a
# forced CPU level (BRAID_CPU_ISA, ONEDNN_MAX_CPU_ISA), which the uninterrupted run beside the
# pods inherits: without it the two runs would take different kernels.
fwd=()
for v in ASAN_OPTIONS UBSAN_OPTIONS BRAID_CPU_ISA ONEDNN_MAX_CPU_ISA; do
  [ -n "${!v:-}" ] && fwd+=(-x "$v")
done

# launch NAME STEPS: the launcher pod's command in the background; LAUNCHER=its pid.
launch() {
  "$BRAID" supervise --run "runs/$1" -- "$MPIRUN" --allow-run-as-root --hostfile hostfile \
    --mca plm_rsh_agent "$WORK/agent.sh" --mca btl tcp,self -x OMP_NUM_THREADS \
    -x OMP_WAIT_POLICY "${fwd[@]}" -np 2 "$BRAID" train c.yaml --set run.name="$1" \
    --set train.steps="$2" "${common[@]}" >"$1.log" 2>&1 &
  LAUNCHER=$!
}
# wait_launcher NAME: RC = its exit code, once it has ended (fails after 90 s).
wait_launcher() {
  timeout 90 tail --pid="$LAUNCHER" -f /dev/null ||
    { cat "$1.log" >&2; kill -KILL "$LAUNCHER"; fail "$1: the launcher did not end"; }
  RC=0
  wait "$LAUNCHER" || RC=$?
}
steps_logged() { cat "runs/$1/metrics.jsonl" 2>/dev/null | grep -c '"step_loss"' || true; }
# ranks_in_pods: each pod runs exactly one `braid train` rank (checked by PID namespace).
ranks_in_pods() {
  local p ns want_a want_b in_a=0 in_b=0
  want_a=$(readlink "/proc/$(pod_field a 2)/ns/pid")
  want_b=$(readlink "/proc/$(pod_field b 2)/ns/pid")
  for p in $(pgrep -x "$exe"); do
    tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q " train " || continue
    ns=$(readlink "/proc/$p/ns/pid" 2>/dev/null) || continue
    [ "$ns" = "$want_a" ] && in_a=$((in_a + 1))
    [ "$ns" = "$want_b" ] && in_b=$((in_b + 1))
  done
  [ "$in_a" = 1 ] && [ "$in_b" = 1 ] || fail "ranks per pod: pod-a $in_a, pod-b $in_b (expected 1 and 1)"
}

for case in worker launcher all; do
  name=evict_$case
  start_pod a
  start_pod b
  launch "$name" 100000
  for _ in $(seq 1 600); do
    [ "$(steps_logged "$name")" -ge 15 ] && break
    sleep 0.1
  done
  [ "$(steps_logged "$name")" -ge 15 ] ||
    { cat "$name.log"; fail "$name: training did not start in the pods"; }
  ranks_in_pods
  case $case in
    worker) kill -TERM "$(pod_field b 2)" ;;  # the eviction of pod-b: SIGTERM to its PID 1
    launcher) kill -TERM "$LAUNCHER" ;;       # the eviction of the launcher pod
    all) kill -TERM "$LAUNCHER" "$(pod_field a 2)" "$(pod_field b 2)" ;;
  esac
  wait_launcher "$name"
  grep -v $'\e' "$name.log" || true  # without the progress lines
  [ "$RC" = 75 ] || fail "$name: the launcher exited $RC (expected 75: stopped, retry)"
  grep -qF "'$MPIRUN' exited with code 0" "$name.log" || fail "$name: mpirun did not exit 0"
  ck=$(ls "runs/$name/checkpoints" | grep step- | tail -1)
  [ "$(ls "runs/$name/checkpoints" | grep -c step-)" = 1 ] || fail "$name: not exactly one checkpoint"
  stopped=$((10#${ck#step-}))
  # The ranks agree on the highest signal number any of them had received when they agreed:
  # SIGTERM for a worker's eviction, SIGUSR1 for the launcher's. When every pod is evicted at
  # once, the pods' SIGTERMs and mpirun's relayed SIGUSR1 race, so either may be the one the
  # ranks stopped on; what must hold is that both stopped on the same one, after one step.
  sig=SIGTERM
  [ "$case" = launcher ] && sig=SIGUSR1
  if [ "$case" = all ] && grep -q "stopped by SIGUSR1 after step $stopped/" "runs/$name/logs/rank-0.log"; then
    sig=SIGUSR1
  fi
  grep -q "stopped by $sig after step $stopped/" "runs/$name/logs/rank-0.log" ||
    fail "$name: rank 0 did not stop by $sig at step $stopped: $(grep stopped "runs/$name/logs/rank-0.log")"
  grep -q "stopped by $sig after step $stopped/" "runs/$name/logs/rank-1.log" ||
    fail "$name: rank 1 did not stop by $sig at step $stopped"
  echo "$name: both ranks stopped after step $stopped, mpirun 0, launcher 75"
  evicted=
  [ "$case" = worker ] && evicted=b
  [ "$case" = all ] && evicted="a b"
  for p in $evicted; do
    # The evicted pod's supervisor waited for its rank and orted, then stopped sleep.
    timeout 30 tail --pid="$(pod_field $p 1)" -f /dev/null || fail "pod-$p's supervisor did not exit"
    cat "pod_$p.log"
    grep -q "SIGTERM to the '$exe' processes ([0-9]" "pod_$p.log" || fail "pod-$p: no rank was signalled"
    grep -q "the '$exe' processes have exited" "pod_$p.log" || fail "pod-$p: did not wait for its rank"
    grep -q "'sleep' exited with signal 15" "pod_$p.log" || fail "pod-$p: sleep was not stopped last"
    start_pod "$p"  # the operator recreates the evicted worker
  done
  # The retried launcher resumes and trains 5 more steps in the same pods.
  launch "$name" $((stopped + 5))
  wait_launcher "$name"
  [ "$RC" = 0 ] || { cat "$name.log"; fail "$name: the resumed launcher exited $RC (expected 0: finished)"; }
  grep -q "resumed from .*$ck" "runs/$name/logs/rank-0.log" || fail "$name did not resume from $ck"
  stop_pod a
  stop_pod b
  mpi 2 --set run.name="straight_$case" --set train.steps=$((stopped + 5)) "${common[@]}" \
    >"straight_$case.log" 2>&1 || { cat "straight_$case.log"; fail "the uninterrupted run failed"; }
  diff <(losses "$name") <(losses "straight_$case") >/dev/null ||
    fail "$name: the resumed curve differs from an uninterrupted run"
  echo "$name: resumed curve bit-identical to an uninterrupted run ($((stopped + 5)) steps)"
done
echo PASS
