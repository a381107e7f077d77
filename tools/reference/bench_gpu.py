#!/usr/bin/env python3
"""tools/reference/bench_gpu.py DUMP [--device cuda|cpu] [--warmup N] [--steps N] [--json FILE]
tools/reference/bench_gpu.py --peak [--json FILE]

The PyTorch side of bench/gpu/run.sh: the training step of tools/reference/dit.py written
the way a strong PyTorch user runs it on a GPU, on the weights and packed batch that
`bench_train_step --dump` wrote (the same model and batch as the tessera side):

- fp32 master weights, bf16 autocast (torch.autocast(device, torch.bfloat16)); norms,
  RoPE and the loss in fp32 inside the compiled regions, the residual stream fp32;
- attention: torch.nn.functional.scaled_dot_product_attention, preferring the cuDNN
  backend (torch.nn.attention.sdpa_kernel with priority cuDNN, Flash, memory-efficient).
  Packed clips of different lengths: the clips are grouped into runs of consecutive clips
  of equal length and each run is one batched SDPA call (C_run, H, n, Dh). This does
  exactly the per-clip work (sum of n^2), keeps the flash/cuDNN kernels, and is one call
  for the 16 x 4096 and 64 x 1024 batches. A block-diagonal mask over the packed L tokens
  would be one call too, but costs L^2 (16x the FLOPs at 16 x 4096, a 4 GiB bool mask
  at 65,536 tokens) and only the math / memory-efficient backends take a dense mask;
- fused QKV GEMM (the three weights concatenated per step, D x 3D, negligible);
- each DiT block compiled (torch.compile, default mode) and, when the dump's config says
  model.recompute = 1, checkpointed (torch.utils.checkpoint, non-reentrant), as tessera
  recomputes whole blocks; with model.recompute = 2 (tessera keeps the GEMM and attention
  outputs and recomputes its cheap token-local layers) not checkpointed: torch.compile's
  partitioner already recomputes pointwise ops in the backward rather than saving them,
  which is the same choice; the final layer + loss compiled too;
- torch.optim.AdamW(fused=True) with the config's lr, betas, eps and weight decay on
  matrices only (not biases, norm weights, y_embed), as bench.py and the C trainer.

Guarded so that it runs on the development machine's torch 1.13 CPU build (--device cpu:
no SDPA -> matmul + softmax per run of clips, no compile, foreach AdamW): the code path
check only, not a measurement.

--peak: the bf16 GEMM peak, torch.matmul of 8192^3 bf16 in a loop (best of 5 rounds).

Prints one line per step and a summary; --json writes {torch, device, tokens, clips,
warmup, steps, step_s, median_s, mean_s, min_s, tokens_per_s, losses, model_flops_per_step,
model_tflops, max_memory_allocated, max_memory_reserved, attention_backends, compile}."""
import argparse
import contextlib
import inspect
import math
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dit  # noqa: E402
import safetensors_io  # noqa: E402
from bench import train_config  # noqa: E402  (the CPU benchmark's: one reader of [train])
from fs_atomic import write_json  # noqa: E402  (tools/fs_atomic.py, the folder above)

HAVE_SDPA = hasattr(F, "scaled_dot_product_attention")


def model_flops(cfg, lengths):
    """6 x (token-wise linear weights) per token + 12 x n^2 x D per layer per clip
    (attention forward and backward, recompute not counted)."""
    D, P = cfg["hidden"], cfg["pt"] * cfg["ph"] * cfg["pw"] * cfg["channels"]
    F_ = cfg["mlp_ratio"] * D
    lin = P * D + cfg["depth"] * (4 * D * D + 2 * D * F_) + D * P
    return 6 * lin * sum(lengths) + 12 * cfg["depth"] * D * sum(n * n for n in lengths)


