#!/usr/bin/env bash
# `braid supervise` without namespaces or MPI: usage errors exit 2, the child's exit status
# comes back, orphans are reaped, a SIGTERM stops a single-process `braid train` cleanly
# (SIGUSR1) and --run turns that into exit 75 while a finished run exits 0, a second SIGTERM
# stops the child at once, and worker mode stops the named processes before the child.
# Also launcher mode over a real local mpirun (2 ranks): SIGUSR1 relayed to both, exit 75.
#   supervise_cli.sh <braid> <workdir> <mpirun>
set -euo pipefail
BRAID=$1 WORK=$2 MPIRUN=$3
rm -rf "$WORK"
mkdir -p "$WORK/corpus"
cd "$WORK"
fail() { echo "FAIL: $*" >&2; exit 1; }
rc_of() { set +e; "$@" >out.txt 2>&1; echo $?; set -e; }
expect_usage() {  # expect_usage "<message part>" ARGS...: exit 2 with that message
  local want=$1
  shift
  [ "$(rc_of "$BRAID" supervise "$@")" = 2 ] || fail "supervise $*: not exit 2 ($(cat out.txt))"
  grep -qF -- "$want" out.txt || fail "supervise $*: no '$want' in: $(cat out.txt)"
}
expect_usage "no command given" --
expect_usage "no command given"
expect_usage "put -- before the command" sleep 1
expect_usage "cannot run 'no-such-program-xyz': No such file or directory" -- no-such-program-xyz
expect_usage "--bogus" --bogus -- true
expect_usage "--stopped-exit-code requires --run" --stopped-exit-code 3 -- true
expect_usage "not in range 1 to 255" --stopped-exit-code 0 --run x -- true
expect_usage "is not a process name" --stop-ranks a/b -- true
expect_usage "is not a process name" --stop-ranks sixteen_chars_xx -- true
echo "ok: usage errors exit 2"

[ "$(rc_of "$BRAID" supervise -- sh -c 'exit 7')" = 7 ] || fail "exit 7 not passed on"
[ "$(rc_of "$BRAID" supervise -- sh -c 'kill -KILL $$')" = 137 ] || fail "SIGKILL: not 137"
# The child's options after -- are its own.
[ "$(rc_of "$BRAID" supervise -- sh -c 'echo "$@"' sh --stop-ranks x)" = 0 ] &&
  grep -qx -- "--stop-ranks x" out.txt || fail "arguments after -- not passed on: $(cat out.txt)"
echo "ok: exit status passed on"

# Orphans are reaped: a grandchild whose parent has gone becomes the supervisor's child (as
# PID 1, or here as a subreaper) and must not stay a zombie.
"$BRAID" supervise -- sh -c '(sleep 1 &); sleep 3' 2>/dev/null &
sup=$!
sleep 0.5
adopted=$(pgrep -P "$sup" -x sleep || true)  # the orphan, now the supervisor's child
sleep 1.5
zombies=$(ps -o stat= --ppid "$sup" | grep -c Z || true)
wait "$sup"
[ -n "$adopted" ] || fail "the orphan was not adopted by the supervisor"
[ "$zombies" = 0 ] || fail "the supervisor left $zombies zombie(s)"
echo "ok: orphans reaped"

# A SIGTERM to the supervisor is SIGUSR1 to the child; a second one is SIGTERM at once.
"$BRAID" supervise -- sh -c 'trap "echo got USR1" USR1; while :; do sleep 0.05; done' >two.log 2>&1 &
sup=$!
sleep 0.5
kill -TERM "$sup"
sleep 0.5
kill -TERM "$sup"
rc=0
wait "$sup" || rc=$?
grep -q "got USR1" two.log || fail "the first SIGTERM did not reach the child as SIGUSR1: $(cat two.log)"
[ "$rc" = 143 ] || fail "after the second SIGTERM: exit $rc, expected 143 ($(cat two.log))"
echo "ok: first SIGTERM -> SIGUSR1, second -> SIGTERM"

