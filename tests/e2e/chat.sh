#!/usr/bin/env bash
# Chat data end to end: JSONL `messages` prepared with a model folder whose tokenizer_config.json
# holds a ChatML template (ids as transformers' apply_chat_template gives them, assistant turns
# trained), a tiny Llama trained on it, and `braid generate --chat` rendering the prompt with the
# template and stopping at the end-of-turn token; bad chat data and an unknown template refused.
source "$(dirname "$0")/common.bash"
REF=$SRC/tests/data/chat/reference.json
mkdir -p model jsonl
cp "$SRC/tests/data/hf_tokenizers/qwen2/tokenizer.json" model/
python3 - "$REF" <<'PY'
import json, sys
case = next(c for c in json.load(open(sys.argv[1]))["cases"] if c["name"] == "chatml")
json.dump({"bos_token": case["bos_token"], "eos_token": case["eos_token"],
           "chat_template": case["chat_template"]}, open("model/tokenizer_config.json", "w"))
with open("jsonl/chat.jsonl", "w") as f:
    for i in range(300):
        f.write(json.dumps({"messages": [{"role": "user", "content": f"say {i % 7}"},
                                         {"role": "assistant", "content": "ok"}]}) + "\n")
PY
"$BRAID" prepare --input jsonl --out data --tokenizer model --val-fraction 0.05 > prep.log
grep -q "loss mask   300 JSONL samples" prep.log || fail "no loss-mask summary: $(cat prep.log)"
VOCAB=$(python3 -c "import json; print(json.load(open('data/meta.json'))['vocab_size'])")
cat > chat.yaml <<YAML
run: {name: chat, dir: $WORK/runs}
model: {family: llama, vocab_size: $VOCAB, context_length: 64, n_layer: 1, n_embd: 32, n_head: 4, n_kv_head: 2}
data: {dir: $WORK/data, micro_batch: 8, seq_len: 64, seed: 1, train_on: completions}
optim: {lr: 0.01, warmup_steps: 5}
train: {steps: 120, log_interval: 40, eval_interval: 0, sample_tokens: 0, peak_tflops: 1.0}
checkpoint: {interval: 0, keep_last: 1}
YAML
"$BRAID" train chat.yaml > train.log || fail "training on chat data: $(tail -5 train.log)"

# The prompt ids are the template's (reference: apply_chat_template with the generation prompt).
"$BRAID" generate runs/chat --chat --prompt "Write a haiku" --ids --temperature 0 --tokens 20 > ids.txt
python3 - "$REF" <<'PY' || fail "generate --chat prompt ids or stop: $(cat ids.txt)"
import json, sys
case = next(c for c in json.load(open(sys.argv[1]))["cases"] if c["name"] == "chatml")
want = next(c["ids"] for c in case["conversations"]
            if c["add_generation_prompt"] and c["messages"][0]["content"] == "Write a haiku")
prompt, reply = [list(map(int, l.split())) for l in open("ids.txt").read().splitlines()]
assert prompt == want, (prompt, want)
im_end = json.load(open("model/tokenizer.json"))["added_tokens"]
im_end = next(t["id"] for t in im_end if t["content"] == "<|im_end|>")
assert reply[-1] == im_end and len(reply) < 20, reply  # stopped at the end of the turn
PY
reply=$("$BRAID" generate runs/chat --chat --prompt "say 3" --temperature 0 --tokens 20)
[ "$reply" = "ok" ] || fail "generate --chat replied '$reply', expected 'ok' alone"
expect_fail "--system needs --chat" "$BRAID" generate runs/chat --system hi --prompt x
echo "ok: chat data trains, generate --chat renders the template and stops at <|im_end|>"

# ---- bad chat data and templates: file:line or the file, nothing written ----
echo '{"messages": [{"role": "user", "content": "hi"}]}' > jsonl/chat.jsonl
expect_fail "chat.jsonl:1: the last message is from the user" \
  "$BRAID" prepare --input jsonl --out bad --tokenizer model
python3 -c "
import json; c = json.load(open('model/tokenizer_config.json'))
c['chat_template'] = '{% for m in messages %}{{ m.content }}{% endfor %}'
json.dump(c, open('model/tokenizer_config.json', 'w'))"
echo '{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}' > jsonl/chat.jsonl
expect_fail "the chat template is not one braid can render" \
  "$BRAID" prepare --input jsonl --out bad --tokenizer model
expect_fail "chat.jsonl:1: chat data ('messages') is rendered by the model's chat template" \
  "$BRAID" prepare --input jsonl --out bad --tokenizer byte
[ ! -e bad ] || fail "a refused prepare left its output folder"
expect_fail "has no chat template" "$BRAID" generate runs/chat --chat --prompt hi \
  --tokenizer "$SRC/tests/data/hf_tokenizers/qwen2"
echo "ok: bad chat data and unknown templates are refused"
