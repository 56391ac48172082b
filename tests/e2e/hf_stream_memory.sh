#!/usr/bin/env bash
# A sharded HF checkpoint is read tensor by tensor: importing a ~130 MB (f32) Llama whose
# bf16 shards the test writes (zeros, as sparse files) peaks at about the model plus one
# tensor, not at twice the model as reading every tensor up front would.
source "$(dirname "$0")/common.bash"
python3 "$SRC/tools/write_hf_llama.py" big --layers 8 --width 512 --ffn 1536 --vocab 8192 --shards 4
python3 "$SRC/tools/write_hf_llama.py" tiny --layers 1 --width 64 --ffn 128 --vocab 256 --shards 2
peak_kib() {  # the largest resident set of the command, KiB
  python3 -c "import resource,subprocess,sys; subprocess.run(sys.argv[1:],check=True,stdout=subprocess.DEVNULL); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)" "$@"
}
tiny=$(peak_kib "$BRAID" import tiny --out runs/tiny)
big=$(peak_kib "$BRAID" import big --out runs/big)
# f32 parameters: 8192*512*2 + 8*(4*512*512 + 3*512*1536) = 35.4 M -> 138 MiB.
model_kib=$(( (8192*512*2 + 8*(4*512*512 + 3*512*1536)) * 4 / 1024 ))
extra=$(( big - tiny - model_kib ))
echo "import peak: tiny model $tiny KiB, big model $big KiB; above the f32 model: $extra KiB"
# Everything at once would add the whole bf16 file (69 MiB) and its f32 copy; one tensor at a
# time adds the largest (the 8192 x 512 embedding: 8 MiB bf16, 16 MiB f32).
[ "$extra" -lt $(( 48 * 1024 )) ] || fail "import held $extra KiB beyond the model (expected about one tensor)"
grep -q '"n_layer": *8' runs/big/checkpoints/step-00000000/manifest.json || fail "big import"
echo "ok: sharded import streams tensor by tensor"
