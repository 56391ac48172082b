#!/usr/bin/env python3
"""Checks a braid LoRA adapter with PyPI peft + transformers (not part of ctest).

usage: check_peft.py BASE_HF_DIR ADAPTER_DIR MERGED_HF_DIR

BASE_HF_DIR: the model the LoRA run started from (lora.init_from, e.g. `braid export` output);
ADAPTER_DIR: <run>/adapter (adapter_model.safetensors + adapter_config.json);
MERGED_HF_DIR: `braid merge-lora <run> --out DIR`.
PEFT loads the adapter onto the base (PeftModel.from_pretrained, so names, shapes and config
keys must be PEFT's); its logits on random tokens must equal the braid-merged model's, and
differ from the base's (the adapter is really applied). Exit 0 when all hold.
"""
import sys

import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM


def main() -> int:
    base_dir, adapter_dir, merged_dir = sys.argv[1:4]
    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(base_dir, torch_dtype=torch.float32).eval()
    vocab = base.config.vocab_size
    n_pos = getattr(base.config, "n_positions", None) or base.config.max_position_embeddings
    tokens = torch.randint(0, vocab, (2, min(16, n_pos)))
    with torch.no_grad():
        base_logits = base(tokens).logits.clone()
        peft = PeftModel.from_pretrained(base, adapter_dir).eval()
        lora_logits = peft(tokens).logits
        merged = AutoModelForCausalLM.from_pretrained(merged_dir, torch_dtype=torch.float32).eval()
        merged_logits = merged(tokens).logits
    diff = (lora_logits - merged_logits).abs().max().item()
    moved = (lora_logits - base_logits).abs().max().item()
    print(f"peft: {type(peft).__name__} on {base.config.model_type}; "
          f"max |peft - braid merged| = {diff:.3e}; max |peft - base| = {moved:.3e}")
    ok = diff < 1e-4 and moved > 1e-3
    print("ok" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
