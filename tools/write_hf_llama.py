#!/usr/bin/env python3
"""Writes a Llama-shaped Hugging Face directory (config.json, bf16 safetensors shards and
model.safetensors.index.json) without any package: for tests and benchmarks that need a model
of a given shape and nothing else. Weights are zeros (sparse files, nothing written) or random
bf16 values of a trained model's size (|w| in [2^-7, 2^-5), norms 1).

python3 tools/write_hf_llama.py OUT --layers 22 --width 2048 --ffn 5632 --vocab 32000 \
    --heads 32 --kv-heads 4 --shards 24 --fill random
"""
import argparse
import json
import os
import struct

# bf16's high byte (sign and 7 exponent bits) forced to exponent 120 or 121: 2^-7 .. 2^-5.
_EXPONENT = bytes(((b & 0x80) | 0x3C) for b in range(256))


def _random_bf16(count):
    data = bytearray(os.urandom(2 * count))
    data[1::2] = data[1::2].translate(_EXPONENT)
    return data


def write_model(out, layers, C, F, V, shards, heads=8, kv_heads=None, fill="zeros"):
    kv_heads = kv_heads or heads
    kv = C // heads * kv_heads
    os.makedirs(out)
    json.dump({"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": V,
               "hidden_size": C, "intermediate_size": F, "num_hidden_layers": layers,
               "num_attention_heads": heads, "num_key_value_heads": kv_heads,
               "max_position_embeddings": 2048 if fill == "random" else 64,
               "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "torch_dtype": "bfloat16"},
              open(f"{out}/config.json", "w"))
    t = [("model.embed_tokens.weight", [V, C])]
    for i in range(layers):
        p = f"model.layers.{i}."
        t += [(p + "input_layernorm.weight", [C]), (p + "post_attention_layernorm.weight", [C])]
        t += [(p + "self_attn.q_proj.weight", [C, C]), (p + "self_attn.k_proj.weight", [kv, C]),
              (p + "self_attn.v_proj.weight", [kv, C]), (p + "self_attn.o_proj.weight", [C, C])]
        t += [(p + "mlp.gate_proj.weight", [F, C]), (p + "mlp.up_proj.weight", [F, C]),
              (p + "mlp.down_proj.weight", [C, F])]
    t += [("model.norm.weight", [C]), ("lm_head.weight", [V, C])]
    per = (len(t) + shards - 1) // shards
    wmap, total = {}, 0
    for s in range(shards):
        name = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        header, off, part = {}, 0, t[s * per:(s + 1) * per]
        for n, shape in part:
            size = 2
            for d in shape:
                size *= d
            header[n] = {"dtype": "BF16", "shape": shape, "data_offsets": [off, off + size]}
            off += size
            wmap[n] = name
        h = json.dumps(header).encode()
        h += b" " * ((8 - len(h) % 8) % 8)
        with open(f"{out}/{name}", "wb") as f:
            f.write(struct.pack("<Q", len(h)) + h)
            if fill == "zeros":
                f.truncate(8 + len(h) + off)  # zeros, without writing them
                continue
            for n, shape in part:
                count = header[n]["data_offsets"][1] // 2 - header[n]["data_offsets"][0] // 2
                if n.endswith("norm.weight"):
                    f.write(struct.pack("<H", 0x3F80) * count)
                else:
                    f.write(_random_bf16(count))
        total += off
    json.dump({"metadata": {"total_size": total}, "weight_map": wmap},
              open(f"{out}/model.safetensors.index.json", "w"))


if __name__ == "__main__":
    a = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    a.add_argument("out")
    a.add_argument("--layers", type=int, required=True)
    a.add_argument("--width", type=int, required=True)
    a.add_argument("--ffn", type=int, required=True)
    a.add_argument("--vocab", type=int, required=True)
    a.add_argument("--heads", type=int, default=8)
    a.add_argument("--kv-heads", type=int, default=None)
    a.add_argument("--shards", type=int, default=1)
    a.add_argument("--fill", choices=["zeros", "random"], default="zeros")
    o = a.parse_args()
    write_model(o.out, o.layers, o.width, o.ffn, o.vocab, o.shards, o.heads, o.kv_heads, o.fill)
