#!/usr/bin/env python3
"""tests/model/wan_golden.py WORK TESSERA WAN_GOLDEN_RUN — the Wan family against diffusers.

For tiny random WanTransformer3DModel configurations (made here with diffusers itself, random
init plus N(0, 0.1) on every parameter so that norms, tables and the head are not at their
init values; nothing is downloaded):
- `tessera convert` of the save_pretrained folder, then wan_golden_run: tessera's CPU fp32
  forward and backward of several clips of different lengths packed, with captions of
  different lengths, against diffusers run clip by clip (fp32, autograd) with the same
  weights, inputs and loss sum_c w_c |out_c - target_c|^2: relative error (norm of the
  difference / norm of the reference) of the loss, the output, dL/dx and every parameter
  gradient, each <= TOL;
- round trips: tessera -> diffusers (fp32) loads with from_pretrained and equals the
  original bit for bit, and converts back to the same checkpoint tensors; a bf16 model saved
  in shards (with the index) converts and returns as bf16 bit for bit;
- refusals naming the tensor: one missing, one misshapen, one unknown, an F16 file;
- the comparison can fail: the same weights converted with RoPE's base 100 instead of
  Wan's 10000 give an output error above TOL.
Prints the max differences; exit 1 on any failure."""
import json
import os
import subprocess
import sys
import time

import torch
from diffusers import WanTransformer3DModel
from diffusers.utils import logging as dlogging
from safetensors.torch import load_file, save_file

TOL = 1e-4
# Tiny configurations of the presets' shape families: Wan 2.1 (16 latent channels, patch
# 1x2x2) and Wan 2.2 TI2V (48 channels); the second with patch 2x2x2 as well, which no
# preset uses, so that the temporal order of the patch embedding and the output is tested.
CONFIGS = {
    "wan2.1": dict(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12,
                   in_channels=4, out_channels=4, text_dim=8, freq_dim=16, ffn_dim=40,
                   num_layers=2),
    "wan2.2-ti2v": dict(patch_size=(2, 2, 2), num_attention_heads=3, attention_head_dim=16,
                        in_channels=6, out_channels=6, text_dim=10, freq_dim=16, ffn_dim=56,
                        num_layers=2),
}
# clips: (latent frames per temporal patch, rows, columns of tokens, caption tokens)
CLIPS = [(2, 2, 3, 3), (1, 3, 2, 7), (3, 2, 2, 1)]

failures = []


def rel(a, b):
    a, b = a.double(), b.double()
    nb = b.norm().item()
    return (a - b).norm().item() / (nb if nb > 0 else 1.0)


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def run(cmd, expect_ok=True):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if expect_ok and p.returncode != 0:
        print(p.stdout + p.stderr)
        raise SystemExit(f"FAIL: {' '.join(cmd)} exited {p.returncode}")
    return p


def tessera_layout(name, t, cfg):
    """(tessera name, value in tessera's layout) of diffusers parameter `name`."""
    top = {"patch_embedding": "x_embed", "condition_embedder.time_embedder.linear_1": "t_embed.fc1",
           "condition_embedder.time_embedder.linear_2": "t_embed.fc2",
           "condition_embedder.time_proj": "time_proj",
           "condition_embedder.text_embedder.linear_1": "text_embed.fc1",
           "condition_embedder.text_embedder.linear_2": "text_embed.fc2", "proj_out": "final.linear"}
    blk = {"attn1.to_q": "q", "attn1.to_k": "k", "attn1.to_v": "v", "attn1.to_out.0": "proj",
           "attn1.norm_q": "q_norm", "attn1.norm_k": "k_norm", "ffn.net.0.proj": "fc1",
           "ffn.net.2": "fc2", "norm2": "cross.norm", "attn2.to_q": "cross.q",
           "attn2.to_k": "cross.k", "attn2.to_v": "cross.v", "attn2.to_out.0": "cross.proj",
           "attn2.norm_q": "cross.q_norm", "attn2.norm_k": "cross.k_norm"}
    if name == "scale_shift_table":
        return "final.modulation", t.reshape(-1)
    if name == "patch_embedding.weight":  # (D, C, pt, ph, pw) -> (pt ph pw C, D)
        return "x_embed.weight", t.permute(2, 3, 4, 1, 0).reshape(-1, t.shape[0])
    if name.startswith("blocks."):
        _, i, rest = name.split(".", 2)
        if rest == "scale_shift_table":
            return f"blocks.{i}.modulation", t.reshape(-1)
        mod, leaf = rest.rsplit(".", 1)
        out = f"blocks.{i}.{blk[mod]}.{leaf}"
    else:
        mod, leaf = name.rsplit(".", 1)
        out = f"{top[mod]}.{leaf}"
    return out, (t.t() if t.ndim == 2 else t)


