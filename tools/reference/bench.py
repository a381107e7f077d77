#!/usr/bin/env python3
"""tools/reference/bench.py DUMP [--threads N] [--warmup N] [--steps N] [--json FILE] —
the PyTorch side of bench/train/run.sh: times the same training step as
bench/train/bench_step.c on the same model and batch.

DUMP is written by `bench_train_step --dump`: the config (metadata "config"), the initial
weights ("param.<name>") and the packed batch ("batch.*"). One step, in float32:
optimizer.zero_grad(set_to_none=True), dit.forward (prediction and loss), loss.backward(),
torch.optim.AdamW.step() with the config's train.lr, (beta1, beta2), adam_eps and
weight_decay on matrices only (not biases, norm weights or y_embed, like the C trainer);
no clipping, no schedule. torch.set_num_threads(N) (and one inter-op thread); the caller
also sets OMP_NUM_THREADS and OPENBLAS_NUM_THREADS (torch's GEMMs are OpenBLAS on Debian).

Attention: dit.attention loops over the clips and does matmul + softmax + matmul per clip
(batched over heads). torch 1.13 has no scaled_dot_product_attention (added in 2.0), so
this is the plain PyTorch baseline: it materialises each clip's (H, n, n) scores, which is
fine for the benchmark's clips of at most 1024 tokens (not for a 64k-token clip, which
only the C side runs).

Prints one line per step (seconds, loss) and the summary; --json writes {threads, tokens,
clips, warmup, steps, step_s, median_s, mean_s, min_s, tokens_per_s, losses, torch}."""
import argparse
import configparser
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dit  # noqa: E402
import safetensors_io  # noqa: E402
from fs_atomic import write_json  # noqa: E402  (tools/fs_atomic.py, the folder above)


def train_config(ini_text):
    """[train] section of a tessera config: the AdamW hyper-parameters."""
    cp = configparser.ConfigParser(inline_comment_prefixes=(";", "#"))
    cp.read_string(ini_text)
    t = cp["train"]
    return {k: float(t[k]) for k in ["lr", "beta1", "beta2", "adam_eps", "weight_decay"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dump")
    ap.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "1")))
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--json")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)

    tensors, meta = safetensors_io.read(a.dump)
    cfg = dit.parse_config(meta["config"])
    tc = train_config(meta["config"])
    params = {n: torch.tensor(tensors["param." + n], dtype=torch.float32, requires_grad=True)
              for n in dit.tensor_shapes(cfg)}
    f32, i64 = torch.float32, torch.long
    batch = {k: torch.tensor(tensors["batch." + k], dtype=dt)
             for k, dt in [("x", f32), ("target", f32), ("t", f32), ("labels", i64),
                           ("loss_weight", f32), ("pos", i64), ("cu_seqlens", i64)]}
    decay = [p for n, p in params.items() if p.dim() == 2 and not n.startswith("y_embed")]
    no_decay = [p for n, p in params.items() if not (p.dim() == 2 and not n.startswith("y_embed"))]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": tc["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=tc["lr"], betas=(tc["beta1"], tc["beta2"]), eps=tc["adam_eps"])
    L, C = batch["x"].shape[0], batch["t"].shape[0]
    print(f"bench.py: torch {torch.__version__}, {sum(p.numel() for p in params.values())} "
          f"parameters, {C} clips, {L} tokens, {torch.get_num_threads()} threads")

    secs, losses = [], []
    for s in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        _, loss = dit.forward(cfg, params, batch)
        loss.backward()
        opt.step()
        secs.append(time.perf_counter() - t0)
        losses.append(loss.item())
        kind = "warm-up" if s < a.warmup else "timed"
        print(f"bench.py: {kind} step {s + 1}: {secs[-1]:.4f} s, loss {losses[-1]:.9g}")
    timed = secs[a.warmup:]
    med = statistics.median(timed)
    res = {"torch": torch.__version__, "threads": torch.get_num_threads(), "tokens": L,
           "clips": C, "warmup": a.warmup, "steps": a.steps, "step_s": timed, "median_s": med,
           "mean_s": statistics.mean(timed), "min_s": min(timed), "tokens_per_s": L / med,
           "losses": losses}
    print(f"bench.py: {L} tokens, {C} clips, {res['threads']} threads: median {med:.4f} s, "
          f"mean {res['mean_s']:.4f} s, min {res['min_s']:.4f} s per step over {a.steps} "
          f"steps: {res['tokens_per_s']:.0f} tokens/s")
    if a.json:
        write_json(a.json, res, 2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
