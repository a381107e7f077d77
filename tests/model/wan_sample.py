#!/usr/bin/env python3
"""tests/model/wan_sample.py WORK TESSERA — `tessera sample` against diffusers' WanPipeline.

A tiny random WanTransformer3DModel (made here with diffusers, random init plus N(0, 0.1) on
every parameter; nothing downloaded) is `tessera convert`ed. Diffusers' own WanPipeline (no
VAE, no text encoder: output_type="latent", the embeddings given, the transformer in fp32)
runs FlowMatchEulerDiscreteScheduler(shift) with classifier-free guidance from given noise;
`tessera sample --schedule wan --shift S --noise FILE --negative FILE --latents-out FILE`
(CPU, fp32) runs from the same noise, weights and embeddings: the pipeline gets the captions
padded with zero rows to max_sequence_length (= model.text_len), tessera the unpadded ones
(a 5-token prompt, a 1-token "empty prompt" as the negative) and pads them itself
(model.text_pad = 1, which convert sets); once also the padded files. The final latents must
agree within TOL (relative: norm of the difference / norm of diffusers'; max abs printed
too), for several (steps, shift, guidance) settings.

The comparison can fail: tessera's own schedule (--schedule tessera) and a model converted
with model.text_pad = 0 (the captions without their pad rows, which pass through the text
projection and are attended to) each give an error above TOL. Refused naming the option: a --noise of another grid, a --negative
of another width, --schedule other than tessera or wan.
Prints the max differences; exit 1 on any failure."""
import subprocess
import sys

import torch
from diffusers import FlowMatchEulerDiscreteScheduler, WanPipeline, WanTransformer3DModel
from diffusers.utils import logging as dlogging
from safetensors.torch import load_file, save_file

TOL = 1e-4
CFG = dict(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=4,
           out_channels=4, text_dim=8, freq_dim=16, ffn_dim=40, num_layers=2)
TEXT_LEN = 64           # model.text_len: what the pipeline's max_sequence_length is (Wan: 512)
F, H, W = 3, 4, 6       # latent frames, rows, columns (3 x 2 x 3 = 18 tokens)
# (steps, shift, guidance scale)
RUNS = [(4, 5.0, 5.0), (6, 3.0, 2.5), (3, 1.0, 1.0)]

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        print(p.stdout + p.stderr)
        raise SystemExit(f"FAIL: {' '.join(cmd)} exited {p.returncode}")
    return p


def refused(base, cases):
    """Each (extra, want) of cases: the command base + extra fails with want on stderr."""
    for extra, want in cases:
        p = subprocess.run(base + extra, capture_output=True, text=True)
        line = ([l for l in p.stderr.splitlines() if "error" in l] or p.stderr.splitlines() or [""])[0]
        check(p.returncode != 0 and want in p.stderr, f"refused: {' '.join(extra)}: {line[:150]}")


def finish():
    """Exits 1, counting them, if any check failed."""
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)


def padded(e, n):
    """e (k, D) padded with zero rows to (n, D), as WanPipeline pads umT5's output."""
    return torch.cat([e, e.new_zeros(n - e.shape[0], e.shape[1])])


def latent_meta():
    return {"format": "tessera-latents", "fps": "16", "vae_stride": "4x8x8"}


def diffusers_latents(model, noise, pos, neg, steps, shift, g):
    pipe = WanPipeline(tokenizer=None, text_encoder=None, vae=None, transformer=model,
                       scheduler=FlowMatchEulerDiscreteScheduler(shift=shift))
    pipe.set_progress_bar_config(disable=True)
    with torch.no_grad():
        out = pipe(prompt_embeds=pos[None], negative_prompt_embeds=neg[None] if g > 1 else None,
                   latents=noise.clone(), num_inference_steps=steps, guidance_scale=g,
                   height=16 * H, width=16 * W, num_frames=4 * (F - 1) + 1,
                   output_type="latent", return_dict=False)[0]
    return out[0]  # (C, F, H, W)


def tessera_latents(work, tsr, ckpt, name, steps, shift, g, pos_file, neg_file,
                    schedule="wan"):
    lat = f"{work}/{name}.safetensors"
    cmd = [tsr, "sample", "--ckpt", ckpt, "--raw", "--frames", str(F), "--size", f"{H}x{W}",
           "--steps", str(steps), "--schedule", schedule, "--shift", str(shift), "--cfg", str(g),
           "--noise", f"{work}/noise.safetensors", "--caption", pos_file, "--latents-out", lat,
           "--backend", "cpu", "--precision", "fp32", "--out", f"{work}/{name}.mp4"]
    if g != 1.0:
        cmd += ["--negative", neg_file]
    run(cmd)
    return load_file(lat)["latents"].permute(3, 0, 1, 2)  # (T, H, W, C) -> (C, F, H, W)


