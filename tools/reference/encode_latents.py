#!/usr/bin/env python3
"""tools/reference/encode_latents.py — latent files for `tessera ingest --latents` from
videos, with a PyTorch video VAE you have; and videos back from `tessera sample` latents.

Not run in CI and fetches nothing: the VAE (and the text encoder) are loaded from local
paths you give. The latent file format is docs/store-format.md "Latent files"
(store/latent_file.h): a safetensors file per video with

    latents   (T, H, W, C)  bf16 or f32   the VAE encoder's output, normalised as the DiT
                                          should learn it ((z - mean) / std, or z * scale)
    text_emb  (N, D)        bf16 or f32   optional: the caption's embedding
    metadata  format = "tessera-latents", fps, vae_stride "TxSxS", source, caption

  encode VIDEO... --out DIR [--fps 16] [--size 480x832] [--vae KIND] [--vae-path DIR]
         [--captions captions.tsv] [--text-encoder DIR] [--dtype bf16|f32]
  decode LATENTS.safetensors --out clip.mp4 --vae KIND --vae-path DIR

VAE kinds:
  wan        diffusers AutoencoderKLWan (Wan 2.1: stride 4x8x8, 16 channels; causal:
             1 + 4k frames -> 1 + k latent frames), normalised with its latents_mean/std
  hunyuan    diffusers AutoencoderKLHunyuanVideo (4x8x8, 16 channels, scaling_factor)
  pool       no network: average pooling over 4x8x8 pixels, channels (R, G, B, luma) in
             [-1, 1]. Not a VAE: a way to try the whole pipeline (ingest, train, sample,
             decode) without weights; `decode` upsamples it back.
Captions: captions.tsv has lines "video path<TAB>caption"; with --text-encoder DIR (a local
T5 encoder, transformers T5EncoderModel + its tokenizer, as umT5 for Wan) each caption's
last hidden states (its real tokens, no padding) become text_emb.

Frames are read and written with the ffmpeg CLI (decoded to RGB at --fps and --size, the
short side resized and centre-cropped), so any container ffmpeg reads works.
"""
import argparse
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

FORMAT = "tessera-latents"


def read_frames(path, fps, height, width):
    """(F, height, width, 3) uint8 RGB frames of a video at fps, resized (short side) and
    centre-cropped to height x width, by the ffmpeg CLI."""
    vf = (f"fps={fps},scale={width}:{height}:force_original_aspect_ratio=increase,"
          f"crop={width}:{height}")
    raw = subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-i", path, "-vf", vf, "-f",
                          "rawvideo", "-pix_fmt", "rgb24", "-"], check=True,
                         stdout=subprocess.PIPE).stdout
    n = len(raw) // (height * width * 3)
    return np.frombuffer(raw[:n * height * width * 3], np.uint8).reshape(n, height, width, 3)


def write_video(path, frames, fps):
    """frames (F, H, W, 3) uint8 -> H.264 MP4 by the ffmpeg CLI."""
    f, h, w, _ = frames.shape
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "rawvideo", "-pix_fmt",
                    "rgb24", "-s", f"{w}x{h}", "-r", str(fps), "-i", "-", "-pix_fmt", "yuv420p",
                    "-c:v", "libx264", "-crf", "18", path], input=frames.tobytes(), check=True)


