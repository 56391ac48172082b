#!/usr/bin/env python3
"""Writes tests/data/reference_{gpt2,llama}.safetensors: PyTorch's answers for braid's models.

An implementation of braid's two model families written here from the architecture alone (no
braid code is used or imported), run in float64 on a tiny configuration with deterministic
weights, a fixed token batch and fixed targets. Each fixture holds:

  tokens, targets            (B, T) i32
  init/<param>               the starting weights (f32; the float64 run starts from exactly these)
  logits                     (B, T, V) of the starting weights
  grad/<param>               the gradient of the mean cross-entropy at the starting weights
  <schedule>/<param>         (10, *shape): row k-1 is the weights after optimizer step k, for
                             schedule "cosine" (linear warmup, then cosine decay) and "linear"
                             (warmup, then linear decay)
  __metadata__["reference"]  JSON: the model and optimizer settings, the starting loss, and per
                             step of each schedule the learning rate, the loss and gradient norm
                             before the step and whether clipping scaled the gradients; also
                             which parameters are in the no-weight-decay group, and
                             "zero_grad_ranges": the elements whose gradient is exactly zero in
                             exact arithmetic (GPT-2's key bias: q . (k_j + b) shifts every score
                             of a query by the same q . b, which softmax ignores). There f32
                             rounding noise (~1e-9) is of the order of Adam's eps and moves the
                             weight by a fraction of lr per step, harmlessly (the output does not
                             depend on it) but unlike the float64 run, so the test leaves those
                             elements out of the weight comparison.

The ten steps train on the same batch with torch.optim.AdamW (two parameter groups: weight decay
0.1 and 0) driven by torch.optim.lr_scheduler (LinearLR warmup, then CosineAnnealingLR or
LinearLR decay, in a SequentialLR), the gradients clipped by torch.nn.utils.clip_grad_norm_ at a
max norm that clips in some steps and not others (asserted below). tests/unit/test_reference.cpp
compares braid (f32) against these files; no Python runs in the build or in ctest.

What the implementation follows (braid's documented conventions):
  gpt2:  tied token embedding / LM head, learned positions, pre-LayerNorm blocks, fused c_attn
         (q, k, v columns in that order), GELU in its tanh form, biases everywhere.
  llama: RMSNorm (eps inside the root), rotary embedding in the "rotate half" layout (pairs
         (i, i + D/2), frequency theta^(-2i/D)), grouped-query attention (query head h reads
         kv head h // (n_head / n_kv_head)), SwiGLU MLP, untied LM head, no biases.
  Linear weights are (out, in); attention is causal with scale 1/sqrt(head_dim).
  No weight decay for 1-D tensors and names containing "bias", "norm", "ln_" or "wpe"
  (optim.no_decay's default).

Regenerate (needs PyPI torch, numpy and safetensors; the CPU wheel is enough):
  python3 -m venv /tmp/refenv && /tmp/refenv/bin/pip install torch numpy safetensors
  /tmp/refenv/bin/python tools/make_reference.py            # writes tests/data/reference_*.safetensors
The output is deterministic; rerunning gives the same files.
"""

import argparse
import json
import math
import os

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.numpy import save_file

torch.set_default_dtype(torch.float64)

B, T = 2, 8
STEPS = 10
NO_DECAY = ["bias", "norm", "ln_", "wpe"]

MODELS = {
    "gpt2": dict(family="gpt2", vocab_size=32, context_length=T, n_layer=2, n_embd=8, n_head=2,
                 n_kv_head=0, ffn_hidden=32, norm_eps=1e-5, rope_theta=10000.0),
    # A small rope_theta so that both rotation frequencies of a head of 4 turn appreciably
    # within 8 positions.
    "llama": dict(family="llama", vocab_size=32, context_length=T, n_layer=2, n_embd=8, n_head=2,
                  n_kv_head=1, ffn_hidden=24, norm_eps=1e-5, rope_theta=100.0),
}

OPTIM = dict(lr=1e-2, min_lr=1e-3, warmup_steps=3, beta1=0.9, beta2=0.95, eps=1e-8,
             weight_decay=0.1)


