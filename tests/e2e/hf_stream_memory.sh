#!/usr/bin/env bash
# A sharded HF checkpoint is read tensor by tensor: importing a ~130 MB (f32) Llama whose
# bf16 shards the test writes (zeros, as sparse files) peaks at about the model plus one
# tensor, not at twice the model as reading every tensor up front would.
source "$(dirname "$0")/common.bash"
python3 - <<'PY'
import json, os, struct
def write_model(out, layers, C, F, V, shards):
    os.makedirs(out)
    json.dump({"model_type": "llama", "vocab_size": V, "hidden_size": C, "intermediate_size": F,
               "num_hidden_layers": layers, "num_attention_heads": 8, "num_key_value_heads": 8,
               "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "torch_dtype": "bfloat16"},
              open(f"{out}/config.json", "w"))
    t = [("model.embed_tokens.weight", [V, C])]
    for i in range(layers):
        p = f"model.layers.{i}."
        t += [(p + "input_layernorm.weight", [C]), (p + "post_attention_layernorm.weight", [C])]
        t += [(p + f"self_attn.{n}_proj.weight", [C, C]) for n in "qkvo"]
        t += [(p + "mlp.gate_proj.weight", [F, C]), (p + "mlp.up_proj.weight", [F, C]),
              (p + "mlp.down_proj.weight", [C, F])]
    t += [("model.norm.weight", [C]), ("lm_head.weight", [V, C])]
    per = (len(t) + shards - 1) // shards
    wmap = {}
    for s in range(shards):
        name = f"model-{s+1:05d}-of-{shards:05d}.safetensors"
        header, off = {}, 0
        for n, shape in t[s * per:(s + 1) * per]:
            size = 2
            for d in shape: size *= d
            header[n] = {"dtype": "BF16", "shape": shape, "data_offsets": [off, off + size]}
            off += size
            wmap[n] = name
        h = json.dumps(header).encode()
        h += b" " * ((8 - len(h) % 8) % 8)
        with open(f"{out}/{name}", "wb") as f:
            f.write(struct.pack("<Q", len(h)) + h)
            f.truncate(8 + len(h) + off)  # zeros, without writing them
    json.dump({"metadata": {}, "weight_map": wmap}, open(f"{out}/model.safetensors.index.json", "w"))
write_model("big", layers=8, C=512, F=1536, V=8192, shards=4)
write_model("tiny", layers=1, C=64, F=128, V=256, shards=2)
PY
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