def to_tokens(v, p):
    """(C, F, H, W) latents -> (N, P) tokens in (t, y, x) order of (pt, ph, pw, C) values."""
    C, F, H, W = v.shape
    pt, ph, pw = p
    v = v.reshape(C, F // pt, pt, H // ph, ph, W // pw, pw)
    return v.permute(1, 3, 5, 2, 4, 6, 0).reshape(-1, pt * ph * pw * C)


def make_model(cfg, seed):
    torch.manual_seed(seed)
    m = WanTransformer3DModel(**cfg).float()
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return m


def make_batch(cfg, seed):
    g = torch.Generator().manual_seed(seed)
    p, Cin = cfg["patch_size"], cfg["in_channels"]
    clips = []
    for T, H, W, n in CLIPS:
        lat = torch.randn(Cin, T * p[0], H * p[1], W * p[2], generator=g)
        text = torch.randn(n, cfg["text_dim"], generator=g)
        t = float(torch.rand(1, generator=g)) * 0.9 + 0.05
        target = torch.randn(T * H * W, Cin * p[0] * p[1] * p[2], generator=g)
        clips.append(dict(lat=lat, text=text, t=t, grid=(T, H, W), target=target))
    P = Cin * p[0] * p[1] * p[2]
    for c in clips:
        c["w"] = 1.0 / (len(clips) * c["target"].shape[0] * P)
    return clips


def write_inputs(path, cfg, clips):
    x, pos, cu, cu_t = [], [], [0], [0]
    for c in clips:
        x.append(to_tokens(c["lat"], cfg["patch_size"]))
        T, H, W = c["grid"]
        g = torch.stack(torch.meshgrid(torch.arange(T), torch.arange(H), torch.arange(W),
                                       indexing="ij"), -1).reshape(-1, 3)
        pos.append(g)
        cu.append(cu[-1] + T * H * W)
        cu_t.append(cu_t[-1] + c["text"].shape[0])
    f32, i32 = torch.float32, torch.int32
    save_file({"batch.x": torch.cat(x).to(f32).contiguous(),
               "batch.target": torch.cat([c["target"] for c in clips]).to(f32).contiguous(),
               "batch.t": torch.tensor([c["t"] for c in clips], dtype=f32),
               "batch.loss_weight": torch.tensor([c["w"] for c in clips], dtype=f32),
               "batch.pos": torch.cat(pos).to(i32).contiguous(),
               "batch.cu_seqlens": torch.tensor(cu, dtype=i32),
               "batch.text": torch.cat([c["text"] for c in clips]).to(f32).contiguous(),
               "batch.cu_text": torch.tensor(cu_t, dtype=i32)}, path)


def diffusers_step(m, cfg, clips):
    """Loss, output tokens (L, P), dL/dx tokens and parameter gradients, clip by clip."""
    m.zero_grad()
    outs, dxs, total = [], [], 0.0
    for c in clips:
        lat = c["lat"][None].clone().requires_grad_(True)
        ts = torch.tensor([c["t"]], dtype=torch.float32) * 1000  # tessera: t * 1000 in fp32
        out = m(hidden_states=lat, timestep=ts, encoder_hidden_states=c["text"][None]).sample
        tok = to_tokens(out[0], cfg["patch_size"])
        loss = c["w"] * ((tok - c["target"]) ** 2).sum()
        loss.backward()
        total += loss.item()
        outs.append(tok.detach())
        dxs.append(to_tokens(lat.grad[0], cfg["patch_size"]))
    grads = dict(tessera_layout(n, p.grad, cfg) for n, p in m.named_parameters())
    return total, torch.cat(outs), torch.cat(dxs), grads


def compare(name, work, tessera, runner, cfg):
    m = make_model(cfg, seed=len(name))
    src, ckpt = f"{work}/{name}-diffusers", f"{work}/{name}.ckpt"
    m.save_pretrained(src)
    t0 = time.time()
    run([tessera, "convert", src, "--out", ckpt])
    conv_s = time.time() - t0
    clips = make_batch(cfg, seed=7)
    write_inputs(f"{work}/{name}.in", cfg, clips)
    run([runner, ckpt, f"{work}/{name}.in", f"{work}/{name}.out"])
    got = load_file(f"{work}/{name}.out")
    with open(f"{work}/{name}.out", "rb") as f:  # the loss is in the metadata
        n = int.from_bytes(f.read(8), "little")
        c_loss = float(json.loads(f.read(n))["__metadata__"]["loss"])
    loss, out, dx, grads = diffusers_step(m, cfg, clips)
    rows = [("loss", abs(c_loss - loss) / abs(loss)), ("output", rel(got["pred"], out)),
            ("dL/dx", rel(got["dx"], dx))]
    rows += [("grad." + k, rel(got["grad." + k], g)) for k, g in sorted(grads.items())]
    extra = sorted(k for k in got if k.startswith("grad.") and k[5:] not in grads)
    check(not extra, f"{name}: tessera has no tensor diffusers lacks {extra}")
    worst = max(rows[3:], key=lambda r: r[1])
    print(f"{name}: {len(clips)} clips of {[c['target'].shape[0] for c in clips]} tokens, "
          f"captions of {[c['text'].shape[0] for c in clips]}; convert {conv_s:.2f} s")
    for what, e in rows[:3] + [worst]:
        check(e <= TOL, f"{name}: {what} relative error {e:.3e} (tolerance {TOL:g})")
    bad = [r for r in rows if r[1] > TOL]
    check(not bad, f"{name}: all {len(rows)} quantities within {TOL:g} {bad[:3]}")
    if name == "wan2.1":  # the check can fail: one detail of the model off
        run([tessera, "convert", src, "--out", f"{work}/off.ckpt", "--set", "model.rope_theta=100"])
        run([runner, f"{work}/off.ckpt", f"{work}/{name}.in", f"{work}/off.out"])
        e = rel(load_file(f"{work}/off.out")["pred"], out)
        check(e > TOL, f"{name}: RoPE base 100 instead of 10000 is caught: output error {e:.3e}")
    return m, src, ckpt


def round_trips(name, work, tessera, m, ckpt):
    back, again = f"{work}/{name}-back", f"{work}/{name}-again.ckpt"
    run([tessera, "convert", ckpt, "--to", "diffusers", "--out", back])
    m2 = WanTransformer3DModel.from_pretrained(back)
    sd, sd2 = m.state_dict(), m2.state_dict()
    same = sd.keys() == sd2.keys() and all(torch.equal(sd[k], sd2[k]) for k in sd)
    check(same, f"{name}: diffusers -> tessera -> diffusers (fp32): from_pretrained loads it, "
          f"{len(sd)} tensors bitwise equal")
    run([tessera, "convert", back, "--out", again])
    a, b = load_file(ckpt), load_file(again)
    check(a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a),
          f"{name}: tessera -> diffusers -> tessera: {len(a)} tensors bitwise equal")
    # bf16, saved in shards with the index
    bsrc, bck, bback = f"{work}/{name}-bf16", f"{work}/{name}-bf16.ckpt", f"{work}/{name}-bf16-back"
    m.to(torch.bfloat16).save_pretrained(bsrc, max_shard_size="20KB")
    shards = [f for f in os.listdir(bsrc) if f.endswith(".safetensors")]
    run([tessera, "convert", bsrc, "--out", bck])
    run([tessera, "convert", bck, "--to", "diffusers", "--dtype", "bf16", "--out", bback])
    sd, sd2 = m.state_dict(), load_file(f"{bback}/diffusion_pytorch_model.safetensors")
    same = sd.keys() == sd2.keys() and all(sd2[k].dtype == torch.bfloat16 and torch.equal(sd[k], sd2[k])
                                           for k in sd)
    check(same and len(shards) > 1, f"{name}: bf16 in {len(shards)} shards -> tessera -> bf16: "
          "bitwise equal")
    m.float()


