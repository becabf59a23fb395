"""PyTorch twin of examples/shakespeare.rs: the same character-level GPT (nanoGPT's
`shakespeare_char` configuration), data, split, init scheme and schedule, in plain PyTorch.

    python3 tools/bench/torch_gpt.py --text data/shakespeare/shakespeare.txt --steps 2000 --json out.json
    python3 tools/bench/torch_gpt.py --text ... --steps 60 --eval-every 0 --mode tf32   # timing only

The parameter names are rumus's (`embed.0.weight` is nanoGPT's `transformer.wte.weight`,
`embed.1.weight` its `wpe`, `blocks.N.*` its `transformer.h.N.*`, `head.0` its `ln_f`, `head.1`
its tied `lm_head`), so checkpoints interchange. As in rumus, attention has no dropout on its
probabilities (dropout acts on the residual branches and the embeddings), and the validation loss
is the mean over every token of the non-overlapping windows of the last 10% of the text.

Modes: `eager` f32 with TF32 off (the goal's peer), `tf32`, `bf16` (autocast), `compile`
(`torch.compile`, f32), `compile-ro` (`mode="reduce-overhead"`).
"""
import argparse
import contextlib
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class PositionalEmbedding(nn.Module):
    def __init__(self, block, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(block, dim))

    def forward(self, x):
        return x + self.weight[: x.shape[1]]


class CausalSelfAttention(nn.Module):
    def __init__(self, embed, heads, dropout, bias):
        super().__init__()
        self.c_attn = nn.Linear(embed, 3 * embed, bias=bias)
        self.c_proj = nn.Linear(embed, embed, bias=bias)
        self.resid_dropout = nn.Dropout(dropout)
        self.heads = heads

    def forward(self, x):
        n, t, e = x.shape
        q, k, v = self.c_attn(x).split(e, dim=2)
        q, k, v = (z.view(n, t, self.heads, e // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).contiguous().view(n, t, e)))


class Mlp(nn.Module):
    def __init__(self, embed, dropout, bias):
        super().__init__()
        self.c_fc = nn.Linear(embed, 4 * embed, bias=bias)
        self.c_proj = nn.Linear(4 * embed, embed, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, embed, heads, dropout, bias):
        super().__init__()
        self.ln_1 = nn.LayerNorm(embed, bias=bias)
        self.attn = CausalSelfAttention(embed, heads, dropout, bias)
        self.ln_2 = nn.LayerNorm(embed, bias=bias)
        self.mlp = Mlp(embed, dropout, bias)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt(nn.Module):
    """rumus's `Gpt` of examples/shakespeare.rs, with its parameter names."""

    def __init__(self, vocab, block, embed, heads, layers, dropout, bias=True):
        super().__init__()
        self.embed = nn.Sequential(nn.Embedding(vocab, embed), PositionalEmbedding(block, embed), nn.Dropout(dropout))
        self.blocks = nn.Sequential(*[Block(embed, heads, dropout, bias) for _ in range(layers)])
        self.head = nn.Sequential(nn.LayerNorm(embed, bias=bias), nn.Linear(embed, vocab, bias=False))
        self.head[1].weight = self.embed[0].weight  # tied, as `tie = embed.0`
        # nanoGPT's init, as rumus's layers do it: N(0, 0.02) everywhere, residual projections
        # N(0, 0.02/sqrt(2·layers)), zero biases, LayerNorm ones.
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * layers))
            elif name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() >= 2 or name == "embed.1.weight":
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, idx):
        return self.head(self.blocks(self.embed(idx)))


def optimizer(model, lr, weight_decay, fused):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.99), fused=fused)


def learning_rate(step, lr, min_lr, warmup, decay_steps):
    """nanoGPT's get_lr; rumus::optim::WarmupCosine is the same function."""
    if step < warmup:
        return lr * (step + 1) / (warmup + 1)
    if step > decay_steps:
        return min_lr
    ratio = (step - warmup) / (decay_steps - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)


