#!/usr/bin/env python3
"""Does a sample look like its training data? Numbers instead of eyes (README "Demo").

    tools/sample_stats.py --store STORE --run RUN SAMPLE[:LABEL] ... [--json OUT]

For each sample video (MP4 or Y4M, decoded by the ffmpeg CLI to rgb24) and, as the
baselines, for noise (the sampler's starting point, N(0, 1) mapped to pixels as the
sampler maps its output: (x + 1) * 127.5, rounded and clamped, seed 0) and for every
held-out clip of the same label (RUN/val_clips.txt; they were never trained on):

  corr_space  Pearson correlation of the mean colours (per channel, 0..255) of
              horizontally and vertically neighbouring tokens (patches of the store's
              ph x pw pixels), all frames: ~0 for noise, near 1 for smooth video
  corr_time   the same for one token and the same token in the next frame
  nearest     RMSE in pixel levels (0..255) to the nearest training clip (the held-out
              clips are not training clips): over every window of the sample's frame
              count in every training clip of the same size, so a sample need not start
              where a clip starts; with the clip id and label of the nearest. For a
              held-out clip, the training clips cut from its own source video are left
              out: it is compared as a new video would be

A sample that learned the data has correlations near the held-out clips' and a nearest
distance near theirs (a new clip of the same kind), far below the noise's; a memorised
training clip would be at ~0. Training clips come from `tessera index export --raw`.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True).stdout


def decode(path):
    """(frames, h, w, 3) uint8 of a video file, through the ffmpeg CLI."""
    probe = json.loads(run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
                            "stream=width,height", "-of", "json", path]))
    w, h = probe["streams"][0]["width"], probe["streams"][0]["height"]
    raw = run(["ffmpeg", "-v", "error", "-i", path, "-f", "rawvideo", "-pix_fmt", "rgb24", "-"])
    return np.frombuffer(raw, np.uint8).reshape(-1, h, w, 3)


def store_clips(tessera, store):
    """{id: (frames, h, w, 3) uint8}, {id: label}, {id: source} and the patch (pt, ph, pw)."""
    stats = json.loads(run([tessera, "index", "stats", store, "--json"]))["settings"]
    patch = (stats["pt"], stats["ph"], stats["pw"])
    rows = json.loads(run([tessera, "index", "list", store, "--json"]))
    clips, labels, sources = {}, {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in rows:
            out = os.path.join(tmp, "c.rgb")
            run([tessera, "index", "export", store, "--clip", str(r["id"]), "--out", out, "--raw"])
            h, w = r["H"] * patch[1], r["W"] * patch[2]
            clips[r["id"]] = np.fromfile(out, np.uint8).reshape(-1, h, w, 3)
            labels[r["id"]] = r["label"] or "-"
            sources[r["id"]] = r["source"]
    return clips, labels, sources, patch


def token_means(v, ph, pw):
    """(frames, H, W, 3) mean colour of every ph x pw token of every frame."""
    f, h, w, c = v.shape
    return v.reshape(f, h // ph, ph, w // pw, pw, c).astype(np.float64).mean(axis=(2, 4))


def corr(a, b):
    a, b = a.ravel() - a.mean(), b.ravel() - b.mean()
    d = np.sqrt((a * a).sum() * (b * b).sum())
    return float((a * b).sum() / d) if d > 0 else 0.0


def correlations(v, ph, pw):
    m = token_means(v, ph, pw)
    space = corr(np.concatenate([m[:, :, :-1].ravel(), m[:, :-1, :].ravel()]),
                 np.concatenate([m[:, :, 1:].ravel(), m[:, 1:, :].ravel()]))
    time = corr(m[:-1], m[1:]) if len(m) > 1 else float("nan")
    return space, time


def nearest(v, train):
    """(rmse, id) of the nearest window of a training clip of v's size."""
    best = (float("inf"), None)
    x = v.astype(np.float64)
    for cid, c in train.items():
        if c.shape[1:] != v.shape[1:] or len(c) < len(v):
            continue
        for s in range(len(c) - len(v) + 1):
            d = float(np.sqrt(((c[s:s + len(v)].astype(np.float64) - x) ** 2).mean()))
            if d < best[0]:
                best = (d, cid)
    return best


def measure(name, v, train, labels, patch):
    space, time = correlations(v, patch[1], patch[2])
    d, cid = nearest(v, train)
    return {"what": name, "frames": len(v), "corr_space": space, "corr_time": time,
            "nearest": d, "nearest_clip": cid, "nearest_label": labels.get(cid)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("samples", nargs="+", help="SAMPLE[:LABEL] video files")
    ap.add_argument("--store", required=True)
    ap.add_argument("--run", required=True, help="the run directory (its val_clips.txt)")
    ap.add_argument("--tessera", default=os.path.join(os.path.dirname(__file__), "..", "build",
                                                      "tools", "tessera"))
    ap.add_argument("--json", help="write the rows as JSON here")
    a = ap.parse_args()
    clips, labels, sources, patch = store_clips(a.tessera, a.store)
    held = set()
    vpath = os.path.join(a.run, "val_clips.txt")
    if os.path.exists(vpath):
        held = {int(l.split()[0]) for l in open(vpath) if l.strip() and not l.startswith("#")}
    train = {k: v for k, v in clips.items() if k not in held}
    rows = []
    for spec in a.samples:
        path, _, label = spec.partition(":")
        v = decode(path)
        rows.append(measure(f"sample {os.path.basename(path)}" + (f" ({label})" if label else ""),
                            v, train, labels, patch))
        rng = np.random.default_rng(0)
        noise = np.clip(np.rint((rng.standard_normal(v.shape) + 1) * 127.5), 0, 255).astype(np.uint8)
        rows.append(measure("  noise, same size", noise, train, labels, patch))
        held_rows = []
        for cid in sorted(held):
            c = clips[cid]
            if (not label or labels[cid] == label) and c.shape[1:] == v.shape[1:] and len(c) >= len(v):
                others = {k: t for k, t in train.items() if sources[k] != sources[cid]}
                held_rows.append(measure(f"held-out clip {cid}", c[:len(v)], others, labels, patch))
        if held_rows:
            mean = {k: float(np.mean([r[k] for r in held_rows])) for k in
                    ("corr_space", "corr_time", "nearest")}
            rows.append(dict(mean, what=f"  held-out clips ({len(held_rows)}, mean)",
                             frames=len(v), nearest_clip=None, nearest_label=label or None,
                             clips=held_rows))
    print(f"{'':40s} {'corr_space':>10s} {'corr_time':>10s} {'nearest':>8s}  nearest clip")
    for r in rows:
        near = f"{r['nearest_clip']} ({r['nearest_label']})" if r["nearest_clip"] is not None else ""
        print(f"{r['what']:40s} {r['corr_space']:10.3f} {r['corr_time']:10.3f} {r['nearest']:8.1f}"
              f"  {near}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
