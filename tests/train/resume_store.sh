#!/usr/bin/env bash
# Resume means the same data (issue 24, item 7):
#  1. --resume checks the store against the one the run started with by a fingerprint of
#     its clip table (ids, lengths, checksums, labels), not by its clip count: a store whose
#     clips keep their number but one changed its label, or whose clip ids were renumbered,
#     is refused, naming the clip and what changed (it used to resume on it silently);
#  2. a resume under other plan settings says that it is not bitwise; under the same ones
#     that it is;
#  3. train.mem_tokens = 0 (derived from memory) resumes bitwise on a day with other free
#     memory: the run's derived value is kept when it fits (the derived value used to
#     follow --mem-bytes and the losses after the resume differed from an uninterrupted
#     run's).
source "$(dirname "$0")/lib.sh"
need_store
S=$W/store
cp -r "$STORE" "$S"
RUN=(--config "$CONF" --data "$S" "${SMALL[@]}" --set model.num_classes=2 --set train.ckpt_every=2)
$T train "${RUN[@]}" --out "$W/r" --steps 2 2>/dev/null || fail "the first 2 steps"
[ -s "$W/r/store-clips.txt" ] || fail "RUN/store-clips.txt was not written"
ok "RUN/store-clips.txt records $(grep -vc '^#' "$W/r/store-clips.txt") clips"

# changed_refused CHANGE UNDO PATTERN WHAT: the store changed by the SQL CHANGE makes the
# resume fail with PATTERN; the SQL UNDO puts it back.
changed_refused() {
  sqlite3 "$S/index.sqlite" "$1"
  expect_fail "$3" $T train "${RUN[@]}" --out "$W/r" --steps 4 --resume
  ok "$4 is refused"
  sqlite3 "$S/index.sqlite" "$2"
}
# 1. one clip relabelled: the same clip count
id=$(sqlite3 "$S/index.sqlite" "select id from clips order by id limit 1")
old=$(sqlite3 "$S/index.sqlite" "select label from clips where id = $id")
new=$(sqlite3 "$S/index.sqlite" "select label from clips where label != '$old' limit 1")
changed_refused "update clips set label = '$new' where id = $id" "update clips set label = '$old' where id = $id" \
  "store $S is not the store this run started with.*1 clips changed, 0 gone, 0 new.*clip $id label changed: '$old' -> '$new'" \
  "a relabelled clip (named with both labels)"
# clip ids renumbered (as a merge into a new store does): the same clips, other keys
last=$(sqlite3 "$S/index.sqlite" "select max(id) from clips")
changed_refused "update clips set id = $((last + 100)) where id = $last" "update clips set id = $last where id = $((last + 100))" \
  "clip $last is gone; clip $((last + 100)) is new" "renumbered clip ids"

# 2. plan settings: the same (bitwise), another mem_tokens (not bitwise, said)
cp -r "$W/r" "$W/r2"
$T train "${RUN[@]}" --out "$W/r" --steps 4 --resume 2>"$W/same.log" || { cat "$W/same.log"; fail "resume"; }
grep -q "resuming bitwise: the plan settings are the run's (mem_tokens 512" "$W/same.log" ||
  fail "the resume does not say it is bitwise: $(grep -i bitwise "$W/same.log")"
ok "the same settings: 'resuming bitwise'"
$T train "${RUN[@]}" --set train.mem_tokens=1024 --out "$W/r2" --steps 4 --resume 2>"$W/other.log" ||
  { cat "$W/other.log"; fail "resume with another mem_tokens"; }
grep -q "changes the plan settings ('mem_tokens 512, .*' in checkpoint .*, 'mem_tokens 1024, .*' now).*NOT bitwise" "$W/other.log" ||
  fail "another mem_tokens is not called out: $(grep -i bitwise "$W/other.log")"
ok "another mem_tokens: 'NOT bitwise'"

# 3. mem_tokens = 0, derived from --mem-bytes: another --mem-bytes at the resume
D=(--config "$CONF" --data "$S" "${SMALL[@]}" --set train.mem_tokens=0)
$T train "${D[@]}" --mem-bytes 25000000 --out "$W/u" --steps 4 2>"$W/u.log" || { cat "$W/u.log"; fail "uninterrupted"; }
$T train "${D[@]}" --mem-bytes 25000000 --out "$W/d" --steps 2 2>/dev/null || fail "derived, 2 steps"
$T train "${D[@]}" --mem-bytes 30000000 --out "$W/d" --steps 4 --resume 2>"$W/d.log" ||
  { cat "$W/d.log"; fail "derived, resumed with more memory"; }
grep -q "keeping the resumed run's [0-9]* tokens" "$W/d.log" || fail "the run's mem_tokens was not kept: $(grep mem_tokens "$W/d.log")"
diff <(losses "$W/u") <(losses "$W/d") >/dev/null || fail "the resumed losses differ from the uninterrupted run's"
cmp <(ckpt_tensors "$W/u/ckpt-4.safetensors") <(ckpt_tensors "$W/d/ckpt-4.safetensors") ||
  fail "the resumed weights differ from the uninterrupted run's"
ok "mem_tokens = 0 resumed under another --mem-bytes: bitwise the uninterrupted run"
echo "resume_store: $passed passed, 0 failed"
