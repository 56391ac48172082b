# Shared by the tools/bench_*.sh scripts that time `braid train` under mpirun (sourced once
# $build and $steps are set): a scratch directory (removed on exit unless KEEP=1), the
# system's license texts as byte-tokenized shards, and bench_config writing c.yaml.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive
work=$(mktemp -d "/tmp/$(basename "$0" .sh).XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
cd "$work"
mkdir corpus
cat /usr/share/common-licenses/* > corpus/a.txt 2>/dev/null || true
"$build/braid" prepare --input corpus --out data --tokenizer byte --val-fraction 0.05 > /dev/null
# bench_config MODEL DATA PARALLEL: the yaml bodies of the model, data (beside dir and seed)
# and parallel sections; no evaluation, samples or checkpoints, so steps time training alone.
bench_config() {
  cat > c.yaml <<YAML
run: {name: x, dir: $work/runs}
model: {$1}
data: {dir: $work/data, $2, seed: 3}
optim: {lr: 0.001, warmup_steps: 1}
train: {steps: $steps, log_interval: 1, eval_interval: 0, sample_tokens: 0, peak_tflops: 1.0}
checkpoint: {interval: 0}
parallel: {$3}
YAML
}