def compare(a, ref):
    d = (a.double() - ref.double())
    return d.norm().item() / ref.double().norm().item(), d.abs().max().item()


def main():
    work, tsr = sys.argv[1], sys.argv[2]
    dlogging.set_verbosity_error()
    torch.manual_seed(0)
    model = WanTransformer3DModel(**CFG).float()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(f"{work}/src")
    ckpt = f"{work}/wan.ckpt"
    run([tsr, "convert", f"{work}/src", "--out", ckpt, "--set", f"model.text_len={TEXT_LEN}",
         "--set", "model.recompute=0"])
    ckpt0 = f"{work}/wan-nopad.ckpt"
    run([tsr, "convert", f"{work}/src", "--out", ckpt0, "--set", f"model.text_len={TEXT_LEN}",
         "--set", "model.recompute=0", "--set", "model.text_pad=0"])

    g = torch.Generator().manual_seed(1)
    noise = torch.randn(1, CFG["in_channels"], F, H, W, generator=g)
    pos = torch.randn(5, CFG["text_dim"], generator=g)   # a 5-token prompt's embedding
    neg = torch.randn(1, CFG["text_dim"], generator=g)   # the empty prompt's: 1 token (EOS)
    save_file({"latents": noise[0].permute(1, 2, 3, 0).contiguous()},
              f"{work}/noise.safetensors", metadata=latent_meta())
    save_file({"text_emb": padded(pos, TEXT_LEN)}, f"{work}/pos.safetensors")
    save_file({"text_emb": padded(neg, TEXT_LEN)}, f"{work}/neg.safetensors")
    save_file({"text_emb": pos}, f"{work}/pos-unpadded.safetensors")
    save_file({"text_emb": neg}, f"{work}/neg-unpadded.safetensors")
    P, N = padded(pos, TEXT_LEN), padded(neg, TEXT_LEN)

    for steps, shift, gs in RUNS:
        ref = diffusers_latents(model, noise, P, N, steps, shift, gs)
        got = tessera_latents(work, tsr, ckpt, f"s{steps}", steps, shift, gs,
                              f"{work}/pos-unpadded.safetensors",
                              f"{work}/neg-unpadded.safetensors")
        e, m = compare(got, ref)
        check(e <= TOL, f"steps {steps}, shift {shift:g}, guidance {gs:g}: final latents "
              f"rel. error {e:.2e} (max abs {m:.2e}, |ref| max {ref.abs().max().item():.2f}) "
              f"<= {TOL:g}")

    steps, shift, gs = RUNS[0]
    ref = diffusers_latents(model, noise, P, N, steps, shift, gs)
    e, m = compare(tessera_latents(work, tsr, ckpt, "padded", steps, shift, gs,
                                   f"{work}/pos.safetensors", f"{work}/neg.safetensors"), ref)
    check(e <= TOL, f"captions padded in the files: rel. error {e:.2e} (max abs {m:.2e})")
    e, _ = compare(tessera_latents(work, tsr, ckpt, "own", steps, shift, gs,
                                   f"{work}/pos-unpadded.safetensors",
                                   f"{work}/neg-unpadded.safetensors", schedule="tessera"), ref)
    check(e > TOL, f"the comparison can fail: tessera's own schedule gives {e:.2e} > {TOL:g}")
    e, _ = compare(tessera_latents(work, tsr, ckpt0, "nopad", steps, shift, gs,
                                   f"{work}/pos-unpadded.safetensors",
                                   f"{work}/neg-unpadded.safetensors"), ref)
    check(e > TOL, f"the comparison can fail: model.text_pad = 0 (captions without their "
          f"padding) gives {e:.2e} > {TOL:g}")
    base = [tsr, "sample", "--ckpt", ckpt, "--raw", "--frames", str(F), "--size", f"{H}x{W}",
            "--steps", "1", "--out", f"{work}/x.mp4", "--caption", f"{work}/pos.safetensors"]
    save_file({"latents": torch.zeros(F, H, W + 2, CFG["in_channels"])},
              f"{work}/noise-wide.safetensors", metadata=latent_meta())
    save_file({"text_emb": torch.zeros(1, CFG["text_dim"] + 1)}, f"{work}/neg-wide.safetensors")
    refused(base, [(["--noise", f"{work}/noise-wide.safetensors"], "--noise"),
                   (["--negative", f"{work}/neg-wide.safetensors", "--cfg", "2"], "text_dim"),
                   (["--schedule", "karras"], "--schedule")])
    finish()


if __name__ == "__main__":
    main()
