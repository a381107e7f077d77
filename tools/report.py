"""tools/report.py — the report of a training run: RUN/report.html, one self-contained page
(images and videos inlined as data URIs: it opens from disk with no server), and
RUN/report.png, the curves alone. `tessera report RUN` runs it (docs/report.md).

It reads what the run directory holds, so it works on a run in progress, a resumed one and a
multi-rank one (rank 0 writes the files): metrics.jsonl (curves, plan statistics; a torn last
line of a run being written is skipped), train.log (the memory report and the planner's
lines), samples/sample-STEP.* (a strip of still frames per step and the MP4 itself; with
train.sample_prompts one per prompt, sample-STEP-K.*, captioned with its prompt from
samples/samples.jsonl), the
newest checkpoint's metadata (the config). Whatever is missing is said so on the page.

The plotted numbers are embedded in the page as JSON (<script id="report-data">), exactly
metrics.jsonl's, so a test can compare them (tests/train/report.sh).
  /usr/bin/python3 tools/report.py RUN [--out FILE.html] [--png FILE.png] [--max-videos N]
Needs matplotlib (Debian's python3-matplotlib) and, for the sample strips, the ffmpeg CLI.
"""
import argparse
import base64
import glob
import html
import io
import json
import os
import re
import shutil
import stat
import struct
import subprocess
import sys
import time

try:
    import matplotlib
except ImportError:
    sys.exit("report: %s lacks matplotlib: install Debian's python3-matplotlib (tools/setup.sh) "
             "or set TESSERA_SYSTEM_PYTHON to a python that has it" % sys.executable)
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

from fs_atomic import write_atomic  # noqa: E402  (tools/fs_atomic.py, beside this file)

# The smoothed line over the points: a centred moving average over about a tenth of them
# (the window shrinks at the ends). Centred, not TensorBoard's exponential average, whose
# lag drew a warmup's learning rate peaking 150 steps late on the demo's 90 points.
def smooth(values):
    half = len(values) // 20
    out = []
    for i in range(len(values)):
        lo, hi = max(0, i - half), min(len(values), i + half + 1)
        out.append(sum(values[lo:hi]) / (hi - lo))
    return out


# Curves: (key, title, the fields of one line that give its series)
LEVELS = ["0.1", "0.3", "0.5", "0.7", "0.9"]
BUCKETS = ["short", "medium", "long"]


NUMBER_FIELDS = ("loss", "lr", "grad_norm", "tokens_per_s", "val_loss", "plan_ms",
                 "predicted_s", "step_s")
TABLE_FIELDS = ("val_t", "val_bucket", "cp", "cp_modes")  # {name: number}


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def line_problem(r):
    """What is wrong with one parsed metrics line (None: nothing): every field the report
    reads must have the type the trainer writes"""
    if not isinstance(r, dict):
        return "a JSON %s, not an object" % type(r).__name__
    if not isinstance(r.get("step"), int) or isinstance(r.get("step"), bool):
        return "step is %s, not an integer" % json.dumps(r.get("step"))
    for k in NUMBER_FIELDS:
        if k in r and r[k] is not None and not is_number(r[k]):
            return "%s is %s, not a number" % (k, json.dumps(r[k]))
    for k in TABLE_FIELDS:
        v = r.get(k)
        if v is not None and not (isinstance(v, dict) and all(x is None or is_number(x) for x in v.values())):
            return "%s is %s, not an object of numbers" % (k, json.dumps(v)[:80])
    if not all(str(k).isdigit() for k in (r.get("cp") or {})):
        return "cp has a key that is not a CP size: %s" % json.dumps(r["cp"])[:80]
    return None


def regular(path):
    """1 if path is a regular file: a FIFO planted in a run directory would hang the reader
    (as tessera's own readers refuse one, core/fs.h)"""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def read_metrics(run):
    """metrics.jsonl's lines as dicts, and the unreadable ones as (line number, reason): a
    torn last line of a run being written (which the trainer cuts when it resumes), or a
    line of the wrong types (a damaged or hand-edited file), each named on stderr and left
    out of the report rather than stopping it"""
    rows, bad = [], []
    path = os.path.join(run, "metrics.jsonl")
    if not os.path.exists(path):
        return rows, bad
    with open(path, errors="replace") as f:
        for n, line in enumerate(f, 1):
            try:
                r = json.loads(line)
                why = line_problem(r)
            except ValueError as e:
                r, why = None, "not JSON (%s)" % e
            if why is None:
                rows.append(r)
                continue
            bad.append((n, why))
            print("report: %s line %d: %s; the line is left out" % (path, n, why),
                  file=sys.stderr)
    return rows, bad


