#!/usr/bin/env python3
"""PyTorch's CPU training of the model tools/bench_train.cpp trains, for a side-by-side
tokens/s comparison (tools/bench_vs_torch.sh runs both).

The model is braid's gpt2 family: learned positions, pre-LayerNorm blocks with biases, GELU
(tanh), causal attention (scaled_dot_product_attention), final LayerNorm, LM head tied to the
token embedding, no dropout. AdamW (betas 0.9/0.95, weight decay 0.1 on matrices but the position table, as braid's defaults), global
grad-norm clip at 1.0, random tokens, one optimizer step per batch. fp32 runs in f32; bf16 runs
the forward and loss under torch.autocast(cpu, bfloat16) with f32 weights and AdamW state
(PyTorch's mixed-precision recipe).

  python3 tools/bench_torch.py [--vocab 8192] [--ctx 256] [--layers 6] [--width 512]
                               [--heads 8] [--batch 8] [--steps 6] [--warmup 2]
                               [--threads 2] [--precision fp32|bf16|both]
"""
import argparse
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(width, eps=1e-5)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.ln2 = nn.LayerNorm(width, eps=1e-5)
        self.fc1 = nn.Linear(width, 4 * width)
        self.fc2 = nn.Linear(4 * width, width)

    def forward(self, x):  # x: (B, T, C)
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        shape = (B, T, self.heads, C // self.heads)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))  # (B, H, T, D)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(B, T, C))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab, ctx, layers, width, heads):
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(ctx, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width, eps=1e-5)
        for p in self.parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, tokens, targets):  # tokens, targets: (B, T)
        pos = torch.arange(tokens.shape[1])
        x = self.wte(tokens) + self.wpe(pos)
        for b in self.blocks:
            x = b(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # tied head: (B, T, V)
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def run(args, precision):
    torch.manual_seed(0)
    model = GPT(args.vocab, args.ctx, args.layers, args.width, args.heads)
    # braid's default: no decay on vectors and the position table.
    named = list(model.named_parameters())
    decay = [p for n, p in named if p.dim() >= 2 and not n.startswith("wpe")]
    no_decay = [p for n, p in named if p.dim() < 2 or n.startswith("wpe")]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
        lr=1e-4, betas=(0.9, 0.95), eps=1e-8)
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, args.vocab, (args.batch, args.ctx), generator=g)
    targets = torch.randint(0, args.vocab, (args.batch, args.ctx), generator=g)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = model(tokens, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.item()

    for _ in range(args.warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    sec = (time.perf_counter() - t0) / args.steps
    return sec, loss


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", choices=["fp32", "bf16", "both"], default="both")
    args = ap.parse_args()
    if min(args.vocab, args.ctx, args.layers, args.width, args.heads, args.batch, args.steps,
           args.threads) <= 0 or args.warmup < 0 or args.width % args.heads:
        sys.exit("bench_torch: sizes must be positive and --width a multiple of --heads")
    torch.set_num_threads(args.threads)
    tokens_per_step = args.batch * args.ctx
    print(f"bench_torch: torch {torch.__version__}, gpt2 vocab {args.vocab} ctx {args.ctx} "
          f"layers {args.layers} width {args.width} heads {args.heads}, batch {args.batch} x "
          f"{args.ctx}, AdamW, {torch.get_num_threads()} threads")
    print(f"{'precision':<14} {'step time (s)':>14} {'tokens/s':>10} {'last loss':>10}")
    for p in (["fp32", "bf16"] if args.precision == "both" else [args.precision]):
        sec, loss = run(args, p)
        label = "bf16 autocast" if p == "bf16" else p
        print(f"{label:<14} {sec:>14.3f} {tokens_per_step / sec:>10.0f} {loss:>10.4f}",
              flush=True)


if __name__ == "__main__":
    main()
