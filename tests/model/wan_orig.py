#!/usr/bin/env python3
"""tests/model/wan_orig.py WORK TESSERA — `tessera convert` of the original Wan checkpoint format.

A random state dict in the original naming and shapes of Wan-AI's WanModel (wan/modules/
model.py: patch_embedding, text_embedding.0/2, time_embedding.0/2, time_projection.1,
blocks.N.self_attn/cross_attn.q/k/v/o/norm_q/norm_k, blocks.N.norm3, blocks.N.ffn.0/2,
blocks.N.modulation, head.head, head.modulation) is made here and converted twice:
 - by diffusers' own single-file converter (diffusers.loaders.single_file_utils.
   convert_wan_transformer_to_diffusers, what WanTransformer3DModel.from_single_file uses),
   loaded strictly into a WanTransformer3DModel of the expected configuration;
 - by `tessera convert SRC --out CKPT`, then `tessera convert CKPT --to diffusers`.
Every tensor of tessera's diffusers folder must equal diffusers' conversion bit for bit
(values of the source dtype), and its config.json the configuration (from the shapes: hidden,
channels, patch, text_dim, freq_dim, ffn_dim, layers; the heads from hidden / 128 or
--set model.heads). Cases: one .safetensors file, bf16, names under "model.diffusion_model.",
hidden 256 (heads 256 / 128 = 2); a sharded folder with the index, f32, hidden 24, heads by
--set model.heads=2. Refused naming the cause: hidden 24 without model.heads, an
image-to-video tensor (img_emb), a .pth file, a missing block tensor.
Prints what it checked; exit 1 on any failure."""
import json
import os
import sys

import torch
from diffusers import WanTransformer3DModel
from diffusers.loaders.single_file_utils import convert_wan_transformer_to_diffusers
from diffusers.utils import logging as dlogging
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wan_golden as wg  # noqa: E402  (check, run)

check, run, failures = wg.check, wg.run, wg.failures


def original_state(dim, heads, ffn, layers, c, patch, text_dim, freq_dim, dtype, seed):
    """WanModel's parameters by name and shape (the original repository's layout)."""
    g = torch.Generator().manual_seed(seed)
    pt, ph, pw = patch
    shapes = {"patch_embedding.weight": (dim, c, pt, ph, pw), "patch_embedding.bias": (dim,),
              "text_embedding.0.weight": (dim, text_dim), "text_embedding.0.bias": (dim,),
              "text_embedding.2.weight": (dim, dim), "text_embedding.2.bias": (dim,),
              "time_embedding.0.weight": (dim, freq_dim), "time_embedding.0.bias": (dim,),
              "time_embedding.2.weight": (dim, dim), "time_embedding.2.bias": (dim,),
              "time_projection.1.weight": (6 * dim, dim), "time_projection.1.bias": (6 * dim,),
              "head.head.weight": (c * pt * ph * pw, dim), "head.head.bias": (c * pt * ph * pw,),
              "head.modulation": (1, 2, dim)}
    for i in range(layers):
        b = f"blocks.{i}."
        for a in ("self_attn", "cross_attn"):
            for p in "qkvo":
                shapes[f"{b}{a}.{p}.weight"] = (dim, dim)
                shapes[f"{b}{a}.{p}.bias"] = (dim,)
            shapes[f"{b}{a}.norm_q.weight"] = (dim,)
            shapes[f"{b}{a}.norm_k.weight"] = (dim,)
        shapes.update({f"{b}norm3.weight": (dim,), f"{b}norm3.bias": (dim,),
                       f"{b}ffn.0.weight": (ffn, dim), f"{b}ffn.0.bias": (ffn,),
                       f"{b}ffn.2.weight": (dim, ffn), f"{b}ffn.2.bias": (dim,),
                       f"{b}modulation": (1, 6, dim)})
    return {k: (0.3 * torch.randn(s, generator=g)).to(dtype) for k, s in shapes.items()}


def diffusers_reference(state, cfg):
    """diffusers' conversion of the original state dict, loaded strictly into the model."""
    conv = convert_wan_transformer_to_diffusers({k: v.clone() for k, v in state.items()})
    m = WanTransformer3DModel(**cfg)
    missing, unexpected = m.load_state_dict({k: v.float() for k, v in conv.items()}, strict=False)
    check(not missing and not unexpected, f"diffusers' converter gives exactly the model's "
          f"tensors (missing {len(missing)}, unexpected {len(unexpected)})")
    return conv


