#!/usr/bin/env bash
# Hostile and careless input: deep nesting, non-regular files, sizes that overflow, paths that
# are files, nonsense CLI values. Each is a clear message naming the culprit and exit 1 or 2,
# never a crash (exit >= 128), a hang (the ctest TIMEOUT), or an internal error (exit 3).
source "$(dirname "$0")/common.bash"
make_corpus
"$BRAID" prepare --input corpus --out data --tokenizer byte --val-fraction 0.1 > /dev/null
write_config "$WORK/data" good good.yaml
"$BRAID" train good.yaml --set train.steps=3 > /dev/null
"$BRAID" export runs/good --out hf/good > /dev/null
ck=runs/good/checkpoints/$(cat runs/good/checkpoints/latest)

# expect_user_error "<substring>" cmd...: exit 1 or 2 (not 3, not a signal), with the substring.
expect_user_error() {
  local want=$1; shift
  local out rc
  set +e
  out=$(timeout 60 "$@" 2>&1)
  rc=$?
  set -e
  [ $rc -eq 1 ] || [ $rc -eq 2 ] || fail "expected exit 1 or 2 from: $* (got $rc; output: $out)"
  echo "$out" | grep -qF -- "$want" || fail "expected '$want' in the error of: $*; got: $out"
  echo "ok (exit $rc): $want"
}
deep() { python3 -c "import sys; n=int(sys.argv[1]); print('['*n + ']'*n)" "$1"; }
deep_json_obj() { python3 -c "import sys; n=int(sys.argv[1]); print('{\"a\":'*n + '1' + '}'*n)" "$1"; }

# ---- JSON nested 100,000 levels, in every JSON file braid reads ----
# tokenizer file
deep_json_obj 100000 > deep_tokenizer.json
expect_user_error "nests JSON" "$BRAID" generate runs/good --tokenizer deep_tokenizer.json --tokens 2
# HF config.json
mkdir -p hf_deep && cp hf/good/model.safetensors hf_deep/ && deep_json_obj 100000 > hf_deep/config.json
expect_user_error "nests JSON" "$BRAID" eval hf_deep --data data/val.bin
# safetensors header
python3 - <<'PY'
import struct
h = ('{"a":' * 100000 + '1' + '}' * 100000).encode()
open('deep.safetensors', 'wb').write(struct.pack('<Q', len(h)) + h)
PY
mkdir -p hf_deep_st && cp hf/good/config.json hf_deep_st/ && mv deep.safetensors hf_deep_st/model.safetensors
expect_user_error "nests JSON" "$BRAID" eval hf_deep_st --data data/val.bin
# checkpoint manifest
cp -r runs/good runs/deepmanifest
deep_json_obj 100000 > "runs/deepmanifest/checkpoints/$(cat runs/deepmanifest/checkpoints/latest)/manifest.json"
# (the run directory itself skips an unreadable manifest as incomplete; the checkpoint directory
# names it directly)
expect_user_error "without a complete checkpoint" "$BRAID" eval runs/deepmanifest --data data/val.bin
expect_user_error "nests JSON" "$BRAID" eval \
    "runs/deepmanifest/checkpoints/$(cat runs/deepmanifest/checkpoints/latest)" --data data/val.bin
# a number too large for a double (found by fuzz_manifest: it used to end in std::terminate)
cp -r runs/good runs/hugenumber
m="runs/hugenumber/checkpoints/$(cat runs/hugenumber/checkpoints/latest)/manifest.json"
sed -i 's/"step": *\([0-9]*\)/"step": 1e400/' "$m"
expect_user_error "not valid JSON" "$BRAID" eval "$(dirname "$m")" --data data/val.bin
python3 - <<'PY'
import struct
h = b'{"a": {"dtype": "F32", "shape": [1e400], "data_offsets": [0, 4]}}'
open('huge.safetensors', 'wb').write(struct.pack('<Q', len(h)) + h + b'\0' * 4)
PY
mkdir -p hf_huge && cp hf/good/config.json hf_huge/ && mv huge.safetensors hf_huge/model.safetensors
expect_user_error "not valid JSON" "$BRAID" eval hf_huge --data data/val.bin
# meta.json only loses the entropy baseline; training still works
cp -r data data_deepmeta && deep_json_obj 100000 > data_deepmeta/meta.json
write_config "$WORK/data_deepmeta" deepmeta deepmeta.yaml
"$BRAID" train deepmeta.yaml --set train.steps=1 > /dev/null || fail "a hostile meta.json stopped training"
echo "ok: hostile meta.json ignored"
# YAML nested far too deep
{ echo "model:"; python3 -c "print('  x: ' + '['*5000 + ']'*5000)"; } > deep.yaml
expect_user_error "nested more than" "$BRAID" train deep.yaml