def param_shapes(cfg):
    """(name, shape) of every parameter, in braid's order of use."""
    C, V, F_ = cfg["n_embd"], cfg["vocab_size"], cfg["ffn_hidden"]
    out = []
    if cfg["family"] == "gpt2":
        out += [("transformer.wte.weight", (V, C)), ("transformer.wpe.weight", (cfg["context_length"], C))]
        for l in range(cfg["n_layer"]):
            p = f"transformer.h.{l}."
            out += [(p + "ln_1.weight", (C,)), (p + "ln_1.bias", (C,)),
                    (p + "attn.c_attn.weight", (3 * C, C)), (p + "attn.c_attn.bias", (3 * C,)),
                    (p + "attn.c_proj.weight", (C, C)), (p + "attn.c_proj.bias", (C,)),
                    (p + "ln_2.weight", (C,)), (p + "ln_2.bias", (C,)),
                    (p + "mlp.c_fc.weight", (F_, C)), (p + "mlp.c_fc.bias", (F_,)),
                    (p + "mlp.c_proj.weight", (C, F_)), (p + "mlp.c_proj.bias", (C,))]
        out += [("transformer.ln_f.weight", (C,)), ("transformer.ln_f.bias", (C,))]
    else:
        D = C // cfg["n_head"]
        KV = cfg["n_kv_head"] * D
        out += [("model.embed_tokens.weight", (V, C))]
        for l in range(cfg["n_layer"]):
            p = f"model.layers.{l}."
            out += [(p + "input_layernorm.weight", (C,)),
                    (p + "self_attn.q_proj.weight", (C, C)), (p + "self_attn.k_proj.weight", (KV, C)),
                    (p + "self_attn.v_proj.weight", (KV, C)), (p + "self_attn.o_proj.weight", (C, C)),
                    (p + "post_attention_layernorm.weight", (C,)),
                    (p + "mlp.gate_proj.weight", (F_, C)), (p + "mlp.up_proj.weight", (F_, C)),
                    (p + "mlp.down_proj.weight", (C, F_))]
        out += [("model.norm.weight", (C,)), ("lm_head.weight", (V, C))]
    return out


def init_params(cfg, seed):
    """Deterministic f32-representable weights: matrices N(0, 0.3^2), norm weights 1 + N(0, 0.1^2),
    biases N(0, 0.1^2) (generic values, so every parameter's gradient is generic)."""
    g = torch.Generator().manual_seed(seed)
    params = {}
    for name, shape in param_shapes(cfg):
        if len(shape) == 1:
            base = 1.0 if name.endswith(".weight") else 0.0
            t = base + 0.1 * torch.randn(shape, generator=g)
        else:
            t = 0.3 * torch.randn(shape, generator=g)
        params[name] = t.to(torch.float32).to(torch.float64).requires_grad_(True)
    return params


