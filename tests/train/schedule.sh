#!/usr/bin/env bash
# tests/train/schedule.sh — the LR schedule's length (docs/train.md "One step"): a fresh
# run's --steps N spans the schedule over N steps unless train.lr_schedule_steps or
# --set train.steps gives another, every metrics line's lr against the closed form;
# stopping before the schedule's end (or inside the warm-up) is said in the first lines
# of the log; a resume keeps the run's schedule (given the config file again, too).
source "$(dirname "$0")/lib.sh"
need_store
B=(--config "$CONF" --data "$STORE" --set train.global_batch=4 --set train.mem_tokens=512
   --set train.warmup=2 --set train.lr=2e-3 --set train.min_lr=2e-4 --set train.log_every=1
   --set train.ckpt_every=100)
# lrs_ok RUN S: every lr of RUN equals the closed form (docs/train.md) for a schedule of S
# steps (relative 1e-6: metrics hold the float the step used)
lrs_ok() {
  jq -r 'select(.loss) | [.step, .lr] | @tsv' "$1/metrics.jsonl" | python3 -c '
import math, sys
S, warm, lr, mn = int(sys.argv[1]), 2, 2e-3, 2e-4
for line in sys.stdin:
    step, got = line.split(); s = int(step) - 1
    want = lr * (s + 1) / warm if s < warm else \
        mn + (lr - mn) * 0.5 * (1 + math.cos(math.pi * min(1.0, (s - warm) / max(1, S - warm))))
    if abs(float(got) - want) > 1e-6 * want:
        sys.exit("step %s: lr %s, closed form %.9g for a %d-step schedule" % (step, got, want, S))
' "$2" || fail "$1: lr is not a $2-step schedule's"
}
$T train "${B[@]}" --out "$W/a" --steps 6 2>"$W/a.log"
lrs_ok "$W/a" 6
grep -q "cosine to 0.0002 at step 6 (the length of --steps" "$W/a.log" || fail "the schedule's line: $(grep 'learning rate' "$W/a.log")"
! grep -q "before the schedule's end" "$W/a.log" || fail "a run to its schedule's end warned"
grep -qx "lr_schedule_steps = 6" "$W/a/config.ini" || fail "config.ini's lr_schedule_steps"
# the schedule's own length: lr_schedule_steps, or train.steps given with --set
$T train "${B[@]}" --set train.lr_schedule_steps=20 --out "$W/b" --steps 6 2>"$W/b.log"
lrs_ok "$W/b" 20
$T train "${B[@]}" --set train.steps=20 --out "$W/c" --steps 6 2>"$W/c.log"
lrs_ok "$W/c" 20
for r in b c; do
  head -12 "$W/$r.log" | grep -q "stops at step 6, before the schedule's end at 20: the learning rate is then" ||
    fail "$r: stopping before the schedule's end not said in the first lines"
done
# inside the warm-up: said too
$T train "${B[@]}" --set train.warmup=8 --set train.steps=20 --out "$W/w" --steps 3 2>"$W/w.log"
grep -q "before the schedule's end at 20: .*still in the warm-up" "$W/w.log" || fail "the warm-up not said"
# a resume keeps the run's 6-step schedule (past it: min_lr), from the run alone or given
# the config file again
$T train --resume "$W/a" --steps 8 2>>"$W/log"
lrs_ok "$W/a" 6
$T train "${B[@]}" --out "$W/a" --steps 9 --resume 2>>"$W/log"
lrs_ok "$W/a" 6
[ "$(jq -r 'select(.loss) | .step' "$W/a/metrics.jsonl" | tail -1)" = 9 ] || fail "the resumes did not train"
echo "schedule: --steps 6 spans the schedule; lr_schedule_steps / train.steps 20 keep theirs; resumes keep the run's"
