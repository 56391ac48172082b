#!/usr/bin/env python3
"""Makes tests/data/hf_variants_reference.safetensors: logits of tiny Llama-family models, as
transformers computes them, for the import test (tests/unit/test_hf_variants.cpp).

Each variant is a config.json as a Hugging Face model directory would hold it (Llama 2 /
TinyLlama, SmolLM with tied embeddings, Llama with linear, llama3 and yarn RoPE in both the
rope_scaling and the transformers-5 rope_parameters layouts, Mistral with a sliding window,
Qwen2 with q/k/v biases). Its weights are not stored: every tensor element is a pure function
of the tensor's name and the element's index (weight_value below, which the C++ test repeats
exactly), so the test makes the same model without Python. Stored per variant: the config,
the tensor names and shapes of the model's state dict, the input tokens, and the logits
(float32, computed in float64 by transformers then rounded).

Usage (needs `pip install torch transformers safetensors`; not run by ctest):
    python3 tools/make_hf_variants_reference.py [OUT]
        writes the reference file (default tests/data/hf_variants_reference.safetensors)
    python3 tools/make_hf_variants_reference.py --save DIR
        saves each variant with save_pretrained(max_shard_size="20KB") as DIR/<variant>:
        sharded directories written by transformers itself, for `braid import`
    python3 tools/make_hf_variants_reference.py --check VARIANT DIR
        loads DIR (e.g. a `braid export` of an import of that variant) with transformers and
        compares its logits with the reference; exits 1 on a mismatch
Made with torch 2.15.0 and transformers 5.24.0.
"""
import json
import math
import sys

import numpy as np
import torch
import transformers
from safetensors.numpy import save_file

MASK = (1 << 64) - 1


def fnv1a64(s):
    h = 0xCBF29CE484222325
    for b in s.encode():
        h = ((h ^ b) * 0x100000001B3) & MASK
    return h


def splitmix64(z):
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9 & MASK
    z = (z ^ (z >> 27)) * 0x94D049BB133111EB & MASK
    return z ^ (z >> 31)


def uniform(name, n):
    """n values in [-1, 1): 24-bit uniforms from (name, index), exact in float32."""
    key = fnv1a64(name)
    out = np.empty(n, dtype=np.float64)
    for e in range(n):
        z = splitmix64((key ^ ((e * 0x9E3779B97F4A7C15) & MASK)) & MASK)
        out[e] = 2.0 * ((z >> 40) / float(1 << 24)) - 1.0
    return out


def weight_value(name, shape):
    """The tensor `name` of `shape`, as float32: norms near 1, biases small, matrices scaled by
    1/sqrt(fan_in), embeddings by 1."""
    n = int(np.prod(shape))
    u = uniform(name, n)
    if name.endswith("norm.weight"):
        v = 1.0 + 0.25 * u
    elif name.endswith(".bias"):
        v = 0.25 * u
    elif name.endswith("embed_tokens.weight"):
        v = u
    else:
        v = u * (1.0 / math.sqrt(shape[-1])) * 1.5
    return v.astype(np.float32).reshape(shape)


BASE = {
    "vocab_size": 64,
    "hidden_size": 32,
    "intermediate_size": 48,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 128,
    "rms_norm_eps": 1e-5,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
    "torch_dtype": "float32",
}


def variant(model_type, arch, **keys):
    c = dict(BASE)
    c.update({"model_type": model_type, "architectures": [arch]})
    c.update(keys)
    return c


