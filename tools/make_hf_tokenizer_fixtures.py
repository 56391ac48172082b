#!/usr/bin/env python3
"""Trains tiny Hugging Face tokenizers in the styles braid reads and stores the ids the
`tokenizers` library gives for a held-out text (tests/unit/test_data_hf_bpe.cpp compares).

Styles: llama2 (BPE + byte_fallback, Prepend/Replace "▁" normalizers), mistral (the same model
with the Metaspace pre-tokenizer), llama3 (Split with Llama 3's regex, ByteLevel, ignore_merges)
and qwen2 (NFC, Split with Qwen2's regex, ByteLevel).

Needs `pip install tokenizers` (a venv, e.g. /tmp/venv-tok). Run from the repository root:
    /tmp/venv-tok/bin/python tools/make_hf_tokenizer_fixtures.py
It rewrites tests/data/hf_tokenizers/{llama2,mistral,llama3,qwen2}/ and reference.json.
"""
import json
import os

from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers,
                        pre_tokenizers, processors, trainers)

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                    "hf_tokenizers")
LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"
             r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
            r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPACE = "\u2581"


def read(name):
    with open(os.path.join(HERE, name), encoding="utf-8", newline="") as f:
        return f.read()


def spm_model(corpus):
    """SentencePiece-style BPE: <unk> <s> </s>, the 256 <0xNN> tokens, then learned pieces."""
    t = Tokenizer(models.BPE(unk_token="<unk>"))
    t.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="always")
    # A small alphabet, so rare characters (CJK, emoji) take the byte fallback.
    tr = trainers.BpeTrainer(vocab_size=420, special_tokens=["<unk>"], limit_alphabet=120,
                             show_progress=False)
    t.train_from_iterator(corpus.splitlines(), tr)
    trained = json.loads(t.to_str())["model"]
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for tok, _ in sorted(trained["vocab"].items(), key=lambda kv: kv[1]):
        if tok not in vocab:
            vocab[tok] = len(vocab)
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in trained["merges"]]
    return models.BPE(vocab, merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True)


def spm_added(t):
    t.add_special_tokens([AddedToken(c, normalized=False, special=True)
                          for c in ["<unk>", "<s>", "</s>"]])
    t.add_tokens([AddedToken("<|tool|>", lstrip=True, rstrip=True, normalized=False),
                  AddedToken("braidtok", normalized=True)])


def llama2(corpus):
    t = Tokenizer(spm_model(corpus))
    t.normalizer = normalizers.Sequence([normalizers.Prepend(SPACE),
                                         normalizers.Replace(" ", SPACE)])
    t.decoder = decoders.Sequence([decoders.Replace(SPACE, " "), decoders.ByteFallback(),
                                   decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    spm_added(t)
    t.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                     special_tokens=[("<s>", 1)])
    return t, {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": None,
               "add_bos_token": True, "add_eos_token": False}


def mistral(corpus):
    t = Tokenizer(spm_model(corpus))
    t.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="first",
                                               split=False)
    t.decoder = decoders.Sequence([decoders.Replace(SPACE, " "), decoders.ByteFallback(),
                                   decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    spm_added(t)
    return t, {"bos_token": {"content": "<s>", "special": True}, "eos_token": "</s>",
               "add_bos_token": True, "add_eos_token": True}


def byte_level(corpus, regex, specials, normalizer, ignore_merges):
    t = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    t.normalizer = normalizer
    t.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    t.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=700, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                             show_progress=False)
    t.train_from_iterator(corpus.splitlines(keepends=True), tr)
    t.add_special_tokens([AddedToken(c, normalized=False, special=True) for c in specials])
    return t


def llama3(corpus):
    t = byte_level(corpus, LLAMA3_RE, ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"],
                   None, True)
    t.post_processor = processors.TemplateProcessing(
        single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B",
        special_tokens=[("<|begin_of_text|>", t.token_to_id("<|begin_of_text|>"))])
    return t, {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>"}


def qwen2(corpus):
    t = byte_level(corpus, QWEN2_RE, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                   normalizers.NFC(), False)
    return t, {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
               "add_bos_token": False}


def main():
    corpus, heldout = read("corpus.txt"), read("heldout.txt")
    cases = [heldout, " leading space", "two  spaces  ", "</s>at start", "a<|tool|>b",
             "\u00e9\u0065\u0301", "\n\n\t x", ""]
    reference = {"cases": cases, "tokenizers_version": __import__("tokenizers").__version__}
    for name, make in [("llama2", llama2), ("mistral", mistral), ("llama3", llama3),
                       ("qwen2", qwen2)]:
        tok, config = make(corpus)
        os.makedirs(os.path.join(HERE, name), exist_ok=True)
        tok.save(os.path.join(HERE, name, "tokenizer.json"), pretty=False)
        with open(os.path.join(HERE, name, "tokenizer_config.json"), "w") as f:
            json.dump(config, f, indent=1)
        ref = []
        for text in cases:
            ids = tok.encode(text, add_special_tokens=False).ids
            ref.append({"ids": ids, "with_specials": tok.encode(text).ids,
                        "decoded": tok.decode(ids, skip_special_tokens=False)})
        reference[name] = ref
    with open(os.path.join(HERE, "reference.json"), "w", encoding="utf-8") as f:
        json.dump(reference, f, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
