#!/usr/bin/env python3
"""tests/model/wan_lora_golden.py WORK TESSERA WAN_GOLDEN_RUN — LoRA adapters against PEFT.

A tiny random WanTransformer3DModel (wan_golden.py's wan2.1 configuration and model), converted
with `tessera convert`; PEFT adapters (LoraConfig(r, lora_alpha, target_modules = every block
linear and the modulation's: condition_embedder.time_embedder.linear_1/2, time_proj),
inject_adapter_in_model) with A as PEFT initialises it and B random (non-zero, so the
adapters change the output and every adapter gradient is non-trivial), saved as diffusers'
pipeline LoRA file (transformer.-prefixed keys, lora_adapter_metadata):
- tessera loads that file (model/io/lora_io.h) and its CPU fp32 forward and backward of packed
  clips with captions (wan_golden_run) equal PEFT's autograd clip by clip: relative error of
  the loss, the output, dL/dx, every adapter gradient and every base gradient, each <= TOL;
- the file tessera writes back (lora_save) loads into a fresh diffusers model with
  load_lora_adapter: rank and alpha from its metadata, every adapter matrix bitwise equal,
  and that model's output equals tessera's within TOL;
- `tessera convert --merge-lora`: the merged checkpoint's output equals PEFT's within TOL,
  and exported with --to diffusers it loads with from_pretrained and gives that output too;
- tessera's file records the base's weights checksum: merging it into another base of the
  same shapes is refused;
- the comparison can fail: tessera without the adapters is off by more than TOL.
Prints the max differences; exit 1 on any failure."""
import json
import os
import sys

import torch
from peft import LoraConfig, get_peft_model_state_dict, inject_adapter_in_model
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wan_golden as wg  # noqa: E402  (its tiny model, batch, layouts and checks)

TOL = 1e-4
RANK, ALPHA = 4, 6.0
TARGETS = ["attn1.to_q", "attn1.to_k", "attn1.to_v", "attn1.to_out.0", "attn2.to_q",
           "attn2.to_k", "attn2.to_v", "attn2.to_out.0", "ffn.net.0.proj", "ffn.net.2",
           # the modulation: the time embedding's linears and the shared modulation projection
           "condition_embedder.time_embedder.linear_1",
           "condition_embedder.time_embedder.linear_2", "condition_embedder.time_proj"]


def with_adapters(m):
    """PEFT's adapters on m: A as PEFT initialises it, B ~ N(0, 0.3)."""
    torch.manual_seed(11)
    inject_adapter_in_model(LoraConfig(r=RANK, lora_alpha=ALPHA, target_modules=TARGETS), m)
    with torch.no_grad():
        for n, p in m.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.3)
            p.requires_grad_(True)  # base too: its gradients are compared as well
    return m


def save_peft_file(m, path):
    """The adapters as diffusers' pipelines save them (save_lora_weights' layout)."""
    sd = {"transformer." + k: v.contiguous() for k, v in get_peft_model_state_dict(m).items()}
    meta = {"transformer.r": RANK, "transformer.lora_alpha": ALPHA,
            "transformer.target_modules": TARGETS}
    save_file(sd, path, metadata={"format": "pt", "lora_adapter_metadata": json.dumps(meta)})
    return sd


def peft_step(m, cfg, clips):
    """Loss, output (L, P), dL/dx, adapter gradients (tessera's names), base gradients."""
    m.zero_grad()
    outs, dxs, total = [], [], 0.0
    for c in clips:
        lat = c["lat"][None].clone().requires_grad_(True)
        ts = torch.tensor([c["t"]], dtype=torch.float32) * 1000
        out = m(hidden_states=lat, timestep=ts, encoder_hidden_states=c["text"][None]).sample
        tok = wg.to_tokens(out[0], cfg["patch_size"])
        loss = c["w"] * ((tok - c["target"]) ** 2).sum()
        loss.backward()
        total += loss.item()
        outs.append(tok.detach())
        dxs.append(wg.to_tokens(lat.grad[0], cfg["patch_size"]))
    named = list(m.named_parameters())
    lora = {n.replace(".default", ""): p.grad for n, p in named if "lora_" in n}
    base = dict(wg.tessera_layout(n.replace(".base_layer", ""), p.grad, cfg)
                for n, p in named if "lora_" not in n)
    return total, torch.cat(outs), torch.cat(dxs), lora, base


