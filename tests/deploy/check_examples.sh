#!/usr/bin/env bash
# Checks the deployment examples in tools/deploy/ (docs/multinode.md): each parses, and its
# command line runs here (in dry-run form, or as a tiny real run).
#   check_examples.sh <braid> <check_mpijob> <mpirun> <workdir> <source dir>
set -euo pipefail
BRAID=$1 CHECK_MPIJOB=$2 MPIRUN=$3 WORK=$4 SRC=$5
DEPLOY=$SRC/tools/deploy
rm -rf "$WORK"
mkdir -p "$WORK"
cd "$WORK"
fail() { echo "FAIL: $*" >&2; exit 1; }
contains() { grep -qF -- "$2" <<<"$1" || fail "expected '$2' in: $1"; }
root_flag=()
[ "$(id -u)" -ne 0 ] || root_flag=(--allow-run-as-root)

echo "== syntax"
bash -n "$DEPLOY/mpirun_hostfile.sh"
bash -n "$DEPLOY/slurm_train.sbatch"

echo "== a tiny data set and config"
mkdir -p bin corpus data
head -c 30000 /usr/share/common-licenses/GPL-3 >corpus/a.txt
"$BRAID" prepare --input corpus --out data/c --tokenizer byte >/dev/null
cat >tiny.yaml <<YAML
run: {name: unused, dir: unused}
model: {family: gpt2, vocab_size: 256, context_length: 32, n_layer: 1, n_embd: 32, n_head: 2}
data: {dir: $WORK/data/c, micro_batch: 2, seq_len: 32, grad_accum: 1, seed: 1}
optim: {lr: 0.003, warmup_steps: 1, decay_steps: 4}
train: {steps: 4, log_interval: 1, eval_interval: 0, sample_tokens: 0, peak_tflops: 1.0}
checkpoint: {interval: 2, keep_last: 1}
YAML

echo "== Open MPI hostfile"
# The example hostfile's slots decide -np; the options reach mpirun.
cmd=$(DRY_RUN=1 HOSTFILE=$DEPLOY/hostfile THREADS=6 NET=10.9.0.0/16 BRAID=/opt/braid \
  RUN_DIR=/nfs/runs bash "$DEPLOY/mpirun_hostfile.sh" my.yaml --set train.steps=9)
echo "$cmd"
contains "$cmd" "--hostfile $DEPLOY/hostfile -np 4 "
contains "$cmd" "--map-by slot:PE=6 --bind-to core"
contains "$cmd" "-x OMP_NUM_THREADS=6 -x OMP_WAIT_POLICY=passive"
contains "$cmd" "--mca btl_tcp_if_include 10.9.0.0/16 --mca oob_tcp_if_include 10.9.0.0/16"
contains "$cmd" "/opt/braid train my.yaml --set run.dir=/nfs/runs --set checkpoint.resume=auto --set train.steps=9"
# The real command on a one-node hostfile: every rank starts braid train with these arguments.
echo "localhost slots=2" >hostfile.local
HOSTFILE=hostfile.local BRAID=$BRAID MPIRUN=$MPIRUN timeout 120 \
  bash "$DEPLOY/mpirun_hostfile.sh" my.yaml --help >hostfile_run.log 2>&1 ||
  { cat hostfile_run.log; fail "mpirun_hostfile.sh on localhost failed"; }
[ "$(grep -c 'Usage: braid train' hostfile_run.log)" -eq 2 ] || { cat hostfile_run.log; fail "not 2 ranks"; }
# And a real data-parallel training run through it: 2 ranks, one run directory.
HOSTFILE=hostfile.local BRAID=$BRAID MPIRUN=$MPIRUN RUN_DIR=$WORK/runs timeout 200 \
  bash "$DEPLOY/mpirun_hostfile.sh" "$WORK/tiny.yaml" --set run.name=hostfile --set train.steps=3 \
  >hostfile_train.log 2>&1 || { cat hostfile_train.log; fail "training through mpirun_hostfile.sh failed"; }
