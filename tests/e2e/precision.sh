#!/usr/bin/env bash
# Mixed precision on the quickstart model (tiny corpus, small batches, 200 steps): bf16 and fp16
# end within a stated margin of fp32; checkpoints keep f32 master weights; an injected fp16
# overflow skips exactly one step and training recovers; too many skips in a row stop the run;
# `braid export --dtype` writes the requested dtype.
source "$(dirname "$0")/common.bash"
make_corpus
"$BRAID" prepare --input corpus --out data --tokenizer bpe --vocab-size 512 --val-fraction 0.1 > /dev/null

# The quickstart model (4 layers, 128 wide, vocab 512) on 2 x 64-token micro-batches, at a
# learning rate of 1e-3: at the quick start's 3e-3 these small batches make training chaotic
# (a gradient spike around step 80 in some runs and not in others, whatever the precision:
# final validation losses 4.8-5.3 over data seeds), so one rounding difference could move the
# loss by more than the margin below.
run() {  # run NAME PRECISION [extra --set ...]
  local name=$1 prec=$2; shift 2
  "$BRAID" train "$SRC/configs/quickstart.yaml" --set run.dir="$WORK/runs" --set run.name="$name" \
    --set data.dir="$WORK/data" --set data.micro_batch=2 --set data.seq_len=64 \
    --set train.steps=200 --set optim.decay_steps=200 --set train.log_interval=50 --set train.eval_interval=200 \
    --set train.eval_batches=8 --set train.sample_tokens=0 --set train.peak_tflops=1 \
    --set checkpoint.interval=200 --set checkpoint.resume=none --set optim.lr=1e-3 \
    --set train.precision="$prec" "$@"
}
val_loss() { grep '"val_loss"' "runs/$1/metrics.jsonl" | tail -1 | sed 's/.*"val_loss":\([^,}]*\).*/\1/'; }
# The margin: a 16-bit run's final validation loss is within 1.5 % of fp32's. Measured (Intel
# Xeon with AMX, 2 threads): bf16 +0.07 %, +0.02 %, +0.005 % on the AMX, AVX512_BF16 and AVX2
# paths, fp16 -0.001 %; over data seeds 1-3 bf16 and fp16 stayed within 0.3 %. A broken
# gradient or master-weight update leaves the loss near ln(512) = 6.2, 30 % off.
within() {  # within A B: |A - B| <= 0.015 * B
  awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.015 * b) }'
}

run fp32 fp32 > fp32.log
run bf16 bf16 > bf16.log
run fp16 fp16 > fp16.log
f=$(val_loss fp32); b=$(val_loss bf16); h=$(val_loss fp16)
echo "final val loss: fp32 $f, bf16 $b, fp16 $h"
# Below the data's unigram entropy (5.33 nats): the model learned more than token frequencies.
awk -v f="$f" 'BEGIN { exit !(f < 5.2) }' || fail "fp32 did not train (val loss $f)"
within "$b" "$f" || fail "bf16 val loss $b is not within 1.5% of fp32 $f"
within "$h" "$f" || fail "fp16 val loss $h is not within 1.5% of fp32 $f"
[ "$b" != "$f" ] || fail "bf16 gave fp32's exact loss: the low-precision path did not run"
grep -q "precision bf16: weights and activations bf16" bf16.log || fail "bf16 run did not log its precision"
grep -q "conversions" bf16.log || fail "the conversion path was not logged"
grep -q "master_weights" bf16.log || fail "no master weights in the memory line"
grep -q "master_weights" fp32.log && fail "fp32 must keep no master weights"

# Checkpoints hold f32 master weights, whatever the compute dtype.
hdr() { head -c 4096 "$1" | tr -d '\0' | grep -ao '"dtype":"[A-Z0-9]*"' | sort -u; }
ck=runs/bf16/checkpoints/step-00000200
[ "$(hdr $ck/model.safetensors)" = '"dtype":"F32"' ] || fail "bf16 checkpoint is not f32: $(hdr $ck/model.safetensors)"
# Export writes the requested dtype.
"$BRAID" export runs/bf16 --out hf_bf16 --dtype bf16 > /dev/null
[ "$(hdr hf_bf16/model.safetensors)" = '"dtype":"BF16"' ] || fail "export --dtype bf16 wrote $(hdr hf_bf16/model.safetensors)"
"$BRAID" export runs/fp16 --out hf_f16 --dtype f16 > /dev/null
[ "$(hdr hf_f16/model.safetensors)" = '"dtype":"F16"' ] || fail "export --dtype f16 wrote $(hdr hf_f16/model.safetensors)"
echo "ok: checkpoint f32, exports bf16/f16"

