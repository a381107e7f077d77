#!/usr/bin/env bash
# tests/train/curves.sh — metrics lines hold the mean over their interval (docs/train.md
# "Outputs"): the same 10 steps logged every step and every 4 steps; each line of the
# second has "steps" = the steps since the line before (4, 4, then 2 for the last), "loss"
# and "grad_norm" the mean of the first run's values over them (bitwise: the same sum in
# the same order), "loss_step" and "grad_norm_step" the first run's values at its step,
# "tokens_per_s" the interval's tokens over its time (within the first run's range of
# tokens/s, a loose bound: the runs are timed apart).
source "$(dirname "$0")/lib.sh"
need_store
R=(--config "$CONF" --data "$STORE" "${SMALL[@]}")
$T train "${R[@]}" --out "$W/a" --steps 10 2>>"$W/log"
$T train "${R[@]}" --set train.log_every=4 --out "$W/b" --steps 10 2>>"$W/log"
python3 - "$W/a/metrics.jsonl" "$W/b/metrics.jsonl" <<'PY' || fail "interval means"
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
if [m["step"] for m in b] != [4, 8, 10] or [m["steps"] for m in b] != [4, 4, 2]:
    sys.exit("lines at %s covering %s steps" % ([m["step"] for m in b], [m.get("steps") for m in b]))
if any(m["steps"] != 1 or m["loss"] != m["loss_step"] for m in a):
    sys.exit("log_every 1: a line is not its own step's")
by = {m["step"]: m for m in a}
prev = 0
for m in b:
    steps = [by[s] for s in range(prev + 1, m["step"] + 1)]
    for k in ("loss", "grad_norm"):
        acc = 0.0
        for x in steps:
            acc += x[k]
        if m[k] != acc / len(steps):
            sys.exit("step %d: %s %r, the mean of the interval %r" % (m["step"], k, m[k], acc / len(steps)))
        if m[k + "_step"] != by[m["step"]][k]:
            sys.exit("step %d: %s_step %r, the step's %r" % (m["step"], k, m[k + "_step"], by[m["step"]][k]))
    if not 0 < m["tokens_per_s"] < 100 * max(x["tokens_per_s"] for x in a):
        sys.exit("step %d: tokens_per_s %r" % (m["step"], m["tokens_per_s"]))
    if m["loss"] == m["loss_step"] and m["steps"] > 1:
        sys.exit("step %d: the mean is the last step's value" % m["step"])
    prev = m["step"]
print("curves: means over 4, 4 and 2 steps exact")
PY