def series(rows):
    """{name: {"step": [...], "value": [...]}}: every curve of the page, from the lines that
    have its field, in file order (the values as metrics.jsonl holds them)"""
    out = {}

    def add(name, step, value):
        if value is None:
            return
        s = out.setdefault(name, {"step": [], "value": []})
        s["step"].append(step)
        s["value"].append(value)

    for r in rows:
        for k in ("loss", "lr", "grad_norm", "tokens_per_s", "val_loss"):
            if k in r:
                add(k, r["step"], r[k])
        for k, v in (r.get("val_t") or {}).items():
            add("val_t/" + k, r["step"], v)
        for k, v in (r.get("val_bucket") or {}).items():
            add("val_bucket/" + k, r["step"], v)
    return out


def draw_curves(data, path_png):
    """The curves figure (PNG bytes); also written to path_png"""
    panels = [
        ("training loss", ["loss"], "log"),
        ("validation loss by noise level t", ["val_loss"] + ["val_t/" + t for t in LEVELS], "linear"),
        ("validation loss by length bucket", ["val_bucket/" + b for b in BUCKETS], "linear"),
        ("learning rate", ["lr"], "linear"),
        ("gradient norm", ["grad_norm"], "log"),
        ("tokens/s", ["tokens_per_s"], "linear"),
    ]
    fig, axes = plt.subplots(2, 3, figsize=(13, 6.5), dpi=80)
    for ax, (title, names, yscale) in zip(axes.flat, panels):
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("step", fontsize=8)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
        drawn = 0
        for i, name in enumerate(names):
            s = data.get(name)
            if not s or not s["step"]:
                continue
            color = "black" if name == "val_loss" else f"C{i}"
            label = name.split("/")[-1] if "/" in name else name
            if name.startswith("val_t/"):
                label = "t = " + label
            ax.plot(s["step"], s["value"], ".", color=color, alpha=0.45, markersize=4)
            ax.plot(s["step"], smooth(s["value"]), "-", color=color, linewidth=1.4, label=label)
            drawn += 1
        if not drawn:
            ax.text(0.5, 0.5, "no data in metrics.jsonl", ha="center", va="center",
                    transform=ax.transAxes, color="gray")
            continue
        vals = [v for n in names for v in data.get(n, {}).get("value", [])]
        # log where the values span a decade or more: a loss falling from 1.3 to 0.05
        if yscale == "log" and min(vals) > 0 and max(vals) >= 10 * min(vals):
            ax.set_yscale("log")
        if len(names) > 1:
            ax.legend(fontsize=7)
    fig.suptitle("points: metrics.jsonl; lines: their centred moving average over about a "
                 "tenth of them", fontsize=9, color="gray")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    png = buf.getvalue()
    write_atomic(path_png, png)
    return png


def data_uri(mime, data):
    return "data:%s;base64,%s" % (mime, base64.b64encode(data).decode("ascii"))


def sample_files(run):
    """[(step, path)] of samples/sample-STEP.mp4 or .y4m, and with train.sample_prompts
    sample-STEP-K.*, by step (then K)"""
    out = []
    for p in glob.glob(os.path.join(run, "samples", "sample-*")):
        m = re.fullmatch(r"sample-(\d+)(?:-(\d+))?\.(mp4|y4m)", os.path.basename(p))
        if m and regular(p):
            out.append((int(m.group(1)), int(m.group(2) or 0), p))
    return [(s, p) for s, _, p in sorted(out)]


def sample_records(run):
    """{file name: record} of samples/samples.jsonl (model/train/samples.h: what each sample
    file holds, its prompt among it); a torn or bad line is skipped, a later line of the same
    file (a resume wrote it again) wins"""
    path = os.path.join(run, "samples", "samples.jsonl")
    out = {}
    if not regular(path):
        return out
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if isinstance(r, dict) and isinstance(r.get("file"), str):
                out[r["file"]] = r
    return out


def record_label(r):
    """A sample's caption from its record: its prompt, seed, frames, size, steps, guidance"""
    shape = "seed %s, %s frames %sx%s, %s Euler steps, guidance %s" % (
        r.get("seed", "?"), r.get("frames", "?"), r.get("height", "?"), r.get("width", "?"),
        r.get("steps", "?"), r.get("cfg", "?"))
    if "prompt" in r:
        return "prompt %s of %s: %s (%s)" % (r.get("prompt_index", "?"), r.get("prompts", "?"),
                                            r["prompt"], shape)
    return None


