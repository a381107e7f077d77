#!/usr/bin/env python3
"""tests/model/wan_solvers.py WORK TESSERA — Wan 2.2's two experts and UniPC against WanPipeline.

Two tiny random WanTransformer3DModels of wan_sample.py's configuration (random init plus
N(0, 0.1), seeds 0 and 7; nothing downloaded) are `tessera convert`ed. Diffusers' WanPipeline
(no VAE, no text encoder: output_type="latent", embeddings padded to max_sequence_length
given, fp32) runs from given noise:
  - two experts: transformer = model A, transformer_2 = model B, boundary_ratio R, with
    FlowMatchEulerDiscreteScheduler(shift) and guidance_scale / guidance_scale_2, against
    `tessera sample --ckpt A --ckpt2 B --boundary R --cfg g --cfg2 g2`;
  - UniPC: UniPCMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True,
    num_train_timesteps=1000, flow_shift=S) (diffusers' defaults otherwise: solver_order 2,
    bh2, predict_x0, lower_order_final) against `tessera sample --solver unipc --schedule wan
    --shift S`, for several step counts, and once with both experts.
The final latents must agree within TOL (relative: norm of the difference / norm of
diffusers'). The comparison can fail: the experts swapped, and Euler in place of UniPC, each
give an error above TOL. Refused naming the option: --boundary without --ckpt2, a --ckpt2 of
another shape, --solver unipc with --schedule tessera.
Prints the max differences; exit 1 on any failure."""
import os
import sys

import torch
from diffusers import (FlowMatchEulerDiscreteScheduler, UniPCMultistepScheduler, WanPipeline,
                       WanTransformer3DModel)
from diffusers.utils import logging as dlogging
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wan_sample as ws  # noqa: E402  (configuration, padding, noise file, comparison)

# UniPC: its coefficients in double here, fp32 scalars in diffusers; 1e-4 as the Euler test
TOL = 1e-4
F, H, W = ws.F, ws.H, ws.W
check = ws.check


def random_model(seed):
    torch.manual_seed(seed)
    m = WanTransformer3DModel(**ws.CFG).float()
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return m


def diffusers_latents(a, b, noise, pos, neg, steps, g, g2=None, boundary=None, unipc=False,
                      shift=5.0):
    sched = (UniPCMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True,
                                     num_train_timesteps=1000, flow_shift=shift)
             if unipc else FlowMatchEulerDiscreteScheduler(shift=shift))
    pipe = WanPipeline(tokenizer=None, text_encoder=None, vae=None, transformer=a,
                       transformer_2=b, boundary_ratio=boundary, scheduler=sched)
    pipe.set_progress_bar_config(disable=True)
    kw = dict(guidance_scale_2=g2) if boundary is not None else {}
    with torch.no_grad():
        out = pipe(prompt_embeds=pos[None], negative_prompt_embeds=neg[None],
                   latents=noise.clone(), num_inference_steps=steps, guidance_scale=g,
                   height=16 * H, width=16 * W, num_frames=4 * (F - 1) + 1,
                   output_type="latent", return_dict=False, **kw)[0]
    return out[0]


def tessera_latents(work, tsr, name, ckpt, steps, g, extra, shift=5.0):
    lat = f"{work}/{name}.safetensors"
    cmd = [tsr, "sample", "--ckpt", ckpt, "--raw", "--frames", str(F), "--size", f"{H}x{W}",
           "--steps", str(steps), "--schedule", "wan", "--shift", str(shift), "--cfg", str(g),
           "--noise", f"{work}/noise.safetensors", "--caption", f"{work}/pos.safetensors",
           "--negative", f"{work}/neg.safetensors", "--latents-out", lat, "--backend", "cpu",
           "--precision", "fp32", "--out", f"{work}/{name}.mp4"] + extra
    ws.run(cmd)
    return load_file(lat)["latents"].permute(3, 0, 1, 2)


