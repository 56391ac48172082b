#!/usr/bin/env bash
# Preemption: SIGTERM finishes the step, checkpoints and exits 0, and the resumed run's losses
# are bit-identical to an uninterrupted one; so are those after a kill -9 (metrics.jsonl keeps
# one curve) and after a double SIGTERM. A second writer on a busy run directory is refused
# with the holder's PID; a diverging run stops with its step and writes no checkpoint for it.
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/common.bash"
make_corpus
"$BRAID" prepare --input corpus --out data --tokenizer byte --val-fraction 0.1 > /dev/null

# ~6 ms a step here: 800 steps leave seconds for the signals to land mid-run. Eval is off so
# that every step takes about as long.
STEPS=800
cfg() {
  write_config "$WORK/data" "$1" "$1.yaml"
  sed -i "s/steps: 6, log_interval: 1, eval_interval: 3/steps: $STEPS, log_interval: 1, eval_interval: 0/;
          s/decay_steps: 6/decay_steps: $STEPS/; s/interval: 3, keep_last: 2/interval: 100, keep_last: 2/" "$1.yaml"
}
losses() { grep '"step_loss"' "$1" | sed 's/.*"step":\([0-9]*\).*"step_loss":\([^,}]*\).*/\1 \2/' | sort -n; }
# wait_step RUN N: until metrics.jsonl of RUN has a record at step >= N (or 300 s pass).
wait_step() {
  for _ in $(seq 3000); do
    local last
    last=$({ grep -o '"step":[0-9]*' "runs/$1/metrics.jsonl" 2>/dev/null || true; } | tail -1 | cut -d: -f2)
    [ -n "$last" ] && [ "$last" -ge "$2" ] && return 0
    sleep 0.1
  done
  fail "run $1 never reached step $2"
}

cfg straight
"$BRAID" train straight.yaml > straight.log
losses runs/straight/metrics.jsonl > straight.txt
[ "$(wc -l < straight.txt)" -eq $STEPS ] || fail "straight run logged $(wc -l < straight.txt) steps"

# ---- SIGTERM: checkpoint, exit 0; a second writer meanwhile is refused ----
cfg term
"$BRAID" train term.yaml > term1.log 2>&1 &
pid=$!
wait_step term 3
expect_fail "pid $pid" "$BRAID" train term.yaml
# The signal will run its handler on the braid-signals thread, never on a compute thread.
bash "$HERE/check_signal_routing.bash" $pid || fail "signals are not routed to one thread"
kill -TERM $pid
rc=0; wait $pid || rc=$?
[ $rc -eq 0 ] || fail "SIGTERM: exit $rc (want 0); log: $(tail -5 term1.log)"
grep -q "stopped by SIGTERM after step" term1.log || fail "no stop message: $(tail -5 term1.log)"
stopped=$(sed -n 's/.*stopped by SIGTERM after step \([0-9]*\).*/\1/p' term1.log)
[ "$stopped" -lt $STEPS ] || fail "the signal arrived after the run ended; make steps slower"
[ "$(cat runs/term/checkpoints/latest)" = "$(printf 'step-%08d' "$stopped")" ] ||
  fail "latest is $(cat runs/term/checkpoints/latest), want step $stopped"
grep -q "checkpoint: .*step-" term1.log || fail "the log does not say where the checkpoint is"
echo "ok: SIGTERM at step $stopped -> checkpoint, exit 0"
"$BRAID" train term.yaml > term2.log
grep -q "resumed from .*step-$(printf '%08d' "$stopped")" term2.log || fail "did not resume from the stop"
losses runs/term/metrics.jsonl > term.txt
diff straight.txt term.txt > /dev/null || fail "losses after SIGTERM + resume differ: $(diff straight.txt term.txt | head)"
echo "ok: SIGTERM + resume is bit-identical ($STEPS step losses)"

# ---- kill -9 between checkpoints: resumed from the older one, metrics keep one curve ----
cfg killed
"$BRAID" train killed.yaml > killed1.log 2>&1 &
pid=$!
wait_step killed 110   # past the step-100 checkpoint
kill -KILL $pid
wait $pid || true
"$BRAID" train killed.yaml > killed2.log
losses runs/killed/metrics.jsonl > killed.txt
diff straight.txt killed.txt > /dev/null || fail "losses after kill -9 + resume differ (or repeat): $(diff straight.txt killed.txt | head)"
echo "ok: kill -9 + resume: one curve, bit-identical"

# ---- two signals: exit at once; the last complete checkpoint still loads and resumes ----
cfg twice
"$BRAID" train twice.yaml > twice1.log 2>&1 &
pid=$!
wait_step twice 105   # the step-100 checkpoint exists
kill -TERM $pid
# The second only once the first was seen (two pending SIGTERMs would merge into one); the
# run is then finishing its step or writing the stop checkpoint.
for _ in $(seq 500); do grep -q "SIGTERM received" twice1.log && break; sleep 0.01; done
kill -TERM $pid 2> /dev/null || true
rc=0; wait $pid || rc=$?
[ $rc -eq 143 ] || [ $rc -eq 0 ] || fail "double SIGTERM: exit $rc"
"$BRAID" eval runs/twice --data data/val.bin > /dev/null || fail "the last checkpoint does not load"
"$BRAID" train twice.yaml > twice2.log
losses runs/twice/metrics.jsonl > twice.txt
diff straight.txt twice.txt > /dev/null || fail "losses after a double SIGTERM + resume differ"
echo "ok: double SIGTERM (exit $rc): checkpoint intact, resume bit-identical"

# ---- divergence: a clear message with the step, no checkpoint of non-finite weights ----
write_config "$WORK/data" diverge diverge.yaml
expect_fail "training diverged at step" "$BRAID" train diverge.yaml --set optim.lr=1e30 \
  --set checkpoint.interval=1 --set optim.warmup_steps=0
bad=$(grep -o '"event":"diverged".*' runs/diverge/metrics.jsonl | grep -o '"step":[0-9]*' | cut -d: -f2)
[ -n "$bad" ] || fail "no diverged record"
for d in runs/diverge/checkpoints/step-*; do
  [ -e "$d" ] || continue
  s=$((10#${d##*step-}))
  [ "$s" -lt "$bad" ] || fail "a checkpoint ($d) was written at or after the diverged step $bad"
done
echo "ok: divergence at step $bad stopped the run without a checkpoint for it"