class PoolVAE:
    """Average pooling over stride_t x stride_s x stride_s pixels: 4 channels (R, G, B and
    luma, in [-1, 1]). Exactly invertible up to the pooling (decode repeats each value)."""
    stride = (4, 8, 8)
    channels = 4

    def encode(self, frames):  # (F, H, W, 3) uint8 -> (T, h, w, 4) float32
        t, s = self.stride[0], self.stride[1]
        f = frames.shape[0] // t * t
        x = frames[:f].astype(np.float32) / 127.5 - 1.0
        F, H, W, _ = x.shape
        x = x.reshape(F // t, t, H // s, s, W // s, s, 3).mean(axis=(1, 3, 5))
        luma = x @ np.array([0.299, 0.587, 0.114], np.float32)
        return np.concatenate([x, luma[..., None]], axis=-1)

    def decode(self, lat):  # (T, h, w, C) -> (T*t, h*s, w*s, 3) uint8
        t, s = self.stride[0], self.stride[1]
        rgb = np.clip((lat[..., :3] + 1.0) * 127.5, 0, 255).astype(np.uint8)
        return rgb.repeat(t, 0).repeat(s, 1).repeat(s, 2)


class DiffusersVAE:
    """A diffusers video VAE from a local directory (no download), in eval mode on the
    first CUDA device when there is one. Latents normalised as the model card says."""

    def __init__(self, kind, path):
        import torch
        import diffusers
        cls = {"wan": "AutoencoderKLWan", "hunyuan": "AutoencoderKLHunyuanVideo"}[kind]
        self.torch = torch
        self.dev = "cuda" if torch.cuda.is_available() else "cpu"
        self.vae = getattr(diffusers, cls).from_pretrained(path, local_files_only=True).to(self.dev).eval()
        cfg = self.vae.config
        self.stride = (getattr(cfg, "temporal_compression_ratio", 4) if kind == "hunyuan" else
                       2 ** sum(cfg.temperal_downsample), 8, 8)
        self.channels = cfg.z_dim if kind == "wan" else cfg.latent_channels
        if kind == "wan":  # per-channel statistics of the latents
            self.mean = np.array(cfg.latents_mean, np.float32)
            self.std = np.array(cfg.latents_std, np.float32)
        else:
            self.mean = np.zeros(self.channels, np.float32)
            self.std = np.full(self.channels, 1.0 / cfg.scaling_factor, np.float32)

    def encode(self, frames):
        torch = self.torch
        t = self.stride[0]
        f = 1 + (frames.shape[0] - 1) // t * t  # causal: 1 + t k frames
        x = torch.from_numpy(frames[:f]).to(self.dev).float() / 127.5 - 1.0
        x = x.permute(3, 0, 1, 2)[None]  # (1, 3, F, H, W)
        with torch.no_grad():
            z = self.vae.encode(x).latent_dist.mode()[0]  # (C, T, h, w)
        z = z.permute(1, 2, 3, 0).float().cpu().numpy()
        return (z - self.mean) / self.std

    def decode(self, lat):
        torch = self.torch
        z = lat * self.std + self.mean
        z = torch.from_numpy(z).to(self.dev).permute(3, 0, 1, 2)[None]
        with torch.no_grad():
            x = self.vae.decode(z).sample[0]  # (3, F, H, W)
        x = ((x.permute(1, 2, 3, 0).clamp(-1, 1) + 1) * 127.5).round().byte().cpu().numpy()
        return x


def load_vae(kind, path):
    if kind == "pool":
        return PoolVAE()
    if not path:
        sys.exit(f"--vae {kind} needs --vae-path DIR (a local copy of its weights; nothing "
                 "is downloaded)")
    return DiffusersVAE(kind, path)


class TextEncoder:
    """A local T5 encoder (transformers; no download): the last hidden states of a caption's
    tokens, without padding."""

    def __init__(self, path, max_tokens):
        import torch
        import transformers
        self.torch = torch
        self.tok = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
        self.enc = transformers.T5EncoderModel.from_pretrained(path, local_files_only=True).eval()
        self.max_tokens = max_tokens

    def __call__(self, text):
        ids = self.tok(text, return_tensors="pt", truncation=True, max_length=self.max_tokens)
        with self.torch.no_grad():
            h = self.enc(**ids).last_hidden_state[0]
        return h.float().numpy()


def write_latent_file(path, latents, fps, stride, source, dtype, caption=None, text_emb=None):
    """The latent file of docs/store-format.md; bf16 values are rounded to nearest even."""
    tensors = {"latents": np.ascontiguousarray(latents, np.float32)}
    if text_emb is not None:
        tensors["text_emb"] = np.ascontiguousarray(text_emb, np.float32)
    meta = {"format": FORMAT, "fps": str(fps), "vae_stride": "x".join(map(str, stride)),
            "source": source}
    if caption:
        meta["caption"] = caption
    bf16 = tuple(tensors) if dtype == "bf16" else ()
    tmp = path + ".tmp"
    safetensors_io.write(tmp, tensors, meta, bf16=bf16)
    os.replace(tmp, path)


def cmd_encode(a):
    vae = load_vae(a.vae, a.vae_path)
    height, width = map(int, a.size.split("x"))
    s = vae.stride[1]
    if height % s or width % s:
        sys.exit(f"--size {a.size}: both sides must be multiples of the VAE's stride {s}")
    captions = {}
    if a.captions:
        with open(a.captions, encoding="utf-8") as f:
            for line in f:
                if "\t" in line:
                    p, c = line.rstrip("\n").split("\t", 1)
                    captions[os.path.abspath(p)] = c
    text = TextEncoder(a.text_encoder, a.text_tokens) if a.text_encoder else None
    os.makedirs(a.out, exist_ok=True)
    for video in a.videos:
        frames = read_frames(video, a.fps, height, width)
        if len(frames) < vae.stride[0]:
            print(f"skip {video}: {len(frames)} frames", file=sys.stderr)
            continue
        lat = vae.encode(frames)
        cap = captions.get(os.path.abspath(video))
        emb = text(cap) if (text and cap) else None
        out = os.path.join(a.out, os.path.splitext(os.path.basename(video))[0] + ".safetensors")
        write_latent_file(out, lat, a.fps, vae.stride, os.path.abspath(video), a.dtype,
                          cap if emb is not None else None, emb)
        print(f"{video}: {len(frames)} frames -> {out} {tuple(lat.shape)}"
              f"{' + caption ' + str(emb.shape) if emb is not None else ''}")


def cmd_decode(a):
    vae = load_vae(a.vae, a.vae_path)
    t, meta = safetensors_io.read(a.latents)
    if meta.get("format") != FORMAT or "latents" not in t:
        sys.exit(f"{a.latents}: not a tessera latent file")
    num, _, den = meta["fps"].partition("/")
    fps = float(num) / float(den or 1)
    frames = vae.decode(t["latents"].astype(np.float32))
    write_video(a.out, frames, fps)
    print(f"{a.latents} {t['latents'].shape} -> {a.out} ({len(frames)} frames at {fps:g} fps)")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("encode", help="videos -> latent files")
    e.add_argument("videos", nargs="+")
    e.add_argument("--out", required=True, help="directory of latent files")
    e.add_argument("--fps", type=int, default=16, help="frames per second fed to the VAE")
    e.add_argument("--size", default="256x256", help="HxW in pixels fed to the VAE")
    e.add_argument("--vae", default="pool", choices=["wan", "hunyuan", "pool"])
    e.add_argument("--vae-path", help="local directory of the VAE's weights (diffusers)")
    e.add_argument("--captions", help="TSV of video path <TAB> caption")
    e.add_argument("--text-encoder", help="local directory of a T5 encoder (transformers)")
    e.add_argument("--text-tokens", type=int, default=512, help="longest caption, tokens")
    e.add_argument("--dtype", default="bf16", choices=["bf16", "f32"])
    d = sub.add_parser("decode", help="a latent file (tessera sample) -> MP4")
    d.add_argument("latents")
    d.add_argument("--out", required=True)
    d.add_argument("--vae", default="pool", choices=["wan", "hunyuan", "pool"])
    d.add_argument("--vae-path")
    a = p.parse_args()
    cmd_encode(a) if a.cmd == "encode" else cmd_decode(a)


if __name__ == "__main__":
    main()
