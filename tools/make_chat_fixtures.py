#!/usr/bin/env python3
"""Stores what transformers' apply_chat_template gives for the chat templates braid renders
(tests/unit/test_data_chat.cpp compares text and token ids).

The templates are the ones the model families publish in their tokenizer_config.json (Llama 2
chat, Llama 3 Instruct, Mistral Instruct v0.1 and Mixtral, Qwen2 Instruct and plain ChatML,
Zephyr / TinyLlama chat; Llama 3.1 / 3.3 and 3.2 Instruct, Qwen2.5 Instruct, Mistral Instruct
v0.2 and v0.3), read from the constants of data/chat_template.cpp and data/chat_template_texts.h.
Llama 3.2's template writes today's date unless the caller passes date_string; its case pins
one (the case's "template_kwargs", which the test passes to braid too). The tokenizers are the tiny ones of tests/data/hf_tokenizers (made
by tools/make_hf_tokenizer_fixtures.py); Llama 3's gets its header tokens added and is stored
in tests/data/chat/llama3/.

Needs `pip install transformers tokenizers jinja2` (a venv, e.g. /tmp/venv-chat). Run from the
repository root:
    /tmp/venv-chat/bin/python tools/make_chat_fixtures.py
It rewrites tests/data/chat/reference.json and tests/data/chat/llama3/.
"""
import ast
import json
import os
import re

from tokenizers import AddedToken, Tokenizer
from transformers import PreTrainedTokenizerFast

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data")
OUT = os.path.join(ROOT, "chat")

def cxx_templates():
    """The template texts braid recognises: the string constants of data/chat_template.cpp
    (written there as the families publish them in tokenizer_config.json)."""
    src = ""
    for name in ("chat_template.cpp", "chat_template_texts.h"):
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", name)
        with open(path, encoding="utf-8") as f:
            src += f.read()
    out = {}
    for name, body in re.findall(r'constexpr std::string_view (k\w+) =\s*((?:"(?:[^"\\]|\\.)*"\s*)+);',
                                 src):
        out[name] = "".join(ast.literal_eval(lit) for lit in re.findall(r'"(?:[^"\\]|\\.)*"', body))
    # Templates held in pieces: constexpr std::string_view kName[] = {kPiece, ...};
    for name, body in re.findall(r'constexpr std::string_view (k\w+)\[\] = \{([^}]*)\}', src):
        out[name] = "".join(out[piece.strip()] for piece in body.split(","))
    return out


T = cxx_templates()
# Llama 2 publishes its newlines as the escape \n inside the template's strings.
LLAMA2, LLAMA3, ZEPHYR = T["kLlama2"].replace("\n", "\\n"), T["kLlama3"], T["kZephyr"]
MISTRAL = T["kMistralHead"] + T["kMistralV01Eos"] + T["kMistralTail"]
MIXTRAL = T["kMistralHead"] + T["kMixtralEos"] + T["kMistralTail"]
CHATML = "{% for message in messages %}" + T["kChatMlBody"]
QWEN2 = T["kQwen2Head"] + "You are a helpful assistant." + T["kQwen2Mid"] + T["kChatMlBody"]

# (case, tokenizer folder under tests/data, template, bos, eos[, template kwargs])
CASES = [
    ("llama2", "hf_tokenizers/llama2", LLAMA2, "<s>", "</s>"),
    ("mistral", "hf_tokenizers/mistral", MISTRAL, "<s>", "</s>"),
    ("mixtral", "hf_tokenizers/mistral", MIXTRAL, "<s>", "</s>"),
    ("zephyr", "hf_tokenizers/llama2", ZEPHYR, "<s>", "</s>"),
    ("llama3", "chat/llama3", LLAMA3, "<|begin_of_text|>", "<|eot_id|>"),
    ("qwen2", "hf_tokenizers/qwen2", QWEN2, None, "<|im_end|>"),
    ("chatml", "hf_tokenizers/qwen2", CHATML, None, "<|im_end|>"),
    ("llama3.1", "chat/llama3", T["kLlama31Pieces"], "<|begin_of_text|>", "<|eot_id|>"),
    ("llama3.2", "chat/llama3", T["kLlama32Pieces"], "<|begin_of_text|>", "<|eot_id|>",
     {"date_string": "05 Mar 2025"}),
    ("qwen2.5", "hf_tokenizers/qwen2", T["kQwen25"], None, "<|im_end|>"),
    ("mistral-v0.2", "hf_tokenizers/mistral", T["kMistralV02"], "<s>", "</s>"),
    ("mistral-v0.3", "hf_tokenizers/mistral", T["kMistralV03"], "<s>", "</s>"),
]


def m(role, content):
    return {"role": role, "content": content}


# (messages, add_generation_prompt)
CONVERSATIONS = [
    ([m("system", "You are terse."), m("user", "What is a cat?"), m("assistant", "A small animal.")], False),
    ([m("user", "Hello there"), m("assistant", "Hi! How can I help?")], False),
    ([m("system", "Answer in French."), m("user", " Two words, please. "),
      m("assistant", "Bonjour tout\n"), m("user", "More: caf\u00e9 \u00fcber"),
      m("assistant", "  le monde  ")], False),
    ([m("user", "first"), m("assistant", "one"), m("user", "second\n\nline"), m("assistant", "two")], False),
    ([m("user", "Write a haiku")], True),
    ([m("system", "Be brief."), m("user", "Why is the sky blue?")], True),
    ([m("user", "a"), m("assistant", "b"), m("user", "c")], True),
]


def llama3_tokenizer():
    base = os.path.join(ROOT, "hf_tokenizers", "llama3", "tokenizer.json")
    t = Tokenizer.from_file(base)
    t.add_special_tokens([AddedToken(c, normalized=False, special=True)
                          for c in ["<|start_header_id|>", "<|end_header_id|>"]])
    os.makedirs(os.path.join(OUT, "llama3"), exist_ok=True)
    t.save(os.path.join(OUT, "llama3", "tokenizer.json"), pretty=False)


def main():
    llama3_tokenizer()
    ref = {"cases": []}
    for name, folder, template, bos, eos, *extra in CASES:
        kwargs = extra[0] if extra else {}
        tok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(ROOT, folder, "tokenizer.json"),
                                      bos_token=bos, eos_token=eos)
        tok.chat_template = template
        case = {"name": name, "tokenizer": folder, "bos_token": bos, "eos_token": eos,
                "chat_template": template, "conversations": []}
        if kwargs:
            case["template_kwargs"] = kwargs
        for messages, gen in CONVERSATIONS:
            entry = {"messages": messages, "add_generation_prompt": gen}
            try:
                text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=gen,
                                               **kwargs)
                ids = tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=gen,
                                              return_dict=False, **kwargs)
                entry["text"], entry["ids"] = text, list(ids)
            except Exception as e:  # the template's raise_exception
                entry["error"] = str(e)
            case["conversations"].append(entry)
        ref["cases"].append(case)
    ref["transformers_version"] = __import__("transformers").__version__
    with open(os.path.join(OUT, "reference.json"), "w", encoding="utf-8") as f:
        json.dump(ref, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