def still_strip(path, frames=4):
    """(PNG bytes, frame step): `frames` still frames of a sample video evenly spread, left
    to right (the ffmpeg CLI decodes it), or (None, 0) if it cannot be read"""
    if not shutil.which("ffmpeg"):
        return None, 0
    try:
        n = int(subprocess.run(
            ["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries",
             "stream=nb_read_frames", "-of", "csv=p=0", path],
            capture_output=True, text=True, timeout=60).stdout.strip().split(",")[0])
    except (ValueError, subprocess.SubprocessError):
        return None, 0
    every = max(1, n // frames)
    r = subprocess.run(
        ["ffmpeg", "-v", "error", "-i", path, "-vf",
         "select=not(mod(n\\,%d)),scale=iw*2:ih*2:flags=neighbor,"
         "tile=%dx1:padding=6:color=gray" % (every, frames),
         "-frames:v", "1", "-f", "image2pipe", "-vcodec", "png", "-"],
        capture_output=True, timeout=120)
    ok = r.returncode == 0 and r.stdout.startswith(b"\x89PNG")
    return (r.stdout, every) if ok else (None, 0)


def newest_checkpoint_meta(run):
    """(path, __metadata__) of the newest ckpt-STEP.safetensors, or (None, {})"""
    best = None
    for p in glob.glob(os.path.join(run, "ckpt-*.safetensors")):
        m = re.fullmatch(r"ckpt-(\d+)\.safetensors", os.path.basename(p))
        if m and regular(p) and (best is None or int(m.group(1)) > best[0]):
            best = (int(m.group(1)), p)
    if not best:
        return None, {}
    try:
        with open(best[1], "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            meta = json.loads(f.read(n)).get("__metadata__", {})
    except (OSError, ValueError, struct.error):
        return best[1], {}
    return best[1], {k: v for k, v in meta.items() if not k.startswith("xxh3")}


def log_lines(run):
    """train.log's lines without a multi-rank job's "[rank N] " prefix (rank 0's only)"""
    path = os.path.join(run, "train.log")
    if not regular(path):
        return None
    out = []
    with open(path, errors="replace") as f:
        for line in f:
            m = re.match(r"\[rank (\d+)\] (.*)", line.rstrip("\n"))
            if m and m.group(1) != "0":
                continue
            out.append(m.group(2) if m else line.rstrip("\n"))
    return out


def plan_stats(rows):
    """The planner's numbers over the training lines: plans used (fallbacks), clips per CP
    size and per CP mode, planner time, predicted against measured step time"""
    steps = [r for r in rows if "loss" in r]
    used, cp, modes, ms = {}, {}, {}, []
    for r in steps:
        used[r.get("plan", "?")] = used.get(r.get("plan", "?"), 0) + 1
        for k, v in (r.get("cp") or {}).items():
            cp[k] = cp.get(k, 0) + v
        for k, v in (r.get("cp_modes") or {}).items():
            modes[k] = modes.get(k, 0) + v
        if "plan_ms" in r:
            ms.append(r["plan_ms"])
    pred = sum(r.get("predicted_s", 0) for r in steps)
    meas = sum(r.get("step_s", 0) for r in steps)
    return {"lines": len(steps), "plans_used": used,
            "fallbacks": sum(v for k, v in used.items() if k != "dynamic"),
            "cp_clips": dict(sorted(cp.items(), key=lambda kv: int(kv[0]))),
            "cp_mode_clips": modes,
            "plan_ms_mean": sum(ms) / len(ms) if ms else None,
            "plan_ms_max": max(ms) if ms else None,
            "predicted_s_sum": pred, "step_s_sum": meas}


def table(pairs):
    return "<table>" + "".join(
        "<tr><th>%s</th><td>%s</td></tr>" % (html.escape(str(k)), html.escape(str(v)))
        for k, v in pairs) + "</table>"


def pre(lines):
    return "<pre>%s</pre>" % html.escape("\n".join(lines))


def sample_labels(log):
    """{step: "2 labels: one clip each, seed 0; 2 Euler steps; 8x4x6 tokens a clip"} from
    train.log's "train: step N: samples of the EMA ... (WHAT, S Euler steps, TxHxW tokens
    each)" lines (model/train/samples.c)"""
    out = {}
    for line in log or []:
        m = re.search(r"train: step (\d+): samples of the EMA .*?\((\d+ labels|seeds [0-9-]+), "
                      r"(\d+) Euler steps, (\d+x\d+x\d+) tokens each\)", line)
        if m:
            what = ("%s: one clip each, seed 0" % m.group(2) if "labels" in m.group(2)
                    else "%s, one clip each, no label" % m.group(2))
            out[int(m.group(1))] = "%s; %s Euler steps; %s tokens (T x H x W) a clip" % (
                what, m.group(3), m.group(4))
    return out


def samples_html(run, files, max_videos, log=None):
    """files: sample_files(run), listed once by the caller so that the page's strips and its
    embedded list of samples agree while a trainer writes more"""
    labels = sample_labels(log)
    records = sample_records(run)
    if not files:
        return "<p>No samples (train.sample_every = 0, or none written yet).</p>", 0, 0
    parts, strips, videos = [], 0, 0
    for i, (step, path) in enumerate(files):
        strip, every = still_strip(path)
        parts.append("<div class='sample'><h3>step %d</h3>" % step)
        rec = record_label(records.get(os.path.basename(path), {}))
        if rec:
            parts.append("<p class='prompt'>%s</p>" % html.escape(rec, quote=False))
        elif step in labels:
            parts.append("<p class='note'>%s, left to right</p>" % html.escape(labels[step]))
        if strip:
            parts.append("<img class='strip' alt='sample at step %d' src='%s'>"
                         "<p class='note'>frames 0, %d, %d, ... of %s, left to right</p>"
                         % (step, data_uri("image/png", strip), every, 2 * every,
                            html.escape(os.path.basename(path))))
            strips += 1
        else:
            parts.append("<p>%s: no still frames (ffmpeg could not read it)</p>"
                         % html.escape(os.path.basename(path)))
        # the newest videos inline (a long run has many): the strips show all steps
        if path.endswith(".mp4") and i >= len(files) - max_videos:
            with open(path, "rb") as f:
                parts.append("<video controls loop muted src='%s'></video>"
                             % data_uri("video/mp4", f.read()))
            videos += 1
        parts.append("</div>")
    return "".join(parts), strips, videos


CSS = """body{font-family:sans-serif;margin:1.5em;max-width:1100px}
table{border-collapse:collapse;font-size:90%}th,td{border:1px solid #ccc;padding:2px 8px;text-align:left}
pre{background:#f6f6f6;padding:.6em;white-space:pre-wrap;font-size:85%}
img.curves{max-width:100%}img.strip{image-rendering:pixelated;max-width:100%}
.sample{margin-bottom:1em}.note{color:gray;font-size:80%;margin:0}video{width:480px;max-width:100%;image-rendering:pixelated}"""


def build(run, out_html, out_png, max_videos):
    rows, bad = read_metrics(run)
    data = series(rows)
    png = draw_curves(data, out_png)
    ckpt, meta = newest_checkpoint_meta(run)
    log = log_lines(run)
    stats = plan_stats(rows)
    last = max((r["step"] for r in rows), default=None)
    cfg = meta.get("config", "")
    try:  # the run as started (model/train/run_config.h), before any checkpoint too
        with open(os.path.join(run, "config.ini"), encoding="utf-8", errors="replace") as f:
            run_ini = f.read()
    except OSError:
        run_ini = ""
    m = re.search(r"^steps = (\d+)", cfg, re.M)
    total = int(m.group(1)) if m else None
    m = re.search(r"^lr_schedule_steps = (\d+)", cfg, re.M)  # > 0: the schedule's own length
    total = int(m.group(1)) if m and int(m.group(1)) > 0 else total
    in_progress = lock_held(run)
    files = sample_files(run)
    samples, strips, videos = samples_html(run, files, max_videos, log)
    status = [("run directory", os.path.abspath(run)),
              ("last step in metrics.jsonl", last if last is not None else "none yet"),
              ("schedule (steps)", total if total else "unknown (no checkpoint yet)"),
              ("state", "training (the run's lock is held)" if in_progress else "not running"),
              ("report written", time.strftime("%Y-%m-%d %H:%M:%S %Z"))]
    if bad:
        status.append(("unreadable metrics lines", "%d, left out (%s)" % (len(bad), "; ".join(
            "line %d: %s" % b for b in bad[:5]) + ("; ..." if len(bad) > 5 else ""))))
    mem = [l for l in (log or []) if "memory per" in l]
    planning = [l for l in (log or []) if "planning:" in l or "resuming bitwise" in l]
    embedded = {"run": os.path.abspath(run), "lines": len(rows), "series": data, "plan": stats,
                "samples": [s for s, _ in files], "strips": strips, "videos": videos}
    body = [
        "<h1>tessera run report</h1>", table(status),
        "<h2>Curves</h2><img class='curves' alt='curves' src='%s'>" % data_uri("image/png", png),
        "<h2>Samples during training</h2>", samples,
        "<h2>Memory</h2>",
        pre(mem) if mem else "<p>No memory report (%s).</p>" % (
            "train.log has none" if log is not None else "no train.log: a run from before it"),
        "<h2>Plans</h2>",
        table([("training lines", stats["lines"]),
               ("plans used (steps)", ", ".join("%s %d" % kv for kv in stats["plans_used"].items())),
               ("fallbacks to a static plan (steps)", stats["fallbacks"]),
               ("clips per CP size", ", ".join("CP %s: %d" % kv for kv in stats["cp_clips"].items())
                or "not recorded"),
               ("clips per CP mode (groups of CP > 1)",
                ", ".join("%s %d" % kv for kv in stats["cp_mode_clips"].items()) or "none"),
               ("planner time per batch (ms)", "mean %.3f, max %.3f" % (
                   stats["plan_ms_mean"], stats["plan_ms_max"]) if stats["plan_ms_mean"] is not None
                else "not recorded"),
               ("predicted / measured step time (sum, s)", "%.3f / %.3f" % (
                   stats["predicted_s_sum"], stats["step_s_sum"]))]),
        "<p class='note'>Predicted: the planner's cost model's time for the plans that ran "
        "(its built-in CPU numbers of the tiny model unless the run was given --cost: "
        "`tessera calibrate` fits them to a machine); measured: the steps' wall time, data "
        "loading and waits included. A ratio far from 1 says the cost model is not this "
        "machine's; the plans are still valid, only less well chosen.</p>",
        pre(planning) if planning else "",
        "<h2>Config</h2>",
        ("<p>RUN/config.ini: the run as started (the command line's values as given, then "
         "every key of the effective config).</p>" + pre(run_ini.splitlines())) if run_ini
        else "",
        ("<p>From %s.</p>" % html.escape(os.path.basename(ckpt)) + pre(cfg.splitlines()) +
         table(sorted((k, v) for k, v in meta.items() if k != "config"))) if ckpt
        else "<p>No checkpoint yet: the config is recorded in each checkpoint.</p>",
        "<script type='application/json' id='report-data'>%s</script>"
        % json.dumps(embedded).replace("</", "<\\/"),
    ]
    page = ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>tessera report: %s</title>"
            "<style>%s</style></head><body>%s</body></html>\n"
            % (html.escape(os.path.basename(os.path.abspath(run))), CSS, "\n".join(body)))
    write_atomic(out_html, page.encode())
    return last, strips, videos


def lock_held(run):
    """True if a tessera train holds RUN/lock (an open file description lock, core/lockfile.h):
    F_OFD_GETLK reports the conflicting lock a read lock would meet"""
    import fcntl
    getlk = getattr(fcntl, "F_OFD_GETLK", 36)  # Linux's value
    flock = "hhqqi4x"  # struct flock on LP64: type, whence, start, len, pid, padding
    try:
        fd = os.open(os.path.join(run, "lock"), os.O_RDONLY)
    except OSError:
        return False
    try:
        lk = fcntl.fcntl(fd, getlk, struct.pack(flock, fcntl.F_RDLCK, 0, 0, 0, 0))
        return struct.unpack(flock, lk)[0] != fcntl.F_UNLCK
    except OSError:
        return False
    finally:
        os.close(fd)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run")
    ap.add_argument("--out", help="the page (default RUN/report.html)")
    ap.add_argument("--png", help="the curves (default RUN/report.png)")
    ap.add_argument("--max-videos", type=int, default=8,
                    help="newest sample videos inlined (default 8; every step has its strip)")
    a = ap.parse_args()
    if not os.path.isdir(a.run):
        sys.exit("report: %s is not a directory" % a.run)
    metrics = os.path.join(a.run, "metrics.jsonl")
    if os.path.exists(metrics) and not regular(metrics):
        sys.exit("report: %s is not a regular file (a FIFO or a device): tessera reads only "
                 "regular files" % metrics)
    if not os.path.exists(metrics):
        sys.exit("report: %s has no metrics.jsonl: not a tessera train run directory "
                 "(or one that has not logged yet)" % a.run)
    out = a.out or os.path.join(a.run, "report.html")
    png = a.png or os.path.join(a.run, "report.png")
    for p in (out, png):  # replaced by a rename: never a device's or a FIFO's name
        if os.path.lexists(p) and not os.path.islink(p) and not regular(p):
            sys.exit("report: %s is not a regular file: give a new file name" % p)
    last, strips, videos = build(a.run, out, png, a.max_videos)
    print("report: %s (up to step %s, %d sample strips, %d videos inline), curves %s"
          % (out, last, strips, videos, png))


if __name__ == "__main__":
    main()
