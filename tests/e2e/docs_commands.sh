#!/usr/bin/env bash
# Every command block of the user docs (README.md, docs/*.md), run as written in one scratch
# folder that stands for a user's working directory, in reading order (README, the guide's
# task pages, then the rest). tests/e2e/docs_blocks.py extracts the blocks: a block either
# runs, or carries `<!-- test: skip REASON -->` (a GPU, Slurm, Kubernetes, an install, a
# benchmark); `<!-- test: replace 'OLD' 'NEW' -->` shortens a block (fewer steps) without
# changing what it does. A new command block that is neither runs, so it must work here.
#
# What the docs take as given is made first, small: `braid` on PATH and as build/braid,
# configs/, texts/ (license texts), data/quickstart and runs/quickstart (what
# tools/quickstart.sh makes), models/TinyLlama-1.1B and models/TinyLlama-1.1B-Chat (tiny
# random Llamas with the SentencePiece-style test tokenizer, the second with Zephyr's chat
# template), chats/ (chat JSONL) and runs/chat (a run trained on it).
source "$(dirname "$0")/common.bash"
EXTRACT="python3 $SRC/tests/e2e/docs_blocks.py"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}

# ---- the extractor itself: a marker error or a command in a text block fails ----
mkdir -p selftest
check_refused() {  # check_refused "<substring>" < markdown
  cat > selftest/doc.md
  expect_fail "$1" $EXTRACT check selftest/doc.md
}
printf '<!-- test: skip -->\n```\nbraid train x.yaml\n```\n' | check_refused "needs the reason"
printf '<!-- test: replace "steps=9" "steps=1" -->\n```bash\nbraid train x.yaml\n```\n' \
  | check_refused "is not in the block"
printf '```text\nbraid train x.yaml\n```\n' | check_refused "starting like a command"
printf '<!-- test: skip GPU only -->\n\nsome text\n```\nbraid train x.yaml\n```\n' \
  | check_refused "not directly above a code block"
printf '<!-- test: sikp a GPU is needed here -->\n```\nbraid x\n```\n' | check_refused "unknown test marker"
printf '<!-- test: replace "x" "y" -->\n```bash\nbraid x\n```\n```bash\nbraid z\n```\n```text\nout\n```\n' \
  > selftest/doc.md
$EXTRACT emit selftest/out selftest/doc.md | grep -q "^2 command blocks to run, 0 skipped" \
  || fail "extractor: an unmarked command block is not run"
grep -qx "braid y" selftest/out/001.sh || fail "extractor: replace not applied"
echo "ok: the extractor refuses bad markers and commands hidden in text blocks"

