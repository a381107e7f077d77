#!/usr/bin/env python3
"""Does a sample look like its training data? Numbers instead of eyes (README "Demo").

    tools/sample_stats.py --store STORE --run RUN SAMPLE[:LABEL] ... [--json OUT]

For the sample videos of each label (MP4 or Y4M, decoded by the ffmpeg CLI to rgb24) and,
as the baselines, for as many clips of noise (the sampler's starting point, N(0, 1)
mapped to pixels as the sampler maps its output: (x + 1) * 127.5, rounded and clamped)
and for the held-out clips of the label (RUN/val_clips.txt: clips of the training data
that were never trained on, cut to the samples' frame count), the means of:

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
    """The three numbers of clip v (frames, h, w, 3) against the training clips."""
    space, time = correlations(v, patch[1], patch[2])
    d, cid = nearest(v, train)
    return {"what": name, "frames": len(v), "corr_space": space, "corr_time": time,
            "nearest": d, "nearest_clip": cid, "nearest_label": labels.get(cid)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("samples", nargs="+", help="SAMPLE[:LABEL] video files (several per label: "
                    "their means are shown)")
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
    groups = {}  # label -> sample paths, in the order given
    for spec in a.samples:
        path, _, label = spec.partition(":")
        groups.setdefault(label, []).append(path)
    out = []
    print(f"{'':34s} {'corr_space':>10s} {'corr_time':>10s} {'nearest':>8s}")
    for label, paths in groups.items():
        samples = [measure(os.path.basename(p), decode(p), train, labels, patch) for p in paths]
        rng = np.random.default_rng(0)
        noise = []
        for p in paths:
            shape = (samples[0]["frames"],) + decode(p).shape[1:]
            n = np.clip(np.rint((rng.standard_normal(shape) + 1) * 127.5), 0, 255).astype(np.uint8)
            noise.append(measure("noise", n, train, labels, patch))
        held_rows = []
        for cid in sorted(held):
            c, f = clips[cid], samples[0]["frames"]
            if (not label or labels[cid] == label) and len(c) >= f and \
                    c.shape[1:] == decode(paths[0]).shape[1:]:
                # compared as a new video: not with the clips cut from its own source
                others = {k: t for k, t in train.items() if sources[k] != sources[cid]}
                held_rows.append(measure(f"held-out clip {cid}", c[:f], others, labels, patch))
        print(f"{label or 'unlabelled'}:")
        for name, rows in ((f"samples ({len(samples)})", samples), (f"noise ({len(noise)})", noise),
                           (f"held-out clips ({len(held_rows)})", held_rows)):
            if rows:
                m = {k: float(np.mean([r[k] for r in rows])) for k in ("corr_space", "corr_time", "nearest")}
                print(f"  {name + ', mean':32s} {m['corr_space']:10.3f} {m['corr_time']:10.3f} {m['nearest']:8.1f}")
        out.append({"label": label, "samples": samples, "noise": noise, "held_out": held_rows})
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
