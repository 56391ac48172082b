#!/usr/bin/env python3
"""Checks that Hugging Face loads braid's exported tokenizer and encodes like braid.

Usage: python3 tools/check_hf_tokenizer.py BRAID_BINARY RUN_DIR EXPORT_DIR
Needs `pip install transformers tokenizers` (not needed by the build or ctest).

For each sample text, braid's ids come from `braid generate RUN_DIR --prompt TEXT --ids`
(its first output line is the encoded prompt) and HF's from
AutoTokenizer.from_pretrained(EXPORT_DIR).encode(TEXT). Exit 1 on any difference.
"""
import subprocess
import sys

from transformers import AutoTokenizer

SAMPLES = [
    "The licence grants you the right to copy.",
    "It's, we'll, they've, I'd: contractions and   runs of  spaces\n\n\tand tabs",
    "Numbers 1 22 333 4444 55555 and 3.14159",
    "Unicode: héllo wörld, naïve café, “curly quotes” — dashes…",
    "日本語のテキストと中文文本, Ελληνικά, русский текст",
    "emoji 🙂🚀 and symbols ©®™ ±×÷",
    "a<|endoftext|>b",
    "  leading spaces and trailing  ",
]


def braid_ids(braid, run, text):
    out = subprocess.run([braid, "generate", run, "--prompt", text, "--tokens", "1", "--ids",
                          "--temperature", "0"], check=True, capture_output=True, text=True)
    return [int(x) for x in out.stdout.splitlines()[0].split()]


def main():
    braid, run, export = sys.argv[1:4]
    tok = AutoTokenizer.from_pretrained(export)
    print(f"loaded {type(tok).__name__} from {export}: vocab {len(tok)}, eos {tok.eos_token!r}")
    bad = 0
    for text in SAMPLES:
        a = braid_ids(braid, run, text)
        b = tok.encode(text, add_special_tokens=False)
        back = tok.decode(b)
        ok = a == b and back == text
        bad += not ok
        print(f"{'same' if ok else 'DIFF'} {len(a):3d} ids  {text[:40]!r}")
        if not ok:
            print(f"   braid {a}\n   hf    {b}\n   hf decode {back!r}")
    print(f"{len(SAMPLES) - bad}/{len(SAMPLES)} samples encode to the same ids")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