def sdpa_context(device):
    """Prefer cuDNN, then Flash, then memory-efficient attention (torch >= 2.3)."""
    if device != "cuda" or not HAVE_SDPA:
        return contextlib.nullcontext(), "matmul+softmax" if not HAVE_SDPA else "default"
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return contextlib.nullcontext(), "default (no torch.nn.attention)"
    order = [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION,
             SDPBackend.EFFICIENT_ATTENTION]
    try:
        return sdpa_kernel(order, set_priority=True), "cudnn>flash>efficient (priority)"
    except TypeError:  # set_priority arrived in torch 2.6; the list is then a set
        return sdpa_kernel(order), "cudnn|flash|efficient"


def runs_of(lengths):
    """[(first token, clips, tokens per clip)] of consecutive clips of equal length."""
    runs, s, i = [], 0, 0
    while i < len(lengths):
        j = i
        while j < len(lengths) and lengths[j] == lengths[i]:
            j += 1
        runs.append((s, j - i, lengths[i]))
        s += (j - i) * lengths[i]
        i = j
    return tuple(runs)


def make_block(cfg, runs, act_dtype):
    D, H = cfg["hidden"], cfg["heads"]
    Dh = D // H
    ln_eps, rms_eps = cfg["ln_eps"], cfg["rms_eps"]
    scale = 1.0 / math.sqrt(Dh)

    def rms(x, w):
        x = x.float()
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + rms_eps) * w

    def rope(x, cos, sin):
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)

    def attend(q, k, v):
        outs = []
        for s, c, n in runs:
            e = s + c * n
            qs, ks, vs = (t[s:e].view(c, n, H, Dh).transpose(1, 2) for t in (q, k, v))
            if HAVE_SDPA:
                o = F.scaled_dot_product_attention(qs, ks, vs)
            else:
                o = torch.softmax((qs @ ks.transpose(-1, -2)) * scale, dim=-1) @ vs
            outs.append(o.transpose(1, 2).reshape(c * n, H, Dh))
        return outs[0] if len(outs) == 1 else torch.cat(outs, dim=0)

    def block(h, cs, clip_of, cos, sin, wa, ba, wq, bq, wk, bk, wv, bv, qn, kn, wp, bp,
              w1, b1, w2, b2):
        L = h.shape[0]
        mod = torch.addmm(ba, cs, wa).float()
        sh1, sc1, g1, sh2, sc2, g2 = (m[clip_of] for m in mod.chunk(6, dim=1))
        a = F.layer_norm(h.float(), (D,), eps=ln_eps) * (1 + sc1) + sh1
        qkv = torch.addmm(torch.cat([bq, bk, bv]), a, torch.cat([wq, wk, wv], dim=1))
        q, k, v = qkv.view(L, 3, H, Dh).unbind(1)
        q = rope(rms(q, qn), cos, sin).to(act_dtype)
        k = rope(rms(k, kn), cos, sin).to(act_dtype)
        att = attend(q, k, v.to(act_dtype)).reshape(L, D)
        h = h + g1 * torch.addmm(bp, att, wp).float()
        m = F.layer_norm(h, (D,), eps=ln_eps) * (1 + sc2) + sh2
        f = F.gelu(torch.addmm(b1, m, w1), approximate="tanh")
        return h + g2 * torch.addmm(b2, f, w2).float()

    return block


def make_final(cfg):
    D, ln_eps = cfg["hidden"], cfg["ln_eps"]

    def final(h, cs, clip_of, wa, ba, wl, bl, target, loss_weight):
        shift, scale = (m[clip_of] for m in torch.addmm(ba, cs, wa).float().chunk(2, dim=1))
        pred = torch.addmm(bl, F.layer_norm(h, (D,), eps=ln_eps) * (1 + scale) + shift, wl)
        se = ((pred.float() - target) ** 2).sum(dim=1)
        per_clip = torch.zeros(loss_weight.shape[0], dtype=se.dtype,
                               device=se.device).index_add(0, clip_of, se)
        return (loss_weight * per_clip).sum()

    return final


