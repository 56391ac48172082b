#!/usr/bin/env python3
"""Writes tests/data/bnb_llama/: a tiny Llama (1 block, width 64, FFN 128, vocabulary 256) as
transformers saves a model loaded with BitsAndBytesConfig(load_in_4bit=True,
bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True): every linear of the block stored as
bitsandbytes' Linear4bit state (`weight` u8 codes, `weight.absmax` u8 nested codes,
`weight.quant_map`, `weight.nested_absmax`, `weight.nested_quant_map`,
`weight.quant_state.bitsandbytes__nf4` JSON bytes), embeddings, norms and head in f32; and
tests/data/bnb_llama_dequant.safetensors: bitsandbytes' dequantize_4bit of each linear, for
tests/unit/test_bnb_checkpoint.cpp (ctest never runs this script).

Needs `pip install bitsandbytes numpy` (torch is not imported). The quantiser is
tools/make_nf4_reference.py's (bitsandbytes' quantize_4bit step for step, then its C++ 8-bit
quantiser for the absmax values); the dequantisation is bitsandbytes' C++ CPU kernels, as
dequantize_4bit runs them: the absmax values read back (cdequantize_blockwise_cpu_fp32, plus the
offset), then cdequantize_blockwise_cpu_nf4_fp32.
"""
import ctypes as ct
import importlib.metadata
import importlib.util
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_nf4_reference import (NF4, create_dynamic_map, ptr, quantize_nf4,  # noqa: E402
                                write_safetensors)


def quantise(lib, w, dyn):
    """Linear4bit's saved state of w (out, in), and dequantize_4bit's output."""
    out_f, in_f = w.shape
    nf4, absmax = quantize_nf4(w, 64)
    offset = np.float32(absmax.mean(dtype=np.float32))
    centred = (absmax - offset).astype(np.float32)
    nb2 = -(centred.size // -256)
    qabs = np.empty(centred.size, dtype=np.uint8)
    absmax2 = np.empty(nb2, dtype=np.float32)
    lib.cquantize_blockwise_cpu_fp32(ptr(dyn), ptr(centred), ptr(absmax2), ptr(qabs),
                                     ct.c_longlong(256), ct.c_longlong(centred.size))
    back = np.empty(centred.size, dtype=np.float32)
    lib.cdequantize_blockwise_cpu_fp32(ptr(dyn), ptr(qabs), ptr(absmax2), ptr(back),
                                       ct.c_longlong(256), ct.c_longlong(centred.size))
    back = (back + offset).astype(np.float32)
    deq = np.empty(w.size, dtype=np.float32)
    lib.cdequantize_blockwise_cpu_nf4_fp32(ptr(nf4), ptr(back), ptr(deq), ct.c_longlong(64),
                                           ct.c_longlong(out_f), ct.c_longlong(in_f))
    state = {"quant_type": "nf4", "blocksize": 64, "dtype": "float32", "shape": [out_f, in_f],
             "nested_blocksize": 256, "nested_dtype": "float32", "nested_offset": float(offset)}
    packed = np.frombuffer(json.dumps(state).encode(), dtype=np.uint8)
    tensors = {"": nf4.reshape(-1, 1), ".absmax": qabs, ".quant_map": NF4.copy(),
               ".nested_absmax": absmax2, ".nested_quant_map": dyn.copy(),
               ".quant_state.bitsandbytes__nf4": packed}
    return tensors, deq.reshape(out_f, in_f)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/data"
    where = os.path.dirname(importlib.util.find_spec("bitsandbytes").origin)
    lib = ct.CDLL(os.path.join(where, "libbitsandbytes_cpu.so"))
    dyn = create_dynamic_map(True)
    rng = np.random.default_rng(5)
    C, F, V = 64, 128, 256
    model, reference = {}, {}
    model["model.embed_tokens.weight"] = (rng.standard_normal((V, C)) * 0.02).astype(np.float32)
    p = "model.layers.0."
    model[p + "input_layernorm.weight"] = np.ones(C, dtype=np.float32)
    model[p + "post_attention_layernorm.weight"] = np.ones(C, dtype=np.float32)
    shapes = {"self_attn.q_proj": (C, C), "self_attn.k_proj": (C, C), "self_attn.v_proj": (C, C),
              "self_attn.o_proj": (C, C), "mlp.gate_proj": (F, C), "mlp.up_proj": (F, C),
              "mlp.down_proj": (C, F)}
    for name, shape in shapes.items():
        w = (rng.standard_normal(shape) * 0.05).astype(np.float32)
        state, deq = quantise(lib, w, dyn)
        for suffix, t in state.items():
            model[p + name + ".weight" + suffix] = t
        reference[p + name + ".weight"] = deq
    model["model.norm.weight"] = np.ones(C, dtype=np.float32)
    model["lm_head.weight"] = (rng.standard_normal((V, C)) * 0.02).astype(np.float32)
    d = os.path.join(out, "bnb_llama")
    os.makedirs(d, exist_ok=True)
    write_safetensors(os.path.join(d, "model.safetensors"), model)
    json.dump({"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": V,
               "hidden_size": C, "intermediate_size": F, "num_hidden_layers": 1,
               "num_attention_heads": 4, "num_key_value_heads": 4,
               "max_position_embeddings": 64, "rms_norm_eps": 1e-5,
               "tie_word_embeddings": False, "torch_dtype": "float32",
               "quantization_config": {
                   "quant_method": "bitsandbytes", "load_in_4bit": True, "load_in_8bit": False,
                   "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": True,
                   "bnb_4bit_compute_dtype": "float32", "bnb_4bit_quant_storage": "uint8"}},
              open(os.path.join(d, "config.json"), "w"), indent=1)
    write_safetensors(os.path.join(out, "bnb_llama_dequant.safetensors"), reference)
    print(f"wrote {d} and bnb_llama_dequant.safetensors: bitsandbytes "
          f"{importlib.metadata.version('bitsandbytes')}")


if __name__ == "__main__":
    main()