VARIANTS = {
    # Llama 2 / TinyLlama: grouped-query attention, the older rope_theta + rope_scaling null.
    "llama": variant("llama", "LlamaForCausalLM", rope_theta=10000.0, rope_scaling=None,
                     attention_bias=False, mlp_bias=False, pretraining_tp=1),
    # SmolLM: tied embeddings, no grouping, another theta.
    "smollm": variant("llama", "LlamaForCausalLM", rope_theta=100000.0, num_key_value_heads=4,
                      tie_word_embeddings=True),
    # Linear scaling in the legacy `type` spelling.
    "llama_linear": variant("llama", "LlamaForCausalLM", rope_theta=10000.0,
                            rope_scaling={"type": "linear", "factor": 2.0}),
    # Llama 3.1 / 3.2: llama3 scaling as those configs write it (rope_scaling).
    # A small theta and original length put the blended band inside the test's 12 positions.
    "llama3": variant("llama", "LlamaForCausalLM", rope_theta=100.0, head_dim=8,
                      rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                    "high_freq_factor": 4.0,
                                    "original_max_position_embeddings": 32}),
    # YaRN in the transformers-5 layout, with its attention factor from `factor`.
    "yarn": variant("llama", "LlamaForCausalLM",
                    rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                                     "original_max_position_embeddings": 32}),
    # Mistral: a sliding window shorter than the test sequence.
    "mistral": variant("mistral", "MistralForCausalLM", rope_theta=10000.0, sliding_window=4,
                       head_dim=8),
    # Qwen2 / 2.5: q/k/v biases, tied embeddings, the sliding-window keys present but off.
    "qwen2": variant("qwen2", "Qwen2ForCausalLM", rope_theta=1000000.0, rms_norm_eps=1e-6,
                     tie_word_embeddings=True, use_sliding_window=False, sliding_window=32768,
                     max_window_layers=2),
}

B, T = 2, 12


def build(cfg):
    """The variant's transformers model with the weights of weight_value, and its tensor list."""
    config = transformers.AutoConfig.for_model(**json.loads(json.dumps(cfg)))
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.eval()
    params = []
    with torch.no_grad():
        for pname, p in model.state_dict().items():
            if cfg["tie_word_embeddings"] and pname == "lm_head.weight":
                continue  # tied: the embedding's storage
            if pname.endswith("rotary_emb.inv_freq"):
                continue
            p.copy_(torch.from_numpy(weight_value(pname, list(p.shape))))
            params.append([pname, list(p.shape)])
    if cfg["tie_word_embeddings"]:
        assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    return model, params


def test_tokens(cfg):
    return torch.tensor([[(7 * i + 3 * b + 1) % cfg["vocab_size"] for i in range(T)] for b in range(B)])


def save_dirs(root):
    for name, cfg in VARIANTS.items():
        model, _ = build(cfg)
        model.save_pretrained(f"{root}/{name}", max_shard_size="20KB")
        print(f"saved {root}/{name}")


def check(variant, path, ref="tests/data/hf_variants_reference.safetensors"):
    from safetensors.numpy import load_file
    want = load_file(ref)[variant + "/logits"]
    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float64)
    model.eval()
    with torch.no_grad():
        got = model(test_tokens(VARIANTS[variant])).logits.float().numpy()
    err = float(np.abs(got - want).max())
    print(f"{variant}: {type(model).__name__} from {path}, largest logit error {err:.2e}")
    return err < 1e-4


def main(out):
    tensors, meta = {}, {"torch": torch.__version__, "transformers": transformers.__version__,
                         "variants": {}}
    for name, cfg in VARIANTS.items():
        model, params = build(cfg)
        tokens = test_tokens(cfg)
        with torch.no_grad():
            logits = model.double()(tokens).logits.float()
        tensors[name + "/tokens"] = tokens.to(torch.int32).numpy()
        tensors[name + "/logits"] = logits.numpy()
        meta["variants"][name] = {"config": cfg, "params": params}
        print(f"{name}: {len(params)} tensors, |logits| <= {logits.abs().max():.3f}")
    save_file(tensors, out, metadata={"reference": json.dumps(meta)})


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--save":
        save_dirs(sys.argv[2])
    elif len(sys.argv) > 3 and sys.argv[1] == "--check":
        sys.exit(0 if check(sys.argv[2], sys.argv[3]) else 1)
    else:
        main(sys.argv[1] if len(sys.argv) > 1 else "tests/data/hf_variants_reference.safetensors")