def peak(device, a_json):
    if device != "cuda":
        print("bench_gpu.py: --peak needs --device cuda", file=sys.stderr)
        return 2
    n, iters = 8192, 50
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(10):
        torch.matmul(a, b, out=c)
    best = 0.0
    for _ in range(5):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(iters):
            torch.matmul(a, b, out=c)
        e1.record()
        torch.cuda.synchronize()
        best = max(best, 2.0 * n ** 3 * iters / (e0.elapsed_time(e1) * 1e-3) / 1e12)
    res = {"torch": torch.__version__, "device": torch.cuda.get_device_name(),
           "gemm": f"torch.matmul bf16 {n}^3 x {iters}, best of 5", "tflops": best,
           "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version()}
    print(f"bench_gpu.py: bf16 GEMM {n}^3: {best:.1f} TFLOP/s ({res['device']})")
    if a_json:
        write_json(a_json, res, 2)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dump", nargs="?")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--peak", action="store_true", help="measure the bf16 GEMM peak only")
    ap.add_argument("--json")
    a = ap.parse_args()
    dev = a.device
    if dev == "cuda" and not torch.cuda.is_available():
        print("bench_gpu.py: no GPU visible (torch.cuda.is_available() is False)", file=sys.stderr)
        return 3
    if a.threads:
        torch.set_num_threads(a.threads)
    if a.peak:
        return peak(dev, a.json)
    if not a.dump:
        ap.error("DUMP is required (or --peak)")
    if dev == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    tensors, meta = safetensors_io.read(a.dump)
    cfg = dit.parse_config(meta["config"])
    tc = train_config(meta["config"])
    params = {}
    for n in dit.tensor_shapes(cfg):
        params[n] = torch.from_numpy(tensors.pop("param." + n)).to(dev).requires_grad_(True)
    bt = {k[len("batch."):]: v for k, v in tensors.items() if k.startswith("batch.")}
    del tensors
    cu = [int(c) for c in bt["cu_seqlens"]]
    lengths = [cu[i + 1] - cu[i] for i in range(len(cu) - 1)]
    L, C = cu[-1], len(lengths)
    D, H = cfg["hidden"], cfg["heads"]
    Dh = D // H
    f32 = torch.float32
    x = torch.from_numpy(bt["x"]).to(dev, f32)
    target = torch.from_numpy(bt["target"]).to(dev, f32)
    loss_weight = torch.from_numpy(bt["loss_weight"]).to(dev, f32)
    clip_of = torch.repeat_interleave(torch.arange(C), torch.tensor(lengths)).to(dev)
    temb = dit.timestep_embedding(torch.from_numpy(bt["t"]).to(torch.float64) * 1000.0,
                                  cfg["freq_dim"]).to(dev, f32)
    ang = dit.rope_angles(torch.from_numpy(bt["pos"]).long(), Dh, cfg["rope_theta"])
    cos = torch.cos(ang)[:, None, :].to(dev, f32)
    sin = torch.sin(ang)[:, None, :].to(dev, f32)
    labels = None
    if cfg["num_classes"] > 0 and "labels" in bt:
        labels = torch.from_numpy(bt["labels"]).long().to(dev)

    decay = [p for n, p in params.items() if p.dim() == 2 and not n.startswith("y_embed")]
    no_decay = [p for n, p in params.items() if not (p.dim() == 2 and not n.startswith("y_embed"))]
    kw = {}
    if dev == "cuda" and "fused" in inspect.signature(torch.optim.AdamW).parameters:
        kw["fused"] = True
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": tc["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=tc["lr"], betas=(tc["beta1"], tc["beta2"]), eps=tc["adam_eps"], **kw)

    use_bf16 = a.precision == "bf16"
    act = torch.bfloat16 if use_bf16 else f32
    block = make_block(cfg, runs_of(lengths), act)
    final = make_final(cfg)
    compiled = dev == "cuda" and not a.no_compile and hasattr(torch, "compile")
    if compiled:
        block, final = torch.compile(block), torch.compile(final)
    recompute = cfg["recompute"] == 1  # 2: see the docstring (compile's own recompute)
    if recompute:
        from torch.utils.checkpoint import checkpoint
        inner = block

        def block(*args):
            return checkpoint(inner, *args, use_reentrant=False)

    names = ["adaln.weight", "adaln.bias", "q.weight", "q.bias", "k.weight", "k.bias",
             "v.weight", "v.bias", "q_norm.weight", "k_norm.weight", "proj.weight", "proj.bias",
             "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    blocks = [[params[f"blocks.{i}.{n}"] for n in names] for i in range(cfg["depth"])]
    p = params

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev, dtype=torch.bfloat16, enabled=use_bf16):
            c = torch.addmm(p["t_embed.fc2.bias"], F.silu(torch.addmm(
                p["t_embed.fc1.bias"], temb, p["t_embed.fc1.weight"])), p["t_embed.fc2.weight"])
            if cfg["num_classes"] > 0:
                lab = labels if labels is not None else torch.full(
                    (C,), cfg["num_classes"], dtype=torch.long, device=dev)
                c = c + p["y_embed.weight"][lab]
            cs = F.silu(c)
            h = torch.addmm(p["x_embed.bias"], x, p["x_embed.weight"]).float()
            for w in blocks:
                h = block(h, cs, clip_of, cos, sin, *w)
            loss = final(h, cs, clip_of, p["final.adaln.weight"], p["final.adaln.bias"],
                         p["final.linear.weight"], p["final.linear.bias"], target, loss_weight)
        loss.backward()
        opt.step()
        return loss

    ctx, backend = sdpa_context(dev)
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    nparam = sum(t.numel() for t in params.values())
    print(f"bench_gpu.py: torch {torch.__version__}, {dev}, {nparam} parameters, {C} clips, "
          f"{L} tokens, {len(runs_of(lengths))} attention runs, attention {backend}, "
          f"compile {compiled}, recompute {recompute}, fused AdamW {bool(kw)}", flush=True)
    if dev == "cuda":
        torch.cuda.reset_peak_memory_stats()
    secs, losses = [], []
    with ctx:
        for s in range(a.warmup + a.steps):
            sync()
            t0 = time.perf_counter()
            loss = step()
            sync()
            secs.append(time.perf_counter() - t0)
            losses.append(loss.item())
            kind = "warm-up" if s < a.warmup else "timed"
            print(f"bench_gpu.py: {kind} step {s + 1}: {secs[-1]:.4f} s, loss {losses[-1]:.9g}",
                  flush=True)
    timed = secs[a.warmup:]
    med = statistics.median(timed)
    flops = model_flops(cfg, lengths)
    res = {"torch": torch.__version__, "device": dev, "tokens": L, "clips": C,
           "lengths": lengths, "warmup": a.warmup, "steps": a.steps, "step_s": timed,
           "median_s": med, "mean_s": statistics.mean(timed), "min_s": min(timed),
           "tokens_per_s": L / med, "losses": losses, "model_flops_per_step": flops,
           "model_tflops": flops / med / 1e12, "attention_backends": backend,
           "attention_runs": len(runs_of(lengths)), "compile": compiled,
           "recompute": recompute, "recompute_level": cfg["recompute"], "fused_adamw": bool(kw), "precision": a.precision}
    if dev == "cuda":
        res["max_memory_allocated"] = torch.cuda.max_memory_allocated()
        res["max_memory_reserved"] = torch.cuda.max_memory_reserved()
        res["device_name"] = torch.cuda.get_device_name()
        res["cuda"] = torch.version.cuda
        res["cudnn"] = torch.backends.cudnn.version()
    print(f"bench_gpu.py: {L} tokens, {C} clips: median {med:.4f} s per step over {a.steps} "
          f"steps: {res['tokens_per_s']:.0f} tokens/s, {res['model_tflops']:.1f} model TFLOP/s"
          + (f", peak allocated {res['max_memory_allocated'] / 2**30:.2f} GiB"
             if dev == "cuda" else ""))
    if a.json:
        write_json(a.json, res, 2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