grep -q '"event":"end"' runs/hostfile/metrics.jsonl || fail "the hostfile run did not finish"
grep -q '"dp": *2' runs/hostfile/run.json || { cat runs/hostfile/run.json; fail "run.json does not record dp 2"; }

echo "== Slurm sbatch"
# A tiny real training run under stubbed srun/scontrol: srun records its options and the
# environment, then starts the braid command as one task (optionally SIGTERMing it once it has
# logged a step, as Slurm's --signal=TERM@300 would); scontrol records a requeue.
cat >bin/srun <<'EOF'
#!/bin/bash
echo "srun $*" >>"$STUB_LOG"
echo "env OMP_NUM_THREADS=$OMP_NUM_THREADS OMP_WAIT_POLICY=$OMP_WAIT_POLICY" >>"$STUB_LOG"
while [[ $# -gt 0 && $1 == -* ]]; do shift; done
SLURM_PROCID=0 SLURM_LOCALID=0 "$@" &
pid=$!
if [ -n "${STUB_TERM_RUN:-}" ]; then
  until grep -qs '"event":"train"' "$STUB_TERM_RUN/metrics.jsonl"; do sleep 0.1; done
  kill -TERM $pid
fi
wait $pid
EOF
printf '#!/bin/bash\necho "scontrol $*" >>"$STUB_LOG"\n' >bin/scontrol
chmod +x bin/srun bin/scontrol
sbatch_env=(PATH="$WORK/bin:$PATH" STUB_LOG="$WORK/stub.log" BRAID="$BRAID" RUN_DIR="$WORK/runs"
            SLURM_JOB_ID=4242 SLURM_JOB_NAME=braid SLURM_JOB_NUM_NODES=1 SLURM_JOB_NODELIST=n1
            SLURM_NTASKS=1 SLURM_CPUS_PER_TASK=2 SLURM_SUBMIT_DIR="$WORK" OMP_NUM_THREADS= OMP_WAIT_POLICY=)
run_dir=$WORK/runs/braid-4242
# First attempt: the time limit's SIGTERM arrives mid-run -> checkpoint, exit 0, requeue.
env "${sbatch_env[@]}" STUB_TERM_RUN="$run_dir" SLURM_RESTART_COUNT=0 \
  timeout 120 bash "$DEPLOY/slurm_train.sbatch" "$WORK/tiny.yaml" --set train.steps=100000 \
  >sbatch1.log 2>&1 || { cat sbatch1.log; fail "the sbatch script failed on the stopped attempt"; }
cat stub.log
log=$(cat stub.log)
contains "$log" "srun --mpi=pmix --cpus-per-task=2 --cpu-bind=cores --kill-on-bad-exit=1 $BRAID train $WORK/tiny.yaml --set run.dir=$WORK/runs --set run.name=braid-4242 --set checkpoint.resume=auto --set train.steps=100000"
contains "$log" "env OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive"
contains "$log" "scontrol requeue 4242"
grep -q '"event":"stop"' "$run_dir/metrics.jsonl" || fail "braid did not record the stop"
# Second attempt (the requeued job: same id, same run directory) resumes and finishes.
: >stub.log
env "${sbatch_env[@]}" SLURM_RESTART_COUNT=1 timeout 120 bash "$DEPLOY/slurm_train.sbatch" \
  "$WORK/tiny.yaml" >sbatch2.log 2>&1 || { cat sbatch2.log; fail "the resumed attempt failed"; }
grep -q '"event":"resume"' "$run_dir/metrics.jsonl" || fail "the second attempt did not resume"
grep -q "attempt 2" sbatch2.log || fail "attempt number not printed"
! grep -q scontrol stub.log || fail "a finished run was requeued"

echo "== Slurm sbatch, GPU nodes"
bash -n "$DEPLOY/slurm_train_gpu.sbatch"
# One rank per GPU: as many tasks as GPUs per node.
hdr() { sed -n "s/^#SBATCH --$1=//p" "$DEPLOY/slurm_train_gpu.sbatch"; }
[ -n "$(hdr gpus-per-node)" ] && [ "$(hdr gpus-per-node)" = "$(hdr ntasks-per-node)" ] ||
  fail "slurm_train_gpu.sbatch: --ntasks-per-node $(hdr ntasks-per-node) != --gpus-per-node $(hdr gpus-per-node)"
for opt in requeue signal; do grep -q "^#SBATCH --$opt" "$DEPLOY/slurm_train_gpu.sbatch" || fail "no --$opt"; done
# Its body is slurm_train.sbatch's, with train.device=cuda: here (no GPU) braid says so.
: >stub.log
set +e
env "${sbatch_env[@]}" BRAID_DEPLOY_DIR="$DEPLOY" SLURM_RESTART_COUNT=0 timeout 120 \
  bash "$DEPLOY/slurm_train_gpu.sbatch" "$WORK/tiny.yaml" >sbatch_gpu.log 2>&1
rc=$?
set -e
contains "$(cat stub.log)" "--set checkpoint.resume=auto --set train.device=cuda"
# Without a GPU (or a CUDA build) the run stops at once with the reason; with one it trains.
if [ $rc -ne 0 ]; then
  grep -q "train.device: cuda, but" sbatch_gpu.log || { cat sbatch_gpu.log; fail "no clear no-GPU error"; }
fi

echo "== Kubernetes MPIJob"
"$CHECK_MPIJOB" "$DEPLOY/mpijob.yaml" >mpijob.argv
# Each broken variant is refused, naming what is wrong.
# (MANIFEST, default mpijob.yaml, names the file the variant is made from.)
expect_refused() {
  local name=$1 want=$2 sed_expr=$3 manifest=$DEPLOY/${4:-mpijob.yaml}
  sed "$sed_expr" "$manifest" >"bad_$name.yaml"
  cmp -s "bad_$name.yaml" "$manifest" && fail "variant $name changed nothing"
  if "$CHECK_MPIJOB" "bad_$name.yaml" >/dev/null 2>"bad_$name.err"; then fail "variant $name accepted"; fi
  grep -qF -- "$want" "bad_$name.err" || { cat "bad_$name.err"; fail "variant $name: no '$want'"; }
}
expect_refused np "-np 5 but Worker replicas x slotsPerWorker = 2 x 2" '0,/- "4"/s//- "5"/'
expect_refused cpu "16 but slotsPerWorker x OMP_NUM_THREADS = 2 x 4" 's/OMP_NUM_THREADS=8/OMP_NUM_THREADS=4/'
expect_refused api "apiVersion: must be kubeflow.org/v2beta1" 's#kubeflow.org/v2beta1#kubeflow.org/v1#'
expect_refused claim "workers do not mount claim 'braid-shared'" '$s/braid-shared/other/'
expect_refused yaml "check_mpijob: bad_yaml.yaml" 's/^spec:/spec: [/'
# Both pods' entrypoints must be braid supervise, in the right mode, with the right names.
expect_refused nosup "Launcher.template.spec.containers[0].command: must start with braid supervise" \
  '0,/- supervise$/s//- train/'
expect_refused norun "braid supervise has no --run RUN_DIR" '/- --run$/,+1d'
expect_refused wrongrun "braid supervise --run /shared/runs/other but run.dir/run.name is /shared/runs/braid-train" \
  's#- /shared/runs/braid-train#- /shared/runs/other#'
expect_refused noname "has no --set run.name=" '/- run.name=braid-train$/{s//- data.seed=1/}'
expect_refused launcher_stop "the launcher's braid supervise takes no --stop-ranks" \
  '0,/- --run$/s//- --stop-ranks/'
expect_refused nostop "braid supervise has no --stop-ranks NAME" '/- --stop-ranks$/,+1d'
expect_refused stopname "--stop-ranks brain but the ranks run 'braid'" '/- --stop-ranks$/{n;s/braid/brain/}'
expect_refused worker_sshd "Worker.template.spec.containers[0].command: must start with braid supervise" \
  '/- --stop-ranks$/,+2d; /- supervise$/{x;s/^/x/;/^xx$/{x;d};x}'
grep -c -- "- supervise$" bad_worker_sshd.yaml | grep -qx 1 || fail "variant worker_sshd kept the worker's supervisor"

echo "== Kubernetes MPIJob, GPU nodes, and the image"
"$CHECK_MPIJOB" "$DEPLOY/mpijob_gpu.yaml" >mpijob_gpu.argv
grep -qx "train.device=cuda" mpijob_gpu.argv || fail "the GPU MPIJob does not train on cuda"
expect_refused gpu_count "limits.nvidia.com/gpu: 4 but slotsPerWorker is 8" \
  's#nvidia.com/gpu: 8#nvidia.com/gpu: 4#' mpijob_gpu.yaml
expect_refused gpu_none "missing, but the job trains with train.device=cuda" '\#nvidia.com/gpu#d' \
  mpijob_gpu.yaml
expect_refused gpu_half "is not a whole number of GPUs" 's#nvidia.com/gpu: 8#nvidia.com/gpu: "0.5"#' \
  mpijob_gpu.yaml
# The Dockerfile builds the image both manifests name: braid where their commands run it, the
# packaged tarball, sshd's config at the path the workers pass, and the user they run as.
df=$DEPLOY/Dockerfile
grep -q "tools/package.sh" "$df" || fail "the Dockerfile does not install tools/package.sh's tarball"
grep -q "ln -s /opt/braid/bin/braid /usr/local/bin/braid" "$df" || fail "no /usr/local/bin/braid in the image"
for m in mpijob.yaml mpijob_gpu.yaml; do
  grep -q -- "- /usr/local/bin/braid" "$DEPLOY/$m" || fail "$m does not run /usr/local/bin/braid"
  grep -q -- "- /home/mpiuser/.sshd_config" "$DEPLOY/$m" || fail "$m: sshd config path"
  grep -q "runAsUser: 1000" "$DEPLOY/$m" || fail "$m: not user 1000"
done
grep -q "> /home/mpiuser/.sshd_config" "$df" || fail "the image has no /home/mpiuser/.sshd_config"
grep -q "useradd -m -u 1000 .* mpiuser" "$df" || fail "the image has no mpiuser of uid 1000"
grep -q "^FROM nvidia/cuda:.*-runtime-" "$df" || fail "the image is not on a CUDA runtime base"
if command -v hadolint >/dev/null; then hadolint "$df"; fi

# The launcher's command here, supervisor included, as a real run: this braid, 4 ranks on this
# machine's cores, the tiny config, run.dir in this directory.
mapfile -t argv <mpijob.argv
dry=()
for a in "${argv[@]}"; do
  case "$a" in
    mpirun) dry+=("$MPIRUN" --oversubscribe "${root_flag[@]}") ;;
    */braid) dry+=("$BRAID") ;;
    slot:PE=*) dry+=(slot) ;;
    core) dry+=(none) ;;
    OMP_NUM_THREADS=*) dry+=(OMP_NUM_THREADS=1) ;;
    /shared/configs/*.yaml) dry+=("$WORK/tiny.yaml") ;;
    run.dir=/shared/*) dry+=("run.dir=$WORK/k8s${a#run.dir=/shared}") ;;
    /shared/*) dry+=("$WORK/k8s${a#/shared}") ;;
    *) dry+=("$a") ;;
  esac
done
echo "${dry[*]}"
timeout 200 "${dry[@]}" >mpijob_run.log 2>&1 || { cat mpijob_run.log; fail "launcher command failed"; }
grep -q '"event":"end"' k8s/runs/braid-train/metrics.jsonl || fail "the MPIJob's run did not finish"
grep -q '"dp": *4' k8s/runs/braid-train/run.json || fail "the MPIJob's run was not 4 ranks"
grep -q "braid supervise: '.*' exited with code 0" mpijob_run.log || fail "no supervisor in the run"
echo PASS