def read_out(path):
    got = load_file(path)
    with open(path, "rb") as f:  # the loss is in the metadata
        n = int.from_bytes(f.read(8), "little")
        return got, float(json.loads(f.read(n))["__metadata__"]["loss"])


def compare(work, tessera, runner):
    cfg = wg.CONFIGS["wan2.1"]
    m = wg.make_model(cfg, seed=3)
    src, ckpt = f"{work}/base-diffusers", f"{work}/base.ckpt"
    m.save_pretrained(src)
    wg.run([tessera, "convert", src, "--out", ckpt])
    with_adapters(m)
    peft_file, back = f"{work}/peft_lora.safetensors", f"{work}/tessera_lora.safetensors"
    sd = save_peft_file(m, peft_file)
    clips = wg.make_batch(cfg, seed=7)
    wg.write_inputs(f"{work}/in", cfg, clips)
    wg.run([runner, ckpt, f"{work}/in", f"{work}/out", peft_file, back])
    got, c_loss = read_out(f"{work}/out")
    loss, out, dx, lora, base = peft_step(m, cfg, clips)
    rows = [("loss", abs(c_loss - loss) / abs(loss)), ("output", wg.rel(got["pred"], out)),
            ("dL/dx", wg.rel(got["dx"], dx))]
    lrows = [("lora_grad." + k, wg.rel(got["lora_grad." + k], g)) for k, g in sorted(lora.items())]
    brows = [("grad." + k, wg.rel(got["grad." + k], g)) for k, g in sorted(base.items())]
    print(f"wan2.1 + LoRA r={RANK} alpha={ALPHA:g} on {len(TARGETS) - 3} modules x "
          f"{cfg['num_layers']} blocks and 3 modulation linears: {len(lrows)} adapter tensors")
    for what, e in rows + [max(lrows, key=lambda r: r[1]), max(brows, key=lambda r: r[1])]:
        wg.check(e <= TOL, f"{what} relative error {e:.3e} (tolerance {TOL:g})")
    bad = [r for r in rows + lrows + brows if r[1] > TOL]
    wg.check(not bad, f"all {len(rows + lrows + brows)} quantities within {TOL:g} {bad[:3]}")
    wg.check(len(lrows) == len(sd), f"tessera has a gradient for each of PEFT's {len(sd)} adapters")
    return cfg, clips, out, sd, back, ckpt


def diffusers_out(m, cfg, clips):
    with torch.no_grad():
        return torch.cat([wg.to_tokens(m(hidden_states=c["lat"][None],
                                         timestep=torch.tensor([c["t"]]) * 1000,
                                         encoder_hidden_states=c["text"][None]).sample[0],
                                       cfg["patch_size"]) for c in clips])