# Single-process training: stopped -> 75 with a checkpoint, run again -> finishes, 0.
head -c 60000 /usr/share/common-licenses/GPL-3 >corpus/a.txt
"$BRAID" prepare --input corpus --out data --tokenizer byte >/dev/null
cat >c.yaml <<YAML
run: {name: one, dir: $WORK/runs}
model: {family: gpt2, vocab_size: 256, context_length: 32, n_layer: 1, n_embd: 32, n_head: 2}
data: {dir: $WORK/data, micro_batch: 2, seq_len: 32, grad_accum: 1, seed: 1}
optim: {lr: 0.003, warmup_steps: 1, decay: constant, decay_steps: 4}
train: {steps: 100000, log_interval: 1, eval_interval: 0, sample_tokens: 0, peak_tflops: 1.0}
checkpoint: {interval: 0, keep_last: 1, resume: auto}
YAML
"$BRAID" supervise --run runs/one -- "$BRAID" train c.yaml >train1.log 2>&1 &
sup=$!
for _ in $(seq 1 300); do grep -qs '"step_loss"' runs/one/metrics.jsonl && break; sleep 0.1; done
kill -TERM "$sup"
rc=0
wait "$sup" || rc=$?
[ "$rc" = 75 ] || { cat train1.log; fail "stopped run: exit $rc, expected 75"; }
grep -q "stopped by SIGUSR1 after step" train1.log || fail "braid did not stop on SIGUSR1"
ck=$(ls runs/one/checkpoints | grep step- | tail -1)
[ -n "$ck" ] || fail "no checkpoint after the stop"
steps=$((10#${ck#step-} + 3))
[ "$(rc_of "$BRAID" supervise --run runs/one --stopped-exit-code 9 -- "$BRAID" train c.yaml \
  --set train.steps=$steps)" = 0 ] || fail "finished run: not exit 0 ($(cat out.txt))"
grep -q "resumed from" out.txt || fail "the second run did not resume"
[ "$(rc_of "$BRAID" supervise --run runs/nowhere -- true)" = 1 ] &&
  grep -q "has no metrics.jsonl" out.txt || fail "a wrong --run was not reported"
echo "ok: stopped run exits 75 and resumes; finished run exits 0"

# Launcher mode over mpirun: mpirun relays the SIGUSR1 to both ranks, which stop together.
"$BRAID" supervise --run runs/mpi -- "$MPIRUN" --oversubscribe -np 2 "$BRAID" train c.yaml \
  --set run.name=mpi >mpi.log 2>&1 &
sup=$!
for _ in $(seq 1 300); do grep -qs '"step_loss"' runs/mpi/metrics.jsonl && break; sleep 0.1; done
kill -TERM "$sup"
rc=0
timeout 60 tail --pid="$sup" -f /dev/null || { kill -KILL "$sup"; fail "mpirun did not stop"; }
wait "$sup" || rc=$?
[ "$rc" = 75 ] || { cat mpi.log; fail "mpirun under the supervisor: exit $rc, expected 75"; }
ck=$(ls runs/mpi/checkpoints | grep step- | tail -1)
for r in 0 1; do
  grep -q "stopped by SIGUSR1 after step $((10#${ck#step-}))/" runs/mpi/logs/rank-$r.log ||
    fail "rank $r did not stop by SIGUSR1 at the checkpoint's step ($ck)"
done
echo "ok: mpirun relays SIGUSR1; both ranks stopped after the same step, exit 75"

# Worker mode, here outside a PID namespace: the named processes (copies of bash under a name
# nothing else on this machine has, standing in for ranks: on SIGTERM they take two seconds to
# "checkpoint", then exit 0) get SIGTERM and are waited for, then the child. A third one
# starts after the SIGTERM (a rank still being launched): it gets its SIGTERM too.
name=bsup$$
name=${name:0:15}
cp "$(command -v bash)" "$name"
# However the script ends, none of them outlives it (the name is this test's own).
trap 'for p in $(pgrep -x "$name" || true); do kill -KILL "$p" 2>/dev/null || true; done' EXIT
rank="./$name -c 'trap \"sleep 2; exit 0\" TERM; while :; do sleep 0.1; done'"
"$BRAID" supervise --stop-ranks "$name" -- \
  sh -c "$rank & $rank & (sleep 1; exec $rank) & exec sleep 300" >worker.log 2>&1 &
sup=$!
for _ in $(seq 1 50); do [ "$(pgrep -cx "$name" || true)" = 2 ] && break; sleep 0.1; done
kill -TERM "$sup"
rc=0
timeout 20 tail --pid="$sup" -f /dev/null || { kill -KILL "$sup"; fail "worker mode did not end"; }
wait "$sup" || rc=$?
cat worker.log
[ "$rc" = 143 ] || fail "worker mode: exit $rc, expected 143 (sleep stopped by SIGTERM)"
grep -q "SIGTERM to the '$name' processes ([0-9]* [0-9]*)" worker.log || fail "not both signalled"
grep -q "SIGTERM to the '$name' processes started since ([0-9]*)" worker.log ||
  fail "the late one was not signalled"
grep -A1 "processes have exited" worker.log | grep -q "SIGTERM to pid" ||
  fail "the child was not stopped after the named processes"
echo PASS
