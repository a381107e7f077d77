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
import sys

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
    print(f"tensorboard_check: {run}: {len(want)} tags, {n} values equal to metrics.jsonl's "
          f"(float32), steps {min(s for r in want.values() for s, _ in r)}-"
          f"{max(s for r in want.values() for s, _ in r)}")


def main():
    for arg in sys.argv[1:]:
        run, _, mode = arg.partition(":")
        check(run, mode == "torn")


if __name__ == "__main__":
    main()