def causal_attention(q, k, v):
    """q (B, T, H, D), k/v (B, T, Hkv, D) -> (B, T, H*D); kv head of query head h is h // (H/Hkv)."""
    Bq, Tq, H, D = q.shape
    rep = H // k.shape[2]
    k = k.repeat_interleave(rep, dim=2)
    v = v.repeat_interleave(rep, dim=2)
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (B, H, T, D)
    scores = q @ k.transpose(-1, -2) / math.sqrt(D)
    mask = torch.ones(Tq, Tq, dtype=torch.bool).tril()
    scores = scores.masked_fill(~mask, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v
    return out.transpose(1, 2).reshape(Bq, Tq, H * D)


def rope(x, theta):
    """x (B, T, H, D), rotate-half layout: pairs (i, i + D/2) turn by pos * theta^(-2i/D)."""
    D = x.shape[-1]
    half = D // 2
    freq = theta ** (-torch.arange(half, dtype=torch.float64) * 2.0 / D)
    ang = torch.arange(x.shape[1], dtype=torch.float64)[:, None] * freq[None, :]  # (T, half)
    cos, sin = ang.cos()[None, :, None, :], ang.sin()[None, :, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def rmsnorm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def logits_of(cfg, P, tokens):
    C, H = cfg["n_embd"], cfg["n_head"]
    D = C // H
    eps = cfg["norm_eps"]
    Bt, Tt = tokens.shape
    if cfg["family"] == "gpt2":
        x = P["transformer.wte.weight"][tokens] + P["transformer.wpe.weight"][:Tt][None]
        for l in range(cfg["n_layer"]):
            p = f"transformer.h.{l}."
            a = F.layer_norm(x, (C,), P[p + "ln_1.weight"], P[p + "ln_1.bias"], eps)
            qkv = F.linear(a, P[p + "attn.c_attn.weight"], P[p + "attn.c_attn.bias"])
            q, k, v = (t.reshape(Bt, Tt, H, D) for t in qkv.split(C, dim=-1))
            x = x + F.linear(causal_attention(q, k, v), P[p + "attn.c_proj.weight"],
                             P[p + "attn.c_proj.bias"])
            m = F.layer_norm(x, (C,), P[p + "ln_2.weight"], P[p + "ln_2.bias"], eps)
            m = F.gelu(F.linear(m, P[p + "mlp.c_fc.weight"], P[p + "mlp.c_fc.bias"]),
                       approximate="tanh")
            x = x + F.linear(m, P[p + "mlp.c_proj.weight"], P[p + "mlp.c_proj.bias"])
        x = F.layer_norm(x, (C,), P["transformer.ln_f.weight"], P["transformer.ln_f.bias"], eps)
        return x @ P["transformer.wte.weight"].T  # tied head
    Hkv, theta = cfg["n_kv_head"], cfg["rope_theta"]
    x = P["model.embed_tokens.weight"][tokens]
    for l in range(cfg["n_layer"]):
        p = f"model.layers.{l}."
        a = rmsnorm(x, P[p + "input_layernorm.weight"], eps)
        q = F.linear(a, P[p + "self_attn.q_proj.weight"]).reshape(Bt, Tt, H, D)
        k = F.linear(a, P[p + "self_attn.k_proj.weight"]).reshape(Bt, Tt, Hkv, D)
        v = F.linear(a, P[p + "self_attn.v_proj.weight"]).reshape(Bt, Tt, Hkv, D)
        att = causal_attention(rope(q, theta), rope(k, theta), v)
        x = x + F.linear(att, P[p + "self_attn.o_proj.weight"])
        m = rmsnorm(x, P[p + "post_attention_layernorm.weight"], eps)
        m = F.silu(F.linear(m, P[p + "mlp.gate_proj.weight"])) * F.linear(m, P[p + "mlp.up_proj.weight"])
        x = x + F.linear(m, P[p + "mlp.down_proj.weight"])
    x = rmsnorm(x, P["model.norm.weight"], eps)
    return F.linear(x, P["lm_head.weight"])  # untied head


def loss_of(cfg, P, tokens, targets):
    lg = logits_of(cfg, P, tokens)
    return F.cross_entropy(lg.reshape(-1, lg.shape[-1]), targets.reshape(-1)), lg


def no_decay(name, shape):
    return len(shape) < 2 or any(pat in name for pat in NO_DECAY)


def schedule(opt, kind, total):
    o = OPTIM
    w = o["warmup_steps"]
    warmup = torch.optim.lr_scheduler.LinearLR(opt, start_factor=1.0 / w, end_factor=1.0,
                                               total_iters=w - 1)
    if kind == "cosine":
        decay = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total - w, eta_min=o["min_lr"])
    else:
        decay = torch.optim.lr_scheduler.LinearLR(opt, start_factor=1.0,
                                                  end_factor=o["min_lr"] / o["lr"], total_iters=total - w)
    return torch.optim.lr_scheduler.SequentialLR(opt, [warmup, decay], milestones=[w])


def closed_form_lr(kind, step, total):
    """The schedule written out, to check torch's recursive schedulers against."""
    o = OPTIM
    w = o["warmup_steps"]
    if step < w:
        return o["lr"] * (step + 1) / w
    prog = (step - w) / (total - w)
    coeff = 0.5 * (1 + math.cos(math.pi * prog)) if kind == "cosine" else 1 - prog
    return o["min_lr"] + coeff * (o["lr"] - o["min_lr"])


def zero_grad_ranges(cfg):
    """{param: [[begin, end)]} flat element ranges with a structurally zero gradient."""
    if cfg["family"] != "gpt2":
        return {}
    C = cfg["n_embd"]
    return {f"transformer.h.{l}.attn.c_attn.bias": [[C, 2 * C]] for l in range(cfg["n_layer"])}


def check_zero_grads(cfg, P):
    for n, ranges in zero_grad_ranges(cfg).items():
        g = P[n].grad.reshape(-1)
        for lo, hi in ranges:
            assert g[lo:hi].abs().max() <= 1e-12 * g.abs().max(), (n, g[lo:hi])


def train(cfg, init, tokens, targets, kind, max_norm):
    P = {n: t.detach().clone().requires_grad_(True) for n, t in init.items()}
    shapes = dict(param_shapes(cfg))
    decay = [P[n] for n in P if not no_decay(n, shapes[n])]
    keep = [P[n] for n in P if no_decay(n, shapes[n])]
    o = OPTIM
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": o["weight_decay"]},
                             {"params": keep, "weight_decay": 0.0}],
                            lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"])
    sched = schedule(opt, kind, STEPS)
    steps, after = [], []
    for step in range(STEPS):
        opt.zero_grad(set_to_none=True)
        loss, _ = loss_of(cfg, P, tokens, targets)
        loss.backward()
        loss = loss.detach()
        check_zero_grads(cfg, P)
        norm = float(torch.nn.utils.clip_grad_norm_(list(P.values()), max_norm))
        lr = opt.param_groups[0]["lr"]
        assert opt.param_groups[1]["lr"] == lr
        assert abs(lr - closed_form_lr(kind, step, STEPS)) <= 1e-12 * o["lr"], (kind, step, lr)
        steps.append(dict(lr=lr, loss=loss.item(), grad_norm=norm, clipped=norm > max_norm))
        opt.step()
        sched.step()
        after.append({n: t.detach().clone() for n, t in P.items()})
    return steps, after


