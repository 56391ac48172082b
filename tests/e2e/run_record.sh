#!/usr/bin/env bash
# What a run records: run.json (version, commit, machine), metrics.jsonl events and times,
# TensorBoard files, the kept config on a changed resume, the cached MFU peak, and
# `braid report` writing a self-contained page and a valid PNG.
source "$(dirname "$0")/common.bash"
make_corpus
"$BRAID" prepare --input corpus --out data --tokenizer byte --val-fraction 0.1 > /dev/null
export XDG_CACHE_HOME=$WORK/cache

write_config "$WORK/data" r cfg.yaml
"$BRAID" train cfg.yaml --set train.steps=4 --set train.peak_tflops=0 > first.log
grep -q "MFU peak .*measured now, cached in $WORK/cache/braid/peak.json" first.log ||
  fail "first run did not measure and cache the peak: $(grep MFU first.log)"
[ -f cache/braid/peak.json ] || fail "no peak.json"

# ---- resume with a changed config: warned, original kept, new one beside it ----
"$BRAID" train cfg.yaml --set train.peak_tflops=0 --set optim.lr=0.002 > second.log
grep -q "MFU peak .*cached in $WORK/cache/braid/peak.json for" second.log ||
  fail "second run did not use the cached peak: $(grep MFU second.log)"
grep -q "warning: the config differs" second.log || fail "no warning for a changed config"
grep -q "optim.lr: 0.003 -> 0.002" second.log || fail "changed key not named: $(cat second.log)"
grep -q "steps: 4" runs/r/config.yaml || fail "config.yaml was overwritten"
grep -q "lr: 0.002" runs/r/config.step-00000004.yaml || fail "new config not saved beside it"
echo "ok: changed config on resume warned, original kept"

# ---- a cached peak below what a run computes (measured while the machine was slower): the
# run says so, measures again and caches the larger rate ----
sed -i -E 's/"flops_per_s": [0-9.e+]+/"flops_per_s": 1000.0/' cache/braid/peak.json
grep -q '"flops_per_s": 1000.0' cache/braid/peak.json || fail "could not lower the cached peak"
write_config "$WORK/data" r_slow cfg_slow.yaml
"$BRAID" train cfg_slow.yaml --set train.steps=4 --set train.peak_tflops=0 > slow.log
grep -q "MFU peak .*cached in" slow.log ||
  fail "the run did not divide by the cached peak: $(grep 'MFU peak' slow.log)"
grep -q "MFU above 100 %: .*measured again: .*the next runs divide by" slow.log ||
  fail "no re-measurement after MFU above 100 %: $(tail -5 slow.log)"
grep -q '"flops_per_s": 1000.0' cache/braid/peak.json &&
  fail "the cached peak was not raised: $(cat cache/braid/peak.json)"
echo "ok: a cached peak below the run's rate is measured again and raised"

# ---- manifests carry SHA-256 that sha256sum reproduces ----
ck=runs/r/checkpoints/$(cat runs/r/checkpoints/latest)
grep -q '"checksum_algo": "sha256"' $ck/manifest.json || fail "manifest does not name sha256"
for f in model.safetensors optimizer.safetensors; do
  sum=$(sha256sum "$ck/$f" | cut -d' ' -f1)
  grep -q "\"checksum\": \"$sum\"" $ck/manifest.json || fail "sha256sum of $f is not in the manifest"
done
echo "ok: manifest checksums verify with sha256sum"

# ---- run.json ----
for key in braid_version git_commit cpu_model cpu_isa threads gemm_backend parallel_layout; do
  grep -q "\"$key\"" runs/r/run.json || fail "run.json lacks $key"
done
[ "$(grep -c '"started_at"' runs/r/run.json)" -eq 2 ] || fail "run.json should list two attempts"
if git -C "$SRC" rev-parse HEAD > /dev/null 2>&1; then
  grep -q '"git_commit": "[0-9a-f]\{40\}"' runs/r/run.json || fail "no commit hash in run.json"
fi
echo "ok: run.json $(grep -m1 '"cpu_isa"' runs/r/run.json)"

# ---- metrics.jsonl: every record has an event and a time ----
n=$(wc -l < runs/r/metrics.jsonl)
[ "$(grep -c '"event":"' runs/r/metrics.jsonl)" -eq "$n" ] || fail "a record without an event"
[ "$(grep -c '"time":1[0-9]\{9\}' runs/r/metrics.jsonl)" -eq "$n" ] || fail "a record without a time"
for ev in start resume train eval checkpoint end; do
  grep -q "\"event\":\"$ev\"" runs/r/metrics.jsonl || fail "no $ev record"
done
ls runs/r/events.out.tfevents.* > /dev/null || fail "no TensorBoard event file"
[ "$(ls runs/r/events.out.tfevents.* | wc -l)" -eq 2 ] || fail "expected one tfevents file per attempt"

# ---- report ----
"$BRAID" report runs/r --png > report.log
html=runs/r/report.html
[ -s $html ] || fail "no report.html"
grep -q "<svg" $html || fail "no inline SVG"
! grep -Eqi "(src|href)=[\"']?[a-z]*:?//" $html || fail "the report references the network"
! grep -qi "<script" $html || fail "the report has scripts"
for s in "train loss" "val loss" "learning rate" "MFU" "kernel group" "Memory by category" "Resolved config"; do
  grep -q "$s" $html || fail "report lacks '$s'"
done
png=runs/r/loss.png
[ "$(head -c 8 $png | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] || fail "not a PNG signature"
[ "$(head -c 16 $png | tail -c 4)" = "IHDR" ] || fail "PNG without IHDR first"
[ "$(tail -c 8 $png | head -c 4)" = "IEND" ] || fail "PNG does not end with IEND"
"$BRAID" report runs/r --out other.html > /dev/null
[ -s other.html ] || fail "--out ignored"
expect_fail "metrics.jsonl" "$BRAID" report data
echo "ok: report.html ($(wc -c < $html) bytes) and loss.png ($(wc -c < $png) bytes)"
