#!/usr/bin/env bash
# tests/train/report_bad.sh — `tessera report` on a run directory of hostile content
# (docs/report.md): metrics lines of the wrong types (a loss "abc", a step "five", a line
# `[]`, a cp table of names) are each named on stderr by file and line and left out, never
# a traceback; markup in the run's text (a plan name, train.log, a checkpoint's config and
# metadata) is escaped: the page's only elements are the report's own. FIFOs where it reads
# a file are not waited on (under `timeout`: a regression fails instead of hanging).
set -euo pipefail
T=${TESSERA_BIN:?}
SRC=${TESSERA_SRC:?}
PY=/usr/bin/python3
"$PY" -c 'import matplotlib' 2>/dev/null ||
  { echo "SKIP: $PY lacks matplotlib (Debian's python3-matplotlib, tools/setup.sh)"; exit 77; }
W=$(mktemp -d "${TMPDIR:-/tmp}/tessera-report-bad.XXXXXX")
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
R=$W/run
mkdir -p "$R"
cat >"$R/metrics.jsonl" <<'J'
{"step": 1, "loss": 0.5, "lr": 0.001, "plan": "<script>alert(1)</script>", "cp": {"1": 4}}
{"step": 2, "loss": "abc"}
{"step": "five", "loss": 0.4}
[]
{"step": 3, "loss": 0.3, "cp": {"<b>x</b>": 2}}
{"step": 4, "loss": 0.25, "plan": "dynamic"}
J
printf 'memory per rank <img src=x onerror=alert(2)>\nplanning: <svg onload=alert(3)>\n' >"$R/train.log"
# a checkpoint whose config and metadata carry markup (safetensors: u64 header length, JSON)
"$PY" - "$R/ckpt-4.safetensors" <<'P'
import json, struct, sys
h = json.dumps({"__metadata__": {"config": "steps = 4\n[data]\ncaption = <iframe src=x>",
                                 "<k onclick=alert(4)>": "<i>v</i>"}}).encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h)
P
rc=0
$T report "$R" >"$W/out" 2>"$W/err" || rc=$?
[ $rc -eq 0 ] || { cat "$W/err"; fail "report exited $rc"; }
! grep -q Traceback "$W/err" || { cat "$W/err"; fail "a traceback"; }
for want in "$R/metrics.jsonl line 2: loss is \"abc\", not a number" \
            "$R/metrics.jsonl line 3: step is \"five\", not an integer" \
            "$R/metrics.jsonl line 4: a JSON list, not an object" \
            "$R/metrics.jsonl line 5: cp has a key that is not a CP size"; do
  grep -qF "$want" "$W/err" || { cat "$W/err"; fail "stderr lacks: $want"; }
done
grep -q "up to step 4" "$W/out" || fail "the report's line: $(cat "$W/out")"
echo "ok: malformed lines named by file and line, left out"
"$PY" - "$R/report.html" <<'P'
import html.parser, json, sys
text = open(sys.argv[1]).read()
OWN = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "table", "tr", "th",
       "td", "pre", "p", "img", "div", "video", "script"}
class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.attrs, self.data, self.scripts, self.inscript = [], [], [], 0, False
    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += [k for k, _ in attrs]
        if tag == "script":
            self.scripts += 1
            self.inscript = dict(attrs).get("id") == "report-data"
    def handle_endtag(self, tag):
        self.inscript = False
    def handle_data(self, d):
        if self.inscript:
            self.embedded = d
        self.data.append(d)
p = Page()
p.feed(text)
strange = sorted(set(p.tags) - OWN)
assert not strange, "elements from the run's text: %s" % strange
assert p.scripts == 1, "%d scripts (only the report's data)" % p.scripts
assert not [a for a in p.attrs if a.startswith("on")], "event handlers: %s" % p.attrs
shown = "".join(p.data)
for s in ("<script>alert(1)</script>", "<img src=x onerror=alert(2)>", "<iframe src=x>",
          "<k onclick=alert(4)>", "<i>v</i>"):
    assert s in shown, "the text %r is not shown as text" % s
d = json.loads(p.embedded)
assert d["lines"] == 2 and d["series"]["loss"]["value"] == [0.5, 0.25], d
print("ok: markup in the run's text shown as text; the page's data: the 2 good lines")
P
# FIFOs where the report reads a file: refused or passed over, never waited on
F=$W/fifo
mkdir -p "$F/samples"
cp "$R/metrics.jsonl" "$F/metrics.jsonl" 2>/dev/null || true
mkfifo "$F/train.log" "$F/ckpt-9.safetensors" "$F/samples/sample-1.mp4"
rc=0
timeout 60 $T report "$F" >"$W/out" 2>"$W/err" || rc=$?
[ $rc -eq 0 ] || { cat "$W/err"; fail "report beside FIFOs: exit $rc (124: it hung)"; }
mv "$F/metrics.jsonl" "$F/m" && mkfifo "$F/metrics.jsonl"
rc=0
timeout 60 $T report "$F" >"$W/out" 2>"$W/err" || rc=$?
[ $rc -eq 1 ] && grep -q "metrics.jsonl is not a regular file" "$W/err" ||
  { cat "$W/err"; fail "report of a FIFO metrics.jsonl: exit $rc (124: it hung)"; }
echo "ok: FIFOs in the run (metrics.jsonl refused; train.log, a checkpoint, a sample passed over)"
echo "report_bad: malformed metrics lines named, markup escaped, FIFOs not waited on"
