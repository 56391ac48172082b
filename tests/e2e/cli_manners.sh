#!/usr/bin/env bash
# CLI manners: usage errors exit 2, unknown commands get a suggestion, --version, defaults in
# every --help, generate past the context, --ids, eval's default data, config warnings.
source "$(dirname "$0")/common.bash"

# rc_of cmd...: prints the exit status.
rc_of() { set +e; "$@" > out.txt 2>&1; echo $?; set -e; }

[ "$(rc_of "$BRAID" trian good.yaml)" = 2 ] || fail "unknown command: not exit 2"
grep -qF "did you mean 'train'" out.txt || fail "no suggestion: $(cat out.txt)"
[ "$(rc_of "$BRAID" train)" = 2 ] || fail "missing argument: not exit 2 ($(cat out.txt))"
[ "$(rc_of "$BRAID" eval x --no-such-option)" = 2 ] || fail "unknown option: not exit 2"
[ "$(rc_of "$BRAID" --version)" = 0 ] && grep -q "^braid [0-9]" out.txt || fail "--version: $(cat out.txt)"
grep -qE "^cpu: (scalar|avx2|avx512|avx512_bf16|amx) " out.txt || fail "--version names no CPU level: $(cat out.txt)"
BRAID_CPU_ISA=scalar "$BRAID" --version | grep -q "^cpu: scalar (BRAID_CPU_ISA" ||
  fail "--version ignores BRAID_CPU_ISA"
[ "$(rc_of "$BRAID" --help)" = 0 ] || fail "--help failed"
echo "ok: exit codes, suggestion, --version"
# Every option with a default shows it in --help.
for sub in prepare eval generate export import plan; do
  "$BRAID" $sub --help > help.txt
  grep -q "=[^ ]" help.txt || fail "$sub --help shows no defaults"
done
"$BRAID" generate --help | grep -q -- "--temperature FLOAT.*=0.8" || fail "generate --help lacks the temperature default"
"$BRAID" eval --help | grep -q -- "--batch INT.*=8" || fail "eval --help lacks the batch default"
echo "ok: defaults in --help"

make_corpus
"$BRAID" prepare --input corpus --out data --tokenizer byte --val-fraction 0.1 > /dev/null
write_config "$WORK/data" small small.yaml
# Warnings for settings that do little.
"$BRAID" train small.yaml --set train.steps=2 --set optim.warmup_steps=5 > /dev/null 2> warn.txt
grep -q "warning: optim.warmup_steps (5) >= train.steps (2)" warn.txt || fail "no warmup warning: $(cat warn.txt)"
rm -rf runs/small
"$BRAID" train small.yaml --set train.steps=3 --set optim.decay_steps=100 > /dev/null 2> warn.txt
grep -q "warning: optim.decay_steps (100) > train.steps (3)" warn.txt || fail "no decay warning: $(cat warn.txt)"
echo "ok: config warnings"
# The shipped configs run twice (resume: auto, not none).
for f in "$SRC"/configs/*.yaml; do
  grep -q "resume: none" "$f" && fail "$f has resume: none, so a second run of it fails"
done
echo "ok: shipped configs resume"

# eval without --data uses the run's validation split.
"$BRAID" eval runs/small > eval.json
grep -q "\"data\": \"$WORK/data/val.bin\"" eval.json || fail "eval did not default to val.bin: $(cat eval.json)"
echo "ok: eval defaults --data"

# generate past the context (32) slides the window; --ids prints ids.
"$BRAID" generate runs/small --prompt "The " --tokens 80 --ids --seed 3 > ids.txt
[ "$(wc -l < ids.txt)" = 2 ] || fail "--ids: expected 2 lines, got $(cat ids.txt)"
[ "$(sed -n 2p ids.txt | wc -w)" = 80 ] || fail "generate stopped before 80 tokens: $(cat ids.txt)"
sed -n 1p ids.txt | grep -qx "84 104 101 32" || fail "prompt ids: $(sed -n 1p ids.txt)"
"$BRAID" generate runs/small --prompt "The " --tokens 80 --seed 3 > text.txt
[ "$(wc -c < text.txt)" -ge 84 ] || fail "text generation stopped early"
echo "ok: generate slides past the context, --ids"
echo "all CLI manner checks passed"