# ---- non-regular files: named pipes and directories never block, never mmap ----
mkfifo pipe.yaml pipe.bin pipe.json
expect_user_error "named pipe" "$BRAID" train pipe.yaml
cp -r data data_fifo && rm data_fifo/train.bin && mkfifo data_fifo/train.bin
write_config "$WORK/data_fifo" fifo fifo.yaml
expect_user_error "named pipe" "$BRAID" train fifo.yaml
expect_user_error "named pipe" "$BRAID" generate runs/good --tokenizer pipe.json --tokens 2
expect_user_error "named pipe" "$BRAID" eval runs/good --data pipe.bin
mkdir -p hf_fifo && cp hf/good/config.json hf_fifo/ && mkfifo hf_fifo/model.safetensors
expect_user_error "named pipe" "$BRAID" eval hf_fifo --data data/val.bin
mkdir dir.bin
expect_user_error "is a directory" "$BRAID" eval runs/good --data dir.bin
expect_user_error "is a directory" "$BRAID" train data

# ---- paths and sizes ----
expect_user_error "run.dir" "$BRAID" train good.yaml --set run.dir=/etc/passwd
expect_user_error "model.vocab_size" "$BRAID" train good.yaml --set model.vocab_size=2000000000
# Within the per-dimension limit but far beyond memory: refused before allocating, key named.
expect_user_error "GiB of memory" "$BRAID" train good.yaml --set model.vocab_size=16000000 \
  --set model.n_embd=4096 --set model.n_head=32
python3 - <<'PY'
import json, os
os.makedirs('hf_big', exist_ok=True)
c = json.load(open('hf/good/config.json'))
c['n_embd'] = 2147483647
json.dump(c, open('hf_big/config.json', 'w'))
PY
cp hf/good/model.safetensors hf_big/
expect_user_error "n_embd" "$BRAID" import hf_big --out runs/big
expect_user_error "import" "$BRAID" train good.yaml --set checkpoint.resume="$WORK/hf/good"

# ---- nonsense CLI values ----
expect_user_error "finite" "$BRAID" generate runs/good --temperature nan --tokens 2
expect_user_error "1e400" "$BRAID" generate runs/good --temperature 1e400 --tokens 2
expect_user_error "negative" "$BRAID" generate runs/good --seed -1 --tokens 2
expect_user_error "not in range" "$BRAID" generate runs/good --temperature -1 --tokens 2
expect_user_error "negative" "$BRAID" eval runs/good --data data/val.bin --seq-len -3
expect_user_error "negative" "$BRAID" eval runs/good --data data/val.bin --max-tokens -5
expect_user_error "negative" "$BRAID" plan --model gpt2-124m --seq -5

# ---- a duplicate BPE merge says what is wrong, without a source path ----
printf '{"type": "bpe", "merges": [[97, 98], [97, 98]]}' > dup.json
out=$("$BRAID" generate runs/good --tokenizer dup.json --tokens 2 2>&1 || true)
echo "$out" | grep -qF "duplicates merges[0]" || fail "duplicate merge message: $out"
echo "$out" | grep -q "\.cpp\|check failed" && fail "internal text leaked: $out"
echo "ok: duplicate merge"

# ---- export with a trailing slash; import --force replaces only after success ----
"$BRAID" export runs/good --out hf/slash/ > /dev/null
[ -f hf/slash/model.safetensors ] && [ -f hf/slash/tokenizer.json ] || fail "export to hf/slash/ wrote nothing"
[ ! -e hf/slash.tmp-braid ] || fail "temporary directory left behind"
echo "ok: export --out with a trailing slash"
"$BRAID" import hf/good --out runs/imported/ > /dev/null
before=$(find runs/imported -type f | sort | xargs sha256sum)
expect_user_error "n_embd" "$BRAID" import hf_big --out runs/imported/ --force
after=$(find runs/imported -type f | sort | xargs sha256sum)
[ "$before" = "$after" ] || fail "a failed import --force changed the existing run"
"$BRAID" import hf/good --out runs/imported/ --force > /dev/null
[ -f runs/imported/config.yaml ] || fail "import --force did not write the new run"
expect_user_error "contains the model" "$BRAID" export runs/good --out runs --force
echo "ok: import --force keeps the old run until the new one is whole"
echo "all hostile-input cases passed"