def f32(t):
    return t.detach().to(torch.float32).numpy().copy()


def make(family, seed):
    cfg = MODELS[family]
    init = init_params(cfg, seed)
    g = torch.Generator().manual_seed(seed + 1)
    tokens = torch.randint(0, cfg["vocab_size"], (B, T), generator=g)
    targets = torch.randint(0, cfg["vocab_size"], (B, T), generator=g)
    loss, logits = loss_of(cfg, init, tokens, targets)
    loss.backward()
    loss = loss.detach()
    check_zero_grads(cfg, init)
    grads = {n: t.grad.detach().clone() for n, t in init.items()}
    for t in init.values():
        t.grad = None

    # Max norm: between the smallest and largest unclipped norm of a trial run, so that the
    # runs below clip in some steps and not in others (checked).
    trial, _ = train(cfg, init, tokens, targets, "cosine", float("inf"))
    norms = sorted(s["grad_norm"] for s in trial)
    max_norm = float(f"{0.5 * (norms[len(norms) // 2 - 1] + norms[len(norms) // 2]):.3g}")

    out = {"tokens": tokens.to(torch.int32).numpy(), "targets": targets.to(torch.int32).numpy(),
           "logits": f32(logits)}
    for n, t in init.items():
        out["init/" + n] = f32(t)
        out["grad/" + n] = f32(grads[n])
    runs = {}
    for kind in ("cosine", "linear"):
        steps, after = train(cfg, init, tokens, targets, kind, max_norm)
        flags = [s["clipped"] for s in steps]
        assert any(flags) and not all(flags), f"{family} {kind}: clipping in {flags}"
        runs[kind] = steps
        for n in init:
            out[f"{kind}/{n}"] = f32(torch.stack([params[n] for params in after]))
    shapes = dict(param_shapes(cfg))
    meta = {"model": cfg, "batch": B, "seq_len": T, "steps": STEPS,
            "optim": dict(OPTIM, grad_clip=max_norm, total_steps=STEPS),
            "no_decay_params": [n for n in init if no_decay(n, shapes[n])],
            "zero_grad_ranges": zero_grad_ranges(cfg),
            "params": list(init), "loss": loss.item(), "runs": runs,
            "torch_version": torch.__version__}
    return out, meta


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out-dir", default=os.path.join(here, "..", "tests", "data"))
    args = ap.parse_args()
    torch.use_deterministic_algorithms(True)
    for seed, family in enumerate(MODELS, start=1):
        tensors, meta = make(family, 1000 * seed)
        path = os.path.join(args.out_dir, f"reference_{family}.safetensors")
        save_file(tensors, path, metadata={"reference": json.dumps(meta, sort_keys=True)})
        print(f"{path}: {os.path.getsize(path)} bytes, loss {meta['loss']:.6f}, max norm "
              f"{meta['optim']['grad_clip']}, clipped "
              + " ".join(k + "=" + "".join("x" if s["clipped"] else "." for s in r)
                         for k, r in meta["runs"].items()))


if __name__ == "__main__":
    main()