def compare_back(work, tsr, name, src, cfg, conv, sets=()):
    ck = f"{work}/{name}.ckpt"
    cmd = [tsr, "convert", src, "--out", ck, "--set", "model.text_len=16"]
    for s in sets:
        cmd += ["--set", s]
    p = run(cmd)
    print("     " + p.stderr.strip().splitlines()[-1][:160] if p.stderr.strip() else "")
    run([tsr, "convert", ck, "--to", "diffusers", "--out", f"{work}/{name}-back"])
    back = load_file(f"{work}/{name}-back/diffusion_pytorch_model.safetensors")
    same = set(back) == set(conv)
    bad = [k for k in conv if k in back and
           not torch.equal(back[k], conv[k].float().reshape(back[k].shape))]
    check(same and not bad, f"{name}: all {len(conv)} tensors equal diffusers' converter's "
          f"bitwise ({len(bad)} differ{', e.g. ' + bad[0] if bad else ''}; names "
          f"{'equal' if same else 'differ'})")
    got = json.load(open(f"{work}/{name}-back/config.json"))
    keys = ["num_attention_heads", "attention_head_dim", "in_channels", "out_channels",
            "text_dim", "freq_dim", "ffn_dim", "num_layers"]
    diff = [k for k in keys if got[k] != cfg[k]] + \
        (["patch_size"] if list(got["patch_size"]) != list(cfg["patch_size"]) else [])
    check(not diff, f"{name}: the config from the shapes is the model's ({diff or 'all keys'})")
    m = WanTransformer3DModel.from_pretrained(f"{work}/{name}-back")
    check(m.config.num_layers == cfg["num_layers"], f"{name}: from_pretrained loads the export")


def refused(tsr, src, want, what, sets=()):
    cmd = [tsr, "convert", src, "--out", "/dev/null/x.ckpt"]
    for s in sets:
        cmd += ["--set", s]
    p = run(cmd, expect_ok=False)
    line = ([ln for ln in p.stderr.splitlines() if "error" in ln] or [""])[0]
    check(p.returncode != 0 and want in p.stderr, f"refused: {what}: {line[:170]}")


def main():
    work, tsr = sys.argv[1], sys.argv[2]
    dlogging.set_verbosity_error()

    # 1. one file, bf16, under model.diffusion_model., hidden 256: heads = 256 / 128
    cfg = dict(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=128,
               in_channels=4, out_channels=4, text_dim=8, freq_dim=16, ffn_dim=40, num_layers=1)
    st = original_state(256, 2, 40, 1, 4, (1, 2, 2), 8, 16, torch.bfloat16, 1)
    conv = diffusers_reference(st, cfg)
    save_file({"model.diffusion_model." + k: v for k, v in st.items()}, f"{work}/a.safetensors")
    compare_back(work, tsr, "single-bf16-prefixed", f"{work}/a.safetensors", cfg, conv)

    # 2. a sharded folder with the index (as the 14B repositories), f32, hidden 24, 2 heads
    cfg = dict(patch_size=(2, 2, 2), num_attention_heads=2, attention_head_dim=12,
               in_channels=6, out_channels=6, text_dim=10, freq_dim=16, ffn_dim=56, num_layers=2)
    st = original_state(24, 2, 56, 2, 6, (2, 2, 2), 10, 16, torch.float32, 2)
    conv = diffusers_reference(st, cfg)
    d = f"{work}/b"
    run(["mkdir", "-p", d])
    names = sorted(st)
    half = len(names) // 2
    shards = {"diffusion_pytorch_model-00001-of-00002.safetensors": names[:half],
              "diffusion_pytorch_model-00002-of-00002.safetensors": names[half:]}
    weight_map = {}
    for f, ks in shards.items():
        save_file({k: st[k] for k in ks}, f"{d}/{f}")
        weight_map.update({k: f for k in ks})
    json.dump({"metadata": {}, "weight_map": weight_map},
              open(f"{d}/diffusion_pytorch_model.safetensors.index.json", "w"))
    compare_back(work, tsr, "sharded-f32", d, cfg, conv, sets=["model.heads=2"])

    # refusals
    refused(tsr, d, "model.heads", "hidden 24 without model.heads")
    save_file(dict(st, **{"img_emb.proj.0.weight": torch.zeros(4)}), f"{work}/i2v.safetensors")
    refused(tsr, f"{work}/i2v.safetensors", "img_emb", "an image-to-video tensor",
            sets=["model.heads=2"])
    torch.save(st, f"{work}/m.pth")
    refused(tsr, f"{work}/m.pth", "safetensors", "a .pth file")
    save_file({k: v for k, v in st.items() if k != "blocks.1.ffn.2.bias"},
              f"{work}/missing.safetensors")
    refused(tsr, f"{work}/missing.safetensors", "blocks.1.ffn.2.bias", "a missing tensor",
            sets=["model.heads=2"])
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)


if __name__ == "__main__":
    main()