# eval / generate --dtype: the model read in f32 and kept in 16 bits (on a GPU auto means bf16);
# the validation loss within the 16-bit rounding of fp32's, greedy decoding runs, a bad value
# is refused naming the flag.
eval_loss() { "$BRAID" eval runs/bf16 --device cpu "$@" | grep '"loss"' | sed 's/.*"loss": *\([^,]*\).*/\1/'; }
e32=$(eval_loss --dtype fp32)
for dt in bf16 fp16; do
  e=$(eval_loss --dtype $dt)
  within "$e" "$e32" || fail "eval --dtype $dt: loss $e vs fp32 $e32"
  # Not the f32 model: 16-bit weights move the loss (by about 1e-4 here).
  [ "$e" != "$e32" ] || fail "eval --dtype $dt gave fp32's loss exactly: the weights stayed f32"
  "$BRAID" generate runs/bf16 --device cpu --dtype $dt --tokens 8 --temperature 0 --ids > gen_$dt.log \
    || fail "generate --dtype $dt failed: $(tail -3 gen_$dt.log)"
done
[ "$(eval_loss)" = "$e32" ] || fail "eval on the CPU without --dtype is not fp32"
expect_fail "--dtype: fp8 not in" "$BRAID" eval runs/bf16 --device cpu --dtype fp8
echo "ok: eval/generate --dtype bf16 and fp16 (loss $e32 in fp32)"

# Resuming a 16-bit run continues bit for bit (masters and loss-scaler state are restored).
run fp16r fp16 --set train.steps=100 --set checkpoint.interval=50 > /dev/null
run fp16r fp16 --set checkpoint.interval=50 --set checkpoint.resume=auto > fp16r.log
grep -q "resumed from" fp16r.log || fail "fp16 run did not resume"
[ "$(val_loss fp16r)" = "$h" ] || fail "resumed fp16 run ends at $(val_loss fp16r), uninterrupted at $h"
echo "ok: fp16 resume is bit-identical"

# The default start scale (65536) overflows for real early on; such steps are logged and skipped.
grep "fp16 overflow" fp16.log || echo "(no natural fp16 overflow in this run)"
# An injected overflow at step 120 with a start scale that never overflows for real: that one
# step is skipped, the scale backs off (hysteresis 1), and training ends within the 3 % margin
# of fp32, like the other 16-bit runs. (Not of the fp16 run: its scale path differs, and the two
# drift apart by 2-3 % as rounding changes, e.g. in the -O1 sanitizer build.)
run inject fp16 --set train.loss_scale_hysteresis=1 --set train.loss_scale_initial=1024 \
  --test-fault overflow_at_step=120 > inject.log
grep "fp16 overflow" inject.log
[ "$(grep -c "fp16 overflow" inject.log)" -eq 1 ] || fail "expected exactly one skipped step"
grep -q "step 120: fp16 overflow.*step skipped, loss scale 1024 -> 512 (backed off)" inject.log \
  || fail "the skip and back-off were not logged as expected"
i=$(val_loss inject)
within "$i" "$f" || fail "after the skipped step the run did not recover: $i vs fp32 $f"
echo "ok: one skipped step, recovered to val loss $i"

# N skips in a row stop the run with a clear message (here the limit is 1).
expect_fail "skipped 1 steps in a row" \
  run stop fp16 --set train.max_skipped_steps=1 --test-fault overflow_at_step=3
# Faults come from the hidden --test-fault flag only: the variable the hook once read does
# nothing, the flag is not in --help, and a malformed value names the flag and its forms.
BRAID_TEST_OVERFLOW_AT_STEP=3 run envfault fp16 --set train.max_skipped_steps=1 \
  --set train.steps=5 --set train.loss_scale_initial=1024 > envfault.log 2>&1 \
  || fail "an environment variable injected a fault: $(tail -3 envfault.log)"
! grep -q "fp16 overflow" envfault.log || fail "an environment variable injected an overflow"
! "$BRAID" train --help | grep -q -- "--test-fault" || fail "--test-fault is shown in --help"
expect_fail "--test-fault overflow_at_step=x: expected fail_at_step=RANK:STEP" \
  run badfault fp16 --test-fault overflow_at_step=x
expect_fail "expected fp32, bf16 or fp16" run bad fp8
echo "ok: precision e2e"
