# Shared by the data-parallel `braid train` scripts (sourced): arguments, corpus, config, helpers.
#   <script> <mpirun> <braid> <workdir>
set -euo pipefail
MPIRUN=$1
BRAID=$2
WORK=$3
rm -rf "$WORK"
mkdir -p "$WORK/corpus"
cd "$WORK"
fail() { echo "FAIL: $*" >&2; exit 1; }
head -c 60000 /usr/share/common-licenses/GPL-3 > corpus/a.txt
head -c 20000 /usr/share/common-licenses/Apache-2.0 > corpus/b.txt
"$BRAID" prepare --input corpus --out data --tokenizer byte --val-fraction 0.1 > /dev/null
# A global batch of 4 micro-batches of 4 sequences; decay_steps fixed so a run cut short
# follows the same learning-rate curve. Tiny buckets: several per step even for this model.
cat > c.yaml <<YAML
run: {name: one, dir: $WORK/runs}
model: {family: gpt2, vocab_size: 256, context_length: 32, n_layer: 2, n_embd: 32, n_head: 2}
data: {dir: $WORK/data, micro_batch: 4, seq_len: 32, grad_accum: 4, seed: 3, prefetch: 2}
optim: {lr: 0.003, min_lr: 0.0003, warmup_steps: 2, decay: cosine, decay_steps: 20}
train: {steps: 20, log_interval: 1, eval_interval: 10, eval_batches: 2, sample_tokens: 0, peak_tflops: 1.0}
checkpoint: {interval: 10, keep_last: 3, resume: auto}
parallel: {bucket_mb: 0.02, first_bucket_mb: 0.005, timeout_s: 30}
YAML
# packed_data N: N prompt/completion samples of varied lengths in jsonl/, prepared into sdata/
# with the byte tokenizer (the last 10 % to val.bin).
packed_data() {
  mkdir -p jsonl
  python3 - "$1" <<'PY'
import json, sys
with open("jsonl/train.jsonl", "w") as f:
    for i in range(int(sys.argv[1])):
        f.write(json.dumps({"prompt": f"Q{i}: {i}+{i}?\n", "completion": f"{2 * i}" + "!" * (i % 9) + "\n"}) + "\n")
PY
  "$BRAID" prepare --input jsonl --out sdata --tokenizer byte --eot none --val-fraction 0.1 > /dev/null
}
# mpi NP ARGS...: braid train c.yaml ARGS under mpirun with NP ranks.
mpi() {
  local np=$1; shift
  "$MPIRUN" --oversubscribe -np "$np" "$BRAID" train c.yaml "$@"
}
# losses RUN: "step loss" lines from the run's metrics.jsonl.
losses() {
  grep '"step_loss"' "runs/$1/metrics.jsonl" | sed 's/.*"step":\([0-9]*\).*"step_loss":\([^,}]*\).*/\1 \2/' | sort -n
}
# same_losses A B RTOL: equal step numbers, losses within RTOL relative.
same_losses() {
  paste <(losses "$1") <(losses "$2") | awk -v r="$3" -v a="$1" -v b="$2" '
    { n++; if ($1 != $3) { print "step mismatch " $1 " " $3; bad = 1 }
      d = $2 - $4; if (d < 0) d = -d; rel = d / ($4 < 0 ? -$4 : $4); if (rel > worst) worst = rel
      if (rel > r) { print "step " $1 ": " a " " $2 " vs " b " " $4; bad = 1 } }
    END { printf "%s vs %s: %d steps, worst relative difference %.3g (limit %g)\n", a, b, n, worst, r
          exit bad || n == 0 }' || fail "$1 and $2 differ"
}
exact() {  # exact A B: every step loss equal to the last digit
  diff <(losses "$1") <(losses "$2") > /dev/null || { paste <(losses "$1") <(losses "$2") | head; fail "$1 and $2 are not bit-identical"; }
  echo "$1 vs $2: bit-identical"
}
# expect_fail WANT CMD...: CMD fails promptly (not the 124 of a timeout) saying WANT.
expect_fail() {
  local want=$1; shift
  set +e; out=$("$@" 2>&1); rc=$?; set -e
  [ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "expected a prompt failure (exit $rc) of: $*"
  echo "$out" | grep -qF -- "$want" || fail "expected '$want' from: $*; got: $out"
  echo "ok (exit $rc): $want"
}
