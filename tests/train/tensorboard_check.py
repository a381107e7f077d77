"""tests/train/tensorboard_check.py — RUN/tensorboard/ read back with TensorBoard's own
reader (EventAccumulator, what `tensorboard --logdir` loads) against RUN/metrics.jsonl:
every numeric field of every line, at its step, equal to the value rounded to float32.
Prints one line per run checked; exits 1 naming the first difference.
  tensorboard_check.py RUN[:torn]...
RUN:torn: the event file ends in a torn record (a crash mid-write): TensorBoard must read
every whole one, metrics.jsonl's lines but the last. Several runs are checked in one
process (TensorBoard's import takes seconds).
"""
import json
import math
import os
import struct
import subprocess
import sys
import zlib

from tensorboard.backend.event_processing import event_accumulator

# metrics.jsonl's field -> TensorBoard's tag (grouped: model/train/tensorboard.h)
SCALARS = {"loss": "train/loss", "loss_step": "train/loss_step", "grad_norm": "train/grad_norm",
           "grad_norm_step": "train/grad_norm_step", "lr": "train/lr", "clips": "train/clips",
           "tokens": "train/tokens", "bad_clips": "train/bad_clips",
           "tokens_per_s": "perf/tokens_per_s", "tokens_per_s_step": "perf/tokens_per_s_step",
           "step_s": "perf/step_s", "predicted_s": "plan/predicted_s", "plan_ms": "plan/plan_ms",
           "val_loss": "val/loss", "val_clips": "val/clips", "val_s": "val/s"}


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def expected(run, drop_last):
    """{tag: [(step, float32 value)]} from metrics.jsonl, in file order"""
    want = {}
    with open(os.path.join(run, "metrics.jsonl")) as f:
        lines = f.readlines()
        for line in lines[:-1] if drop_last else lines:
            m = json.loads(line)
            vals = {tag: m[k] for k, tag in SCALARS.items() if k in m}
            for k, v in (m.get("val_t") or {}).items():
                vals["val/t_" + k] = v
            for k, v in (m.get("val_bucket") or {}).items():
                if v is not None:
                    vals["val/bucket_" + k] = v
            for k, v in vals.items():
                want.setdefault(k, []).append((m["step"], f32(float(v))))
    return want


def png_rgb(data):
    """(height, width, rows of RGB bytes) of an 8-bit RGB PNG, decoded with zlib (filter 0
    only, as tessera writes them)"""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit("FAIL: an image is not a PNG")
    at, idat, w, h = 8, b"", 0, 0
    while at < len(data):
        n, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + n]
        if zlib.crc32(data[at + 4:at + 8 + n]) != struct.unpack(">I", data[at + 8 + n:at + 12 + n])[0]:
            sys.exit("FAIL: PNG chunk %r: bad CRC" % kind)
        if kind == b"IHDR":
            w, h, depth, color = struct.unpack(">IIBB", body[:10])
            if (depth, color) != (8, 2):
                sys.exit("FAIL: PNG depth %d colour %d, not 8-bit RGB" % (depth, color))
        elif kind == b"IDAT":
            idat += body
        at += 12 + n
    raw = zlib.decompress(idat)
    row = 3 * w + 1
    if len(raw) != row * h or any(raw[r * row] != 0 for r in range(h)):
        sys.exit("FAIL: PNG scanlines: %d bytes for %dx%d, or a filter other than 0" % (len(raw), w, h))
    return h, w, b"".join(raw[r * row + 1:(r + 1) * row] for r in range(h))


def video_frames(path):
    """(frames, height, width, rgb24 bytes) of a video, decoded by the ffmpeg CLI"""
    probe = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-count_frames",
                            "-show_entries", "stream=width,height,nb_read_frames", "-of", "csv=p=0",
                            path], capture_output=True, text=True, check=True).stdout.split(",")
    w, h, n = int(probe[0]), int(probe[1]), int(probe[2])
    raw = subprocess.run(["ffmpeg", "-v", "error", "-i", path, "-f", "rawvideo", "-pix_fmt",
                          "rgb24", "-"], capture_output=True, check=True).stdout
    return n, h, w, raw


