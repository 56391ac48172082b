#!/usr/bin/env bash
# A full disk during a checkpoint save: the run fails with the reason, the previous checkpoint
# stays complete and loadable, and no temporary directory is left. Needs a small tmpfs (root);
# skipped (exit 77) where mounting is refused.
source "$(dirname "$0")/common.bash"
make_corpus
"$BRAID" prepare --input corpus --out data --tokenizer byte --val-fraction 0.1 > /dev/null
mkdir -p full
# One checkpoint of this model is about 400 KiB (weights + two AdamW moments); 700 KiB holds
# the run directory and one checkpoint but not a second beside it.
if ! mount -t tmpfs -o size=700k tmpfs full 2> mount.err; then
  echo "SKIP: cannot mount a tmpfs here ($(cat mount.err)); run as root to test a full disk"
  exit 77
fi
trap 'umount "$WORK/full" 2>/dev/null || true' EXIT
write_config "$WORK/data" r cfg.yaml
set +e
"$BRAID" train cfg.yaml --set run.dir="$WORK/full" --set checkpoint.keep_last=1 > train.log 2>&1
rc=$?
set -e
[ $rc -ne 0 ] || fail "the run did not notice the full disk: $(tail -3 train.log)"
grep -q "No space left on device" train.log || fail "no reason given: $(tail -3 train.log)"
ck=full/r/checkpoints
[ "$(cat $ck/latest)" = "step-00000003" ] || fail "latest is $(cat $ck/latest)"
ls -a $ck | grep -q '^\.tmp-' && fail "a temporary directory was left: $(ls -a $ck)"
"$BRAID" eval full/r --data data/val.bin > eval.json || fail "the previous checkpoint does not load"
grep -q '"loss"' eval.json || fail "eval printed no loss"
echo "ok: disk full at the step-6 save; step 3 intact ($(tail -1 train.log))"