def cached_logits(model, ids, caches, pos):
    """Logits of the new positions `ids` [1, t] at positions pos.., with per-layer key/value
    caches (a list, updated): the cached loop rumus's `generate` runs."""
    x = model.embed[0](ids) + model.embed[1].weight[pos : pos + ids.shape[1]]
    n, t, e = x.shape
    for i, blk in enumerate(model.blocks):
        att = blk.attn
        q, k, v = att.c_attn(blk.ln_1(x)).split(e, dim=2)
        q, k, v = (z.view(n, t, att.heads, e // att.heads).transpose(1, 2) for z in (q, k, v))
        if caches[i] is not None:
            k, v = torch.cat([caches[i][0], k], dim=2), torch.cat([caches[i][1], v], dim=2)
        caches[i] = (k, v)
        # One new query sees every cached key; a prefill is causal (here tq == tk).
        y = F.scaled_dot_product_attention(q, k, v, is_causal=t > 1)
        x = x + att.c_proj(y.transpose(1, 2).contiguous().view(n, t, e))
        x = x + blk.mlp(blk.ln_2(x))
    return model.head(x)


def generation_speed(model, block, device, n=200):
    """Tokens per second of sampling `n` tokens after a one-token prompt: nanoGPT's loop (the
    whole window re-run per token) and the key/value-cached loop; and the first token's latency."""
    model.eval()
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def sample(logits):
        return torch.multinomial(F.softmax(logits[:, -1, :], dim=-1), 1)

    def uncached(count):
        idx = torch.zeros((1, 1), dtype=torch.long, device=device)
        for _ in range(count):
            idx = torch.cat([idx, sample(model(idx[:, -block:]))], dim=1)
        return idx

    def cached(count):
        idx = torch.zeros((1, 1), dtype=torch.long, device=device)
        caches = [None] * len(model.blocks)
        new = sample(cached_logits(model, idx, caches, 0))
        for _ in range(count - 1):
            idx = torch.cat([idx, new], dim=1)
            new = sample(cached_logits(model, new, caches, idx.shape[1] - 1))
        return torch.cat([idx, new], dim=1)

    out = {}
    with torch.no_grad():
        sync()
        t0 = time.perf_counter()
        cached(1)
        sync()
        out["first_token_ms"] = (time.perf_counter() - t0) * 1e3
        for name, f in [("generate_tokens_per_s", cached), ("generate_uncached_tokens_per_s", uncached)]:
            f(8)
            sync()
            t0 = time.perf_counter()
            f(n)
            sync()
            out[name] = n / (time.perf_counter() - t0)
    return out


def load_tokens(path):
    text = open(path, encoding="utf-8").read()
    vocab = sorted(set(text))
    index = {c: i for i, c in enumerate(vocab)}
    data = torch.tensor([index[c] for c in text], dtype=torch.long)
    cut = int(len(data) * 0.9)
    return data[:cut], data[cut:], len(vocab)


def val_loss(model, val, block, batch, device, autocast):
    """Mean cross-entropy over every token of the non-overlapping windows of `val`."""
    starts = list(range(0, len(val) - block, block))
    total, count = 0.0, 0
    model.eval()
    with torch.no_grad(), autocast():
        for i in range(0, len(starts), batch):
            s = starts[i : i + batch]
            x = torch.stack([val[j : j + block] for j in s]).to(device)
            y = torch.stack([val[j + 1 : j + 1 + block] for j in s]).to(device)
            logits = model(x)
            total += F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.view(-1), reduction="sum").item()
            count += y.numel()
    model.train()
    return total / count


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--text", required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--mode", default="eager", choices=["eager", "tf32", "bf16", "compile", "compile-ro"])
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--timed-steps", type=int, default=50, help="steps after warm-up whose median is reported")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--block", type=int, default=256)
    p.add_argument("--embed", type=int, default=384)
    p.add_argument("--heads", type=int, default=6)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--dropout", type=float, default=0.2)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--decay-steps", type=int, default=5000)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--json", default="")
    p.add_argument("--generate", action="store_true", help="time generation (cached and not) instead of training")
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.backends.cuda.matmul.allow_tf32 = a.mode == "tf32"
    torch.backends.cudnn.allow_tf32 = a.mode == "tf32"
    torch.manual_seed(a.seed)
    cuda = a.device == "cuda"

    train, val, vocab = load_tokens(a.text)
    model = Gpt(vocab, a.block, a.embed, a.heads, a.layers, a.dropout).to(a.device)
    params = sum(p.numel() for p in model.parameters())
    opt = optimizer(model, a.lr, 0.1, fused=cuda)
    autocast = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if a.mode == "bf16" else contextlib.nullcontext
    if a.generate:
        out = {"device": torch.cuda.get_device_name() if cuda else "cpu", **generation_speed(model, a.block, a.device)}
        print(json.dumps(out))
        if a.json:
            with open(a.json, "w") as f:
                json.dump(out, f, indent=1)
        return
    step_model = model
    if a.mode.startswith("compile"):
        step_model = torch.compile(model, mode="reduce-overhead" if a.mode == "compile-ro" else None)

    def batch():
        starts = torch.randint(len(train) - a.block, (a.batch,))
        x = torch.stack([train[i : i + a.block] for i in starts])
        y = torch.stack([train[i + 1 : i + 1 + a.block] for i in starts])
        return x.to(a.device, non_blocking=True), y.to(a.device, non_blocking=True)

    def step(i, x, y):
        for g in opt.param_groups:
            g["lr"] = learning_rate(i, a.lr, a.lr / 10, 100, a.decay_steps)
        with autocast():
            logits = step_model(x)
            loss = F.cross_entropy(logits.float().view(-1, vocab), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    evals = []
    times = []
    first_step = None
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    x, y = batch()
    for i in range(a.steps):
        if a.eval_every and i % a.eval_every == 0:
            evals.append((i, val_loss(model, val, a.block, a.batch, a.device, autocast)))
            print(f"step {i}: val loss {evals[-1][1]:.4f}", flush=True)
        t0 = time.perf_counter()
        loss = step(i, x, y)
        x, y = batch()
        if cuda:
            torch.cuda.synchronize()
        else:
            loss.item()
        dt = time.perf_counter() - t0
        if first_step is None:
            first_step = dt
        times.append(dt)
    final = val_loss(model, val, a.block, a.batch, a.device, autocast) if a.eval_every else float("nan")
    if a.eval_every:
        evals.append((a.steps, final))
        print(f"step {a.steps}: val loss {final:.4f}")
    steady = sorted(times[-a.timed_steps :])
    median = steady[len(steady) // 2]
    # nanoGPT's (PaLM's) estimate: 6N per token for the weights, 12·layers·embed·block for attention.
    flops = (6 * params + 12 * a.layers * a.embed * a.block) * a.batch * a.block
    out = {
        "mode": a.mode,
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "torch": torch.__version__,
        "params": params,
        "vocab": vocab,
        "step_ms": median * 1e3,
        "first_step_s": first_step,
        "tokens_per_s": a.batch * a.block / median,
        "tflops": flops / median / 1e12,
        "peak_gib": torch.cuda.max_memory_allocated() / 2**30 if cuda else float("nan"),
        "val": evals,
    }
    print(json.dumps(out))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
