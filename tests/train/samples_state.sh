#!/usr/bin/env bash
# Samples during training are part of the run's state (issue 24, item 8):
#  1. a sample that cannot be written (RUN/samples/sample-2.mp4 is a directory here) is a
#     warning naming it: the run goes on to its checkpoints and its later samples (exit 0,
#     ckpt-2 and ckpt-4 written, sample-4 equal to an undisturbed run's), and no .tmp is
#     left (the failure used to end the run after ckpt-2, exit 1);
#  2. the checkpoint records the sample as due: a --resume from a checkpoint whose sample
#     is missing writes it first, the same bytes as the undisturbed run's (it used to be
#     lost for good);
#  3. the leftover of a sample cut by a crash (sample-N.mp4.tmp) is removed by the next
#     run on RUN.
source "$(dirname "$0")/lib.sh"
need_store
RUN=(--config "$CONF" --data "$STORE" "${SMALL[@]}" --set model.num_classes=2
     --set train.ckpt_every=2 --set train.ckpt_keep=5 --set train.sample_every=2
     --set train.sample_steps=1)
$T train "${RUN[@]}" --out "$W/ref" --steps 4 2>/dev/null || fail "the undisturbed run"
[ "$(ls "$W/ref/samples" | grep -v '^samples\.jsonl$' | tr '\n' ' ')" = "sample-2.mp4 sample-4.mp4 " ] || fail "ref samples: $(ls "$W/ref/samples")"

# 1. sample-2 cannot be written
mkdir -p "$W/b/samples/sample-2.mp4"
rc=0; $T train "${RUN[@]}" --out "$W/b" --steps 4 2>"$W/b.log" || rc=$?
[ $rc -eq 0 ] || { tail -n 5 "$W/b.log"; fail "a failed sample ended the run: exit $rc"; }
grep -q "warning: .*samples/sample-2.mp4.*training goes on" "$W/b.log" ||
  fail "no warning names the sample: $(grep -i sample "$W/b.log")"
[ -f "$W/b/ckpt-2.safetensors" ] && [ -f "$W/b/ckpt-4.safetensors" ] || fail "checkpoints: $(ls "$W/b")"
cmp -s "$W/b/samples/sample-4.mp4" "$W/ref/samples/sample-4.mp4" || fail "sample-4 differs from the undisturbed run's"
[ -z "$(find "$W/b" -name '*.tmp')" ] || fail "temporary files left: $(find "$W/b" -name '*.tmp')"
ok "a failed sample is a warning; the run went on to ckpt-4 and sample-4, no .tmp left"

# 2. the last checkpoint's sample is missing: a resume writes it
mkdir -p "$W/c/samples/sample-4.mp4"
$T train "${RUN[@]}" --out "$W/c" --steps 4 2>/dev/null || fail "the run whose last sample fails"
rmdir "$W/c/samples/sample-4.mp4"
: >"$W/c/samples/sample-9.mp4.tmp"  # 3. as a crash during a sample's write leaves it
$T train "${RUN[@]}" --out "$W/c" --steps 4 --resume 2>"$W/c.log" || { cat "$W/c.log"; fail "resume"; }
grep -q "the samples of step 4 are missing: writing them first" "$W/c.log" ||
  fail "the resume did not redo the sample: $(grep -i sample "$W/c.log")"
cmp -s "$W/c/samples/sample-4.mp4" "$W/ref/samples/sample-4.mp4" ||
  fail "the rewritten sample-4 differs from the undisturbed run's"
ok "a resume writes the missing sample of its checkpoint, the undisturbed run's bytes"
[ ! -e "$W/c/samples/sample-9.mp4.tmp" ] || fail "the crashed sample's .tmp was not removed"
ok "a crashed sample's .tmp is removed by the next run"
echo "samples_state: $passed passed, 0 failed"