def main():
    work, tsr = sys.argv[1], sys.argv[2]
    dlogging.set_verbosity_error()
    a, b = random_model(0), random_model(7)
    ck = {}
    for name, m in (("A", a), ("B", b)):
        m.save_pretrained(f"{work}/{name}")
        ck[name] = f"{work}/{name}.ckpt"
        ws.run([tsr, "convert", f"{work}/{name}", "--out", ck[name], "--set",
                f"model.text_len={ws.TEXT_LEN}", "--set", "model.recompute=0"])
    g = torch.Generator().manual_seed(1)
    noise = torch.randn(1, ws.CFG["in_channels"], F, H, W, generator=g)
    pos = torch.randn(5, ws.CFG["text_dim"], generator=g)
    neg = torch.randn(1, ws.CFG["text_dim"], generator=g)
    save_file({"latents": noise[0].permute(1, 2, 3, 0).contiguous()},
              f"{work}/noise.safetensors", metadata=ws.latent_meta())
    save_file({"text_emb": pos}, f"{work}/pos.safetensors")
    save_file({"text_emb": neg}, f"{work}/neg.safetensors")
    P, N = ws.padded(pos, ws.TEXT_LEN), ws.padded(neg, ws.TEXT_LEN)

    # two experts, Euler: (steps, boundary, guidance, guidance_2); with shift 5 the timesteps
    # of 6 steps are 1000, 952.7, 883.2, 771.4, 561.6, 24.4 (0.875 splits them 3 / 3), of 4
    # steps 1000, 909.7, 717.3, 24.4 (0.9: 2 / 2)
    for steps, bnd, gs, gs2 in [(6, 0.875, 4.0, 2.0), (4, 0.9, 5.0, 1.5)]:
        ref = diffusers_latents(a, b, noise, P, N, steps, gs, gs2, boundary=bnd)
        got = tessera_latents(work, tsr, f"x{steps}-{bnd}", ck["A"], steps, gs,
                              ["--ckpt2", ck["B"], "--boundary", str(bnd), "--cfg2", str(gs2)])
        e, mx = ws.compare(got, ref)
        check(e <= TOL, f"two experts, {steps} steps, boundary {bnd:g}, guidance {gs:g} / "
              f"{gs2:g}: rel. error {e:.2e} (max abs {mx:.2e}) <= {TOL:g}")
    steps, bnd, gs, gs2 = 6, 0.875, 4.0, 2.0
    ref = diffusers_latents(a, b, noise, P, N, steps, gs, gs2, boundary=bnd)
    e, _ = ws.compare(tessera_latents(work, tsr, "swapped", ck["B"], steps, gs,
                                      ["--ckpt2", ck["A"], "--boundary", str(bnd), "--cfg2",
                                       str(gs2)]), ref)
    check(e > TOL, f"the comparison can fail: the experts swapped give {e:.2e} > {TOL:g}")

    # UniPC: (steps, shift, guidance)
    for steps, shift, gs in [(1, 5.0, 5.0), (3, 5.0, 5.0), (8, 3.0, 2.5)]:
        ref = diffusers_latents(a, None, noise, P, N, steps, gs, unipc=True, shift=shift)
        got = tessera_latents(work, tsr, f"u{steps}", ck["A"], steps, gs, ["--solver", "unipc"],
                              shift=shift)
        e, mx = ws.compare(got, ref)
        check(e <= TOL, f"UniPC, {steps} steps, shift {shift:g}, guidance {gs:g}: rel. error "
              f"{e:.2e} (max abs {mx:.2e}, |ref| max {ref.abs().max().item():.2f}) <= {TOL:g}")
    steps, shift, gs = 8, 3.0, 2.5
    ref = diffusers_latents(a, None, noise, P, N, steps, gs, unipc=True, shift=shift)
    e, _ = ws.compare(tessera_latents(work, tsr, "euler", ck["A"], steps, gs, [], shift=shift),
                      ref)
    check(e > TOL, f"the comparison can fail: Euler in place of UniPC gives {e:.2e} > {TOL:g}")
    # UniPC's 8 timesteps at shift 3: 999, 954, 900, 833, ...: 900 is on the boundary 0.9 and
    # belongs to the first expert (t >= boundary)
    ref = diffusers_latents(a, b, noise, P, N, steps, gs, 1.5, boundary=0.9, unipc=True,
                            shift=shift)
    e, mx = ws.compare(tessera_latents(work, tsr, "ux", ck["A"], steps, gs,
                                       ["--solver", "unipc", "--ckpt2", ck["B"], "--boundary",
                                        "0.9", "--cfg2", "1.5"], shift=shift), ref)
    check(e <= TOL, f"UniPC with two experts, {steps} steps, boundary 0.9: rel. error {e:.2e} "
          f"(max abs {mx:.2e}) <= {TOL:g}")

    # refusals
    small = dict(ws.CFG, num_layers=1)
    WanTransformer3DModel(**small).save_pretrained(f"{work}/small")
    ws.run([tsr, "convert", f"{work}/small", "--out", f"{work}/small.ckpt", "--set",
            f"model.text_len={ws.TEXT_LEN}", "--set", "model.recompute=0"])
    base = [tsr, "sample", "--ckpt", ck["A"], "--raw", "--frames", str(F), "--size", f"{H}x{W}",
            "--steps", "1", "--out", f"{work}/x.mp4", "--caption", f"{work}/pos.safetensors"]
    ws.refused(base, [(["--boundary", "0.5"], "--boundary: only with --ckpt2"),
                      (["--ckpt2", f"{work}/small.ckpt"], "--ckpt2"),
                      (["--solver", "unipc"], "--schedule wan"),
                      (["--solver", "dpm"], "--solver")])
    ws.finish()


if __name__ == "__main__":
    main()