def merged(work, tessera, runner, cfg, clips, out, adapters, ckpt):
    mck, mdir = f"{work}/merged.ckpt", f"{work}/merged-diffusers"
    wg.run([tessera, "convert", ckpt, "--merge-lora", adapters, "--out", mck])
    wg.run([runner, mck, f"{work}/in", f"{work}/merged.out"])
    pred = load_file(f"{work}/merged.out")["pred"]
    e = wg.rel(pred, out)
    wg.check(e <= TOL, f"convert --merge-lora: output relative error {e:.3e} against PEFT's")
    wg.run([tessera, "convert", mck, "--to", "diffusers", "--out", mdir])
    e = wg.rel(diffusers_out(wg.WanTransformer3DModel.from_pretrained(mdir), cfg, clips), pred)
    wg.check(e <= TOL, f"the merged model in diffusers: output relative error {e:.3e} against "
             "tessera's merged checkpoint")
    other, ock = f"{work}/other-diffusers", f"{work}/other.ckpt"  # same shapes, other weights
    wg.make_model(cfg, seed=4).save_pretrained(other)
    wg.run([tessera, "convert", other, "--out", ock])
    p = wg.run([tessera, "convert", ock, "--merge-lora", adapters, "--out", f"{work}/x.ckpt"],
               expect_ok=False)
    msg = (p.stdout + p.stderr).strip()
    wg.check(p.returncode != 0 and "base weights" in msg and not os.path.exists(f"{work}/x.ckpt"),
             f"tessera's adapters onto another base of the same shapes refused: ...{msg[-120:]}")


def files(work, tessera, runner, cfg, clips, out, sd, back, ckpt):
    m2 = wg.make_model(cfg, seed=3)
    # a folder and weight_name, as pipelines load them: the metadata is read from .safetensors
    m2.load_lora_adapter(os.path.dirname(back), weight_name=os.path.basename(back),
                         prefix="transformer", adapter_name="tessera")
    pc = m2.peft_config["tessera"]
    wg.check(pc.r == RANK and pc.lora_alpha == ALPHA and set(pc.target_modules) == set(TARGETS),
             f"diffusers reads tessera's file: r {pc.r}, alpha {pc.lora_alpha}, "
             f"{len(pc.target_modules)} target modules")
    sd2 = {k.replace(".tessera", ""): v for k, v in m2.state_dict().items() if "lora_" in k}
    same = all(torch.equal(sd2[k.removeprefix("transformer.")], v) for k, v in sd.items())
    wg.check(same and len(sd2) == len(sd), f"its {len(sd2)} adapter matrices bitwise equal PEFT's")
    got, _ = read_out(f"{work}/out")
    e = wg.rel(got["pred"], diffusers_out(m2, cfg, clips))
    wg.check(e <= TOL, f"diffusers with tessera's adapter file: output relative error {e:.3e}")
    for case, key, val in [("unknown", "transformer.blocks.0.attn1.to_q.lora_C.weight", None),
                           ("misshapen", "transformer.blocks.1.ffn.net.2.lora_B.weight", None)]:
        bad = dict(sd)
        bad[key] = torch.zeros(3, 3) if case == "misshapen" else torch.zeros(RANK, 3)
        save_file(bad, f"{work}/bad.safetensors", metadata={
            "lora_adapter_metadata": json.dumps({"transformer.r": RANK, "transformer.lora_alpha":
                                                 ALPHA, "transformer.target_modules": TARGETS})})
        p = wg.run([runner, ckpt, f"{work}/in", f"{work}/bad.out", f"{work}/bad.safetensors",
                    f"{work}/bad-back.safetensors"], expect_ok=False)
        msg = (p.stdout + p.stderr).strip()
        wg.check(p.returncode != 0 and key in msg, f"adapter file refused, {case}: ...{msg[-150:]}")
    wg.run([runner, ckpt, f"{work}/in", f"{work}/plain.out"])
    e = wg.rel(load_file(f"{work}/plain.out")["pred"], out)
    wg.check(e > TOL, f"the comparison can fail: without the adapters the output is off by {e:.3e}")


def main():
    work, tessera, runner = sys.argv[1:4]
    torch.set_num_threads(2)
    cfg, clips, out, sd, back, ckpt = compare(work, tessera, runner)
    files(work, tessera, runner, cfg, clips, out, sd, back, ckpt)
    merged(work, tessera, runner, cfg, clips, out, back, ckpt)
    print(f"wan_lora_golden: {'FAIL (' + str(len(wg.failures)) + ')' if wg.failures else 'PASS'}")
    return 1 if wg.failures else 0


if __name__ == "__main__":
    sys.exit(main())