def luma(rgb):
    """BT.601 luma of rgb24 bytes (what H.264 keeps at full resolution: its 4:2:0 chroma
    loses most of a noisy sample's colour, so RGB differences say little)"""
    return [0.299 * rgb[p] + 0.587 * rgb[p + 1] + 0.114 * rgb[p + 2] for p in range(0, len(rgb), 3)]


def psnr(a, b):
    mse = sum((x - y) ** 2 for x, y in zip(a, b)) / len(a)
    return 99.0 if mse == 0 else 10 * math.log10(255 ** 2 / mse)


def check_images(run, acc):
    """every samples/sample-STEP.mp4 is an image at STEP (tag samples/frames): frames 0, F/4,
    2F/4, 3F/4 top to bottom, against the video's own frames (H.264: luma PSNR >= 20 dB, and
    each row nearer its own frame than any other); none without samples"""
    d = os.path.join(run, "samples")
    videos = sorted(f for f in os.listdir(d) if f.endswith(".mp4")) if os.path.isdir(d) else []
    tags = acc.Tags().get("images", [])
    if not videos:
        if tags:
            sys.exit(f"FAIL: {run}: images {tags} without samples")
        return 0
    if tags != ["samples/frames"]:
        sys.exit(f"FAIL: {run}: image tags {tags}, expected ['samples/frames']")
    got = {e.step: e for e in acc.Images("samples/frames")}
    for v in videos:
        step = int(v[len("sample-"):-len(".mp4")])
        if step not in got:
            sys.exit(f"FAIL: {run}: no image at step {step} ({v}); images at {sorted(got)}")
        h, w, rgb = png_rgb(got[step].encoded_image_string)
        n, fh, fw, frames = video_frames(os.path.join(d, v))
        k = min(4, n)
        if (h, w) != (fh * k, fw) or (got[step].height, got[step].width) != (h, w):
            sys.exit(f"FAIL: {run}: step {step}: image {w}x{h}, the video's {k} frames {fw}x{fh}")
        size = fh * fw * 3
        ys = [luma(frames[f * size:(f + 1) * size]) for f in range(n)]
        for i in range(k):
            mine = luma(rgb[i * size:(i + 1) * size])
            j = i * n // k
            own = psnr(mine, ys[j])
            other = max((psnr(mine, ys[f]) for f in range(n) if f != j), default=0)
            if own < 20 or other >= own:
                sys.exit(f"FAIL: {run}: step {step}: strip row {i} is frame {j} at {own:.1f} dB "
                         f"luma (the nearest other frame: {other:.1f} dB)")
    return len(videos)


def check(run, torn):
    d = os.path.join(run, "tensorboard")
    files = [x for x in os.listdir(d) if x.startswith("events.out.tfevents.")]
    if len(files) != 1:
        sys.exit(f"FAIL: expected one event file in {d}, found {files}")
    acc = event_accumulator.EventAccumulator(d, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    want = expected(run, torn)
    got_tags = sorted(acc.Tags()["scalars"])
    if got_tags != sorted(want):
        sys.exit(f"FAIL: tags {got_tags} != metrics.jsonl's {sorted(want)}")
    n = 0
    for tag, rows in want.items():
        got = [(e.step, e.value) for e in acc.Scalars(tag)]
        if got != rows:
            diff = next((a, b) for a, b in zip(got + [None] * len(rows), rows) if a != b)
            sys.exit(f"FAIL: {tag}: TensorBoard has {len(got)} points, metrics.jsonl {len(rows)};"
                     f" first difference (step, value): {diff[0]} != {diff[1]}")
        if any(math.isnan(v) for _, v in got):
            sys.exit(f"FAIL: {tag}: NaN")
        n += len(rows)
    images = check_images(run, acc)
    print(f"tensorboard_check: {run}: {len(want)} tags, {n} values equal to metrics.jsonl's "
          f"(float32), {images} sample images, steps {min(s for r in want.values() for s, _ in r)}-"
          f"{max(s for r in want.values() for s, _ in r)}")


def main():
    for arg in sys.argv[1:]:
        run, _, mode = arg.partition(":")
        check(run, mode == "torn")


if __name__ == "__main__":
    main()
