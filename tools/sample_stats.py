#!/usr/bin/env python3
"""Does a sample look like its training data? Numbers instead of eyes (docs/demo.md).

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

A LABEL that is not one of the store's labels (samples of a caption not seen in training)
is measured against the held-out clips of every label. With --palette (WORD R G B lines,
tools/demo_clips.sh's palette.txt) and --caption LABEL=TEXT, the samples of LABEL are also
read as the caption's words describe them:

  colours     the light and the dark part of each sample (mean colour of its brightest
              and darkest tenth of tokens by luma: a sunset's upper and lower sky, a moon
              and its sky, a wave's crests and troughs), each named by the palette's
              nearest word; for each colour word of the caption, the samples showing
              that word, and the mean RGB distance from it to the nearer of a sample's
              two parts, beside the distance to its nearest other word (how near is
              near: "red" is 30 from "orange")
  layout      the share of the tokens' luma variance that their row explains (1 for
              horizontal bands: a sunset, a sea; low for a disc: a moon), beside the
              same share for the training clips of each label, and the labels of the
              samples' nearest training clips
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fs_atomic import write_json  # noqa: E402  (tools/fs_atomic.py, beside this file)


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


def luma(m):
    return m @ np.array([0.299, 0.587, 0.114])


def light_dark(v, ph, pw, share=0.1):
    """Mean colours of the brightest and the darkest `share` of v's tokens."""
    m = token_means(v, ph, pw).reshape(-1, 3)
    order = np.argsort(luma(m))
    k = max(1, int(round(share * len(m))))
    return m[order[-k:]].mean(axis=0), m[order[:k]].mean(axis=0)


def row_share(v, ph, pw):
    """Share of the tokens' luma variance explained by their (frame, row): 1 for bands."""
    y = luma(token_means(v, ph, pw))
    total = ((y - y.mean()) ** 2).sum()
    within = ((y - y.mean(axis=2, keepdims=True)) ** 2).sum()
    return float(1 - within / total) if total > 0 else float("nan")


def read_palette(path):
    """{word: (r, g, b)} of WORD R G B lines."""
    out = {}
    for line in open(path):
        if line.strip():
            w, r, g, b = line.split()
            out[w] = np.array([float(r), float(g), float(b)])
    return out


def dist(a, b):
    return float(np.sqrt(((np.asarray(a) - np.asarray(b)) ** 2).sum()))


def colour_word(rgb, palette):
    return min(palette, key=lambda w: float(((palette[w] - rgb) ** 2).sum()))


def caption_reading(text, paths, rows, palette, patch):
    """The samples of one caption against its words: colours and layout (docstring)."""
    words = [w.strip(".,;") for w in text.lower().split()]
    named = [w for w in words if w in palette]
    per = []
    for p in paths:
        v = decode(p)
        light, dark = light_dark(v, patch[1], patch[2])
        per.append({"light": light.round(1).tolist(), "light_word": colour_word(light, palette),
                    "dark": dark.round(1).tolist(), "dark_word": colour_word(dark, palette),
                    "row_share": row_share(v, patch[1], patch[2])})
    found = {w: sum(w in (r["light_word"], r["dark_word"]) for r in per) for w in named}
    near = {w: float(np.mean([min(dist(r["light"], palette[w]), dist(r["dark"], palette[w]))
                              for r in per])) for w in named}
    other = {w: min(dist(palette[w], palette[o]) for o in palette if o != w) for w in named}
    kinds = {}
    for r in rows:
        kinds[r["nearest_label"]] = kinds.get(r["nearest_label"], 0) + 1
    return {"caption": text, "colour_words": named, "samples": per, "found": found,
            "distance": near, "nearest_other_word": other, "nearest_labels": kinds}


def label_row_shares(train, labels, patch):
    """{label: mean row share of its training clips}: the layout of each kind."""
    by = {}
    for cid, c in train.items():
        by.setdefault(labels[cid], []).append(row_share(c, patch[1], patch[2]))
    return {k: float(np.mean(v)) for k, v in sorted(by.items())}


def rgb_text(c):
    return "(%d,%d,%d)" % tuple(int(round(x)) for x in c)


def print_reading(r, shares):
    print(f"  caption \"{r['caption']}\"")
    print("    light / dark part of each sample, nearest colour word: " + ", ".join(
        f"{rgb_text(s['light'])} {s['light_word']} / {rgb_text(s['dark'])} {s['dark_word']}"
        for s in r["samples"]))
    n = len(r["samples"])
    for w in r["colour_words"]:
        print(f"    {w}: names a part of {r['found'][w]} of {n} samples; the nearer part is "
                  f"{r['distance'][w]:.0f} from it on average (its nearest other word: "
                  f"{r['nearest_other_word'][w]:.0f})")
    share = np.mean([s["row_share"] for s in r["samples"]])
    print(f"    layout: rows explain {share:.0%} of the luma variance (training clips: " +
          ", ".join(f"{k} {v:.0%}" for k, v in shares.items()) + "); nearest training clips: " +
          ", ".join(f"{k} {v}" for k, v in sorted(r["nearest_labels"].items())))


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
    ap.add_argument("--palette", help="colour words, WORD R G B a line (tools/demo_clips.sh)")
    ap.add_argument("--caption", action="append", default=[], metavar="LABEL=TEXT",
                    help="the caption the samples of LABEL were made from (with --palette)")
    a = ap.parse_args()
    palette = read_palette(a.palette) if a.palette else None
    captions = dict(c.split("=", 1) for c in a.caption)
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
    out, shares = [], None
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
        kind = label if label in labels.values() else ""  # else: the held-out clips of all
        for cid in sorted(held):
            c, f = clips[cid], samples[0]["frames"]
            if (not kind or labels[cid] == kind) and len(c) >= f and \
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
        row = {"label": label, "samples": samples, "noise": noise, "held_out": held_rows}
        if palette is not None and label in captions:
            if shares is None:
                shares = label_row_shares(train, labels, patch)
            row["caption"] = caption_reading(captions[label], paths, samples, palette, patch)
            print_reading(row["caption"], shares)
        out.append(row)
    if a.json:
        write_json(a.json, out, 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
