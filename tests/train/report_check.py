"""tests/train/report_check.py — checks a `tessera report` page against its run directory:
the HTML parses (every tag closed in order), every inlined image decodes (matplotlib's PNG
reader) and is not blank, every inlined video decodes (ffprobe: H.264 frames), the numbers
plotted (the page's embedded JSON) equal metrics.jsonl's, computed here on their own,
there is one still strip per sample file, and the memory and config sections hold the
run's lines. Prints what it checked; exits 1 naming the first difference.
  report_check.py RUN [--prefix] [--state training|not running] [--torn N]
--prefix: the run is being written: the page's series must equal metrics.jsonl's first
lines (as many as it has, at least 3). --torn N: the page says N unreadable lines.
"""
import base64
import io
import json
import os
import re
import subprocess
import sys
import tempfile
from html.parser import HTMLParser

import matplotlib.image as mpimg

VOID = {"meta", "img", "br", "hr", "input", "link"}


class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.stack, self.images, self.videos, self.data, self.text = [], [], [], None, []
        self.errors = []
        self._in_data = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.images.append(a.get("src", ""))
        if tag == "video":
            self.videos.append(a.get("src", ""))
        if tag == "script" and a.get("id") == "report-data":
            self._in_data = True
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append("</%s> closes <%s>" % (tag, self.stack[-1] if self.stack else ""))
        else:
            self.stack.pop()
        self._in_data = False

    def handle_data(self, d):
        if self._in_data:
            self.data = (self.data or "") + d
        else:
            self.text.append(d)


def fail(msg):
    sys.exit("FAIL: report_check: " + msg)


def expected_series(lines):
    """metrics.jsonl's curves, as the report must plot them"""
    out = {}
    for m in lines:
        pairs = [(k, m.get(k)) for k in ("loss", "lr", "grad_norm", "tokens_per_s", "val_loss")]
        pairs += [("val_t/" + k, v) for k, v in (m.get("val_t") or {}).items()]
        pairs += [("val_bucket/" + k, v) for k, v in (m.get("val_bucket") or {}).items()]
        for k, v in pairs:
            if v is not None:
                s = out.setdefault(k, {"step": [], "value": []})
                s["step"].append(m["step"])
                s["value"].append(v)
    return out


def decode(uri, mime):
    head = "data:%s;base64," % mime
    if not uri.startswith(head):
        fail("a %s is not inlined as a data URI: %.60s" % (mime, uri))
    return base64.b64decode(uri[len(head):], validate=True)


def check_png(data, what):
    img = mpimg.imread(io.BytesIO(data), format="png")
    if img.ndim != 3 or img.shape[0] < 16 or img.shape[1] < 16:
        fail("%s: %s is not an image" % (what, img.shape))
    if float(img[..., :3].std()) < 0.01:
        fail("%s is blank (one colour)" % what)
    return img.shape


def main():
    run = sys.argv[1]
    args = sys.argv[2:]
    with open(os.path.join(run, "report.html"), encoding="utf-8") as f:
        page = Page()
        page.feed(f.read())
        page.close()
    if page.errors or page.stack:
        fail("the HTML does not parse: %s; open: %s" % (page.errors[:3], page.stack))
    if page.data is None:
        fail("no embedded data (script#report-data)")
    data = json.loads(page.data)
    with open(os.path.join(run, "metrics.jsonl")) as f:
        lines = []
        for line in f:
            try:
                lines.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    got = data["series"]
    if "--prefix" in args:
        if data["lines"] < 3:
            fail("a run in progress: only %d lines in the page" % data["lines"])
        lines = lines[:data["lines"]]
    elif data["lines"] != len(lines):
        fail("the page read %d lines of metrics.jsonl's %d" % (data["lines"], len(lines)))
    want = expected_series(lines)
    if got != want:
        bad = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
        fail("plotted series differ from metrics.jsonl's: %s (page %s, metrics %s)"
             % (bad, {k: got.get(k, {}).get("value", [])[:3] for k in bad[:1]},
                {k: want.get(k, {}).get("value", [])[:3] for k in bad[:1]}))
    steps = want["loss"]["step"]
    if steps != sorted(set(steps)):
        fail("training steps are not one run (repeated or out of order): %s" % steps)
    text = "".join(page.text)
    if "--state" in args and "state" + args[args.index("--state") + 1] not in text.replace("\n", ""):
        fail("the page does not say the run is '%s'" % args[args.index("--state") + 1])
    if "--torn" in args and "unreadable metrics lines%s" % args[args.index("--torn") + 1] not in text:
        fail("the page does not count %s unreadable lines" % args[args.index("--torn") + 1])
    # images: the curves first, then a strip per sample file
    shapes = [check_png(decode(u, "image/png"), "image %d" % i) for i, u in enumerate(page.images)]
    sdir = os.path.join(run, "samples")
    # sample files, not the temporary a writer killed mid-write leaves (core/fs.h fs_atomic:
    # NAME.tmp.PID.RAND), which the report must leave out too
    samples = sorted(f for f in os.listdir(sdir) if re.fullmatch(
        r"sample-\d+(-\d+)?\.(mp4|y4m)", f)) if os.path.isdir(sdir) else []
    if "--prefix" in args:  # the trainer may have written more since: those the page saw
        steps = data["samples"]
        if not set(steps) <= {int(f.split("-")[1].split(".")[0]) for f in samples}:
            fail("the page shows samples %s that are not in %s" % (steps, sdir))
        samples = steps
    if len(page.images) != 1 + len(samples) or data["strips"] != len(samples):
        fail("%d images for %d sample files (want the curves and a strip each)"
             % (len(page.images), len(samples)))
    with open(os.path.join(run, "report.png"), "rb") as f:
        if f.read() != decode(page.images[0], "image/png"):
            fail("the page's curves are not report.png")
    for i, u in enumerate(page.videos):
        with tempfile.NamedTemporaryFile(suffix=".mp4") as t:
            t.write(decode(u, "video/mp4"))
            t.flush()
            probe = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0",
                                    "-show_entries", "stream=codec_name", "-of", "csv=p=0",
                                    t.name], capture_output=True, text=True).stdout.strip()
        if probe != "h264":
            fail("video %d does not decode as H.264: %r" % (i, probe))
    if "memory per rank (model)" not in text:
        fail("no memory report on the page")
    ckpts = [f for f in os.listdir(run) if f.startswith("ckpt-") and f.endswith(".safetensors")]
    if ckpts and "global_batch = " not in text:
        fail("no config on the page although %s exists" % ckpts[0])
    logp = os.path.join(run, "train.log")
    said = len([l for l in open(logp, errors="replace") if ": samples of the EMA " in l]) \
        if os.path.exists(logp) else 0
    shown = len(data["samples"]) if isinstance(data, dict) and "samples" in data else len(samples)
    if said and text.count("Euler steps; ") < min(said, shown):
        fail("sample strips without their labels (%d said in train.log, %d labelled)"
             % (said, text.count("Euler steps; ")))
    ini = os.path.join(run, "config.ini")
    if os.path.exists(ini):
        first_set = next((l.strip() for l in open(ini) if l.startswith("data = ")), None)
        if "RUN/config.ini: the run as started" not in text or (first_set and first_set not in text):
            fail("RUN/config.ini exists but is not on the page")
    print("report_check: %s: HTML parses; %d images decode (curves %s), %d videos; %d series "
          "(%d points) equal to metrics.jsonl's %d lines; %d sample strips"
          % (run, len(page.images), shapes[0][:2], len(page.videos), len(got),
             sum(len(v["step"]) for v in got.values()), len(lines), len(samples)))


if __name__ == "__main__":
    main()