def refusals(work, tessera, src):
    """Broken folders: each refused with the tensor named, nothing written."""
    sd = load_file(f"{src}/diffusion_pytorch_model.safetensors")
    cases = {"missing": ("blocks.1.attn2.to_k.bias", None),
             "misshapen": ("blocks.0.ffn.net.2.weight", torch.zeros(3, 3)),
             "unknown": ("blocks.0.attn2.add_k_proj.weight", torch.zeros(4, 4)),
             "f16": ("proj_out.bias", sd["proj_out.bias"].half())}
    for case, (key, val) in cases.items():
        d = f"{work}/bad-{case}"
        os.makedirs(d, exist_ok=True)
        bad = dict(sd)
        if val is None:
            del bad[key]
        else:
            bad[key] = val
        save_file(bad, f"{d}/diffusion_pytorch_model.safetensors")
        with open(f"{src}/config.json") as f, open(f"{d}/config.json", "w") as g:
            g.write(f.read())
        p = run([tessera, "convert", d, "--out", f"{d}.ckpt"], expect_ok=False)
        msg = ((p.stdout + p.stderr).strip().splitlines() or [""])[-1]
        check(p.returncode != 0 and key in msg and not os.path.exists(f"{d}.ckpt"),
              f"refused, {case}: ...{msg[-140:]}")


def main():
    work, tessera, runner = sys.argv[1:4]
    torch.set_num_threads(2)
    dlogging.set_verbosity_error()  # its advice on bf16 casts: the bf16 case is deliberate
    for name, cfg in CONFIGS.items():
        m, src, ckpt = compare(name, work, tessera, runner, cfg)
        round_trips(name, work, tessera, m, ckpt)
    refusals(work, tessera, f"{work}/wan2.1-diffusers")
    print(f"wan_golden: {'FAIL (' + str(len(failures)) + ')' if failures else 'PASS'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