# ---- the docs in reading order; any other Markdown file of docs/ after them ----
docs=(README.md)
for f in guide data training runs finetuning multinode config plan gpu; do docs+=("docs/$f.md"); done
for f in $(cd "$SRC" && ls docs/*.md); do
  case " ${docs[*]} " in *" $f "*) ;; *) docs+=("$f") ;; esac
done
(cd "$SRC" && $EXTRACT emit "$WORK/blocks" "${docs[@]}") > blocks.log 2>&1 || fail "docs: $(cat blocks.log)"
cat blocks.log

# ---- what the docs take as given ----
U=$WORK/user
mkdir -p "$U/bin" "$U/build" "$U/texts" "$U/models" "$U/chats" "$U/.fixture"
ln -s "$BRAID" "$U/bin/braid"
ln -s "$BRAID" "$U/build/braid"
cp -r "$SRC/configs" "$U/configs"
export PATH="$U/bin:$PATH"
cd "$U"
for f in GPL-3 Apache-2.0 MPL-2.0; do head -c 40000 "/usr/share/common-licenses/$f" > "texts/$f.txt"; done
# tools/quickstart.sh: data/quickstart, then a (short) run of configs/quickstart.yaml.
braid prepare --input texts --out data/quickstart --tokenizer bpe --vocab-size 512 > .fixture/log
braid train configs/quickstart.yaml --set train.steps=4 --set train.sample_tokens=20 >> .fixture/log

# A tiny random "TinyLlama": 2 steps on the texts encoded with a SentencePiece-style tokenizer,
# exported as an HF folder; the -Chat one adds Zephyr's template (as TinyLlama chat has).
braid prepare --input texts --out .fixture/sp_data --tokenizer "$SRC/tests/data/hf_tokenizers/llama2" >> .fixture/log
vocab=$(python3 -c "import json; print(json.load(open('.fixture/sp_data/meta.json'))['vocab_size'])")
cat > .fixture/tiny.yaml <<YAML
run: {name: tiny, dir: $U/.fixture/runs}
model: {family: llama, vocab_size: $vocab, context_length: 128, n_layer: 2, n_embd: 64, n_head: 4, n_kv_head: 2}
data: {dir: $U/.fixture/sp_data, micro_batch: 2, seq_len: 64}
train: {steps: 2, sample_tokens: 0, eval_interval: 0}
YAML
braid train .fixture/tiny.yaml >> .fixture/log
braid export .fixture/runs/tiny --out models/TinyLlama-1.1B >> .fixture/log
cp -r models/TinyLlama-1.1B models/TinyLlama-1.1B-Chat
python3 - "$SRC/tests/data/chat/reference.json" models/TinyLlama-1.1B-Chat/tokenizer_config.json <<'PY'
import json, sys
case = next(c for c in json.load(open(sys.argv[1]))["cases"] if c["name"] == "zephyr")
cfg = json.load(open(sys.argv[2]))
cfg["chat_template"] = case["chat_template"]
json.dump(cfg, open(sys.argv[2], "w"), indent=1)
PY
python3 - <<'PY'
import json
qa = [("What is a cat?", "A small animal."), ("What is a dog?", "A loyal animal."),
      ("What is the GPL?", "A software license.")]
with open("chats/chats.jsonl", "w") as f:
    for i in range(60):
        q, a = qa[i % len(qa)]
        f.write(json.dumps({"messages": [{"role": "system", "content": "Answer briefly."},
                                         {"role": "user", "content": q},
                                         {"role": "assistant", "content": a}]}) + "\n")
PY
# runs/chat: a short LoRA run of the chat model on that data.
braid prepare --input chats --out .fixture/chat_data --tokenizer models/TinyLlama-1.1B-Chat >> .fixture/log
cat > .fixture/chat.yaml <<YAML
run: {name: chat, dir: $U/runs}
lora: {rank: 4, alpha: 8, init_from: $U/models/TinyLlama-1.1B-Chat}
data: {dir: $U/.fixture/chat_data, micro_batch: 4, seq_len: 64}
train: {steps: 2, sample_tokens: 0, eval_interval: 0}
YAML
braid train .fixture/chat.yaml >> .fixture/log
echo "ok: the user's folder is ready"

# ---- run every block ----
n=0
while IFS=$'\t' read -r id where first; do
  n=$((n + 1))
  start=$(date +%s)
  # Ranks that mpirun starts run without the leak check under the sanitizers, as in the mpi_*
  # tests (Open MPI keeps allocations past MPI_Finalize; docs/guide.md).
  leaks=()
  if grep -q mpirun "$WORK/blocks/$id.sh"; then
    leaks=(ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0")
  fi
  set +e
  (cd "$U" && env "${leaks[@]}" timeout 300 bash -euo pipefail "$WORK/blocks/$id.sh") < /dev/null \
    > "$WORK/blocks/$id.log" 2>&1
  rc=$?
  set -e
  if [ $rc -ne 0 ]; then
    tail -30 "$WORK/blocks/$id.log" >&2
    fail "$where: the command block starting '$first' failed (exit $rc); its script: $WORK/blocks/$id.sh"
  fi
  echo "ok $where ($(( $(date +%s) - start )) s): $first"
done < "$WORK/blocks/index.tsv"
# Every block listed ran (a command that reads stdin, such as mpirun, must not eat the list).
want=$(grep -c . "$WORK/blocks/index.tsv")
[ $n -gt 0 ] && [ $n -eq "$want" ] || fail "$n command blocks ran, $want listed"
echo "ok: $n command blocks of the docs ran"
