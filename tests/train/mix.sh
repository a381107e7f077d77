#!/usr/bin/env bash
# tests/train/mix.sh — dataset mixes (`train --data DATASET.ini`, docs/train.md "Dataset
# mixes") on two tiny stores made here with the ffmpeg CLI, of other frame rates and sizes
# and the same patch:
#  1. a one-store mix trains bitwise what the store alone trains (losses, validation,
#     weights);
#  2. validation is held out per store: train.val_clips = 3 over a (4 clips, weight 3) and b
#     (3 clips, repeat 2) is 1 of a and 2 of b (one each, the third by the epoch quotas 4:6),
#     and an epoch then draws a's 3 training clips once and b's one twice (5 draws);
#  3. resume with the mix is bitwise (5 steps, resume to 9 == 9 straight), and the store
#     fingerprint on --resume covers every store: a clip of store b relabelled, or the
#     weights changed, is refused;
#  4. a store of another patch is refused, naming it;
#  5. `index stats DATASET.ini`: its totals are the sums of each store's `index stats`, its
#     shares the quotas' closed form;
#  6. two ranks (mpirun) give one rank's losses within 1e-5 relative.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"  # T, SRC, scratch, fail, ok, expect_fail, ckpt_tensors
scratch mix
export OMP_NUM_THREADS=1
# a: 4 clips of 1..4 s at 4 fps, 40x32 (320..1280 tokens); b: 3 clips of 1..3 s at 2 fps,
# 30x24 (84..252 tokens); c: b's videos with patch 2x4x4
for s in 1 2 3 4; do
  ffmpeg -nostdin -v error -y -f lavfi -i "testsrc2=s=160x128:r=12" -t $s "$W/a$s.mp4"
  [ $s -lt 4 ] && ffmpeg -nostdin -v error -y -f lavfi -i "smptebars=s=160x128:r=12" -t $s "$W/b$s.mp4"
done
mkdir "$W/data"
$T ingest "$W"/a*.mp4 --out "$W/data/sa" --fps 4 --short-side 32 --patch 1x4x4 --workers 1 --quiet 2>/dev/null
$T ingest "$W"/b*.mp4 --out "$W/data/sb" --fps 2 --short-side 24 --patch 1x4x4 --workers 1 --quiet 2>/dev/null
$T ingest "$W"/b*.mp4 --out "$W/data/sc" --fps 2 --short-side 24 --patch 2x4x4 --workers 1 --quiet 2>/dev/null
printf '[store.a]\npath = sa\nweight = 3\n[store.b]\npath = sb  ; beside the INI\nrepeat = 2\n' > "$W/data/mix.ini"
printf '[store.only]\npath = %s/data/sa\nweight = 5\n' "$W" > "$W/one.ini"
printf '[store.a]\npath = sa\n[store.c]\npath = sc\n' > "$W/data/bad.ini"

C=(--config "$SRC/configs/model/tiny.conf" --set model.pt=1 --set model.ph=4 --set model.pw=4
   --set model.hidden=32 --set model.heads=2 --set train.global_batch=4 --set train.steps=20
   --set train.warmup=2 --set train.lr=2e-3 --set train.ckpt_every=2 --set train.ckpt_keep=5
   --set train.log_every=1 --set train.mem_tokens=2048)
train() { "$T" train "${C[@]}" "$@" 2>>"$W/log" || { tail -5 "$W/log"; fail "train $*"; }; }
losses() { jq -r 'select(.loss) | .loss' "$1/metrics.jsonl"; }
vals() { jq -r 'select(.val_loss) | [.step, .val_loss] | @tsv' "$1/metrics.jsonl"; }

# 1. one store as a mix == the store
V=(--set train.val_clips=1 --set train.val_every=2)
train "${V[@]}" --data "$W/data/sa" --out "$W/plain" --steps 6
train "${V[@]}" --data "$W/one.ini" --out "$W/one" --steps 6
[ "$(losses "$W/plain" | wc -l)" -eq 6 ] || fail "plain: $(losses "$W/plain" | wc -l) losses"
diff <(losses "$W/plain") <(losses "$W/one") >/dev/null || fail "a one-store mix's losses differ from the store's"
diff <(vals "$W/plain") <(vals "$W/one") >/dev/null || fail "a one-store mix's validation differs"
cmp <(ckpt_tensors "$W/plain/ckpt-6.safetensors") <(ckpt_tensors "$W/one/ckpt-6.safetensors") ||
  fail "a one-store mix's weights differ from the store's"
ok "a one-store mix trains bitwise the store alone ($(vals "$W/one" | wc -l) validations)"

# 2. validation per store, and the epoch it leaves
train --set train.val_clips=3 --set train.val_every=100 --data "$W/data/mix.ini" --out "$W/v" --steps 4
held=$(grep -v '^#' "$W/v/val_clips.txt" | awk '{ n[int($1 / 2^40)]++ } END { print n[0] + 0, n[1] + 0 }')
[ "$held" = "1 2" ] || fail "held out of stores a, b: $held (expected 1 2): $(cat "$W/v/val_clips.txt")"
[ "$(jq -r 'select(.clips) | .clips' "$W/v/metrics.jsonl" | tr '\n' ' ')" = "4 1 4 1 " ] ||
  fail "an epoch is not 5 draws: $(jq -r 'select(.clips) | .clips' "$W/v/metrics.jsonl" | tr '\n' ' ')"
ok "validation held out per store (a: 1, b: 2); epochs of 5 draws"

# 3. resume bitwise with the mix; the fingerprint covers both stores
M=(--set train.val_clips=2 --set train.val_every=2 --data "$W/data/mix.ini")
train "${M[@]}" --out "$W/u" --steps 9
train "${M[@]}" --out "$W/r" --steps 5
cp -r "$W/r" "$W/r2"
train "${M[@]}" --out "$W/r" --steps 9 --resume
diff <(losses "$W/u") <(losses "$W/r") >/dev/null || fail "the resumed losses differ"
cmp "$W/u/ckpt-9.safetensors" "$W/r/ckpt-9.safetensors" || fail "the resumed ckpt-9 differs"
ok "resume with a mix of two stores: losses and ckpt-9 bitwise the straight run's"
id=$(sqlite3 "$W/data/sb/index.sqlite" "select id from clips order by id limit 1")
sqlite3 "$W/data/sb/index.sqlite" "update clips set label = 'moved' where id = $id"
expect_fail "store .*mix.ini is not the store this run started with.*clip $(((1 << 40) | id)) label changed" \
  "$T" train "${C[@]}" "${M[@]}" --out "$W/r2" --steps 9 --resume
sqlite3 "$W/data/sb/index.sqlite" "update clips set label = '' where id = $id"
sed 's/weight = 3/weight = 4/' "$W/data/mix.ini" > "$W/data/mix4.ini"
expect_fail "store .*mix4.ini is not the store this run started with.*the mix's stores, weights, repeats" \
  "$T" train "${C[@]}" --set train.val_clips=2 --set train.val_every=2 --data "$W/data/mix4.ini" \
  --out "$W/r2" --steps 9 --resume
ok "--resume refuses a clip of the second store relabelled, and other weights"

# 4. another patch, named
expect_fail "mix .*bad.ini: store 'c' \(.*sc\) has patch 2x4x4 but store 'a' \(.*sa\) has 1x4x4" \
  "$T" train "${C[@]}" --data "$W/data/bad.ini" --out "$W/bad" --steps 1
expect_fail "index.sqlite is a file, so it was read as a dataset mix" \
  "$T" train "${C[@]}" --data "$W/data/sa/index.sqlite" --out "$W/bad" --steps 1
ok "a store of another patch is refused, naming it; a file that is no mix is named as such"

# 5. index stats of the mix: the sums of its stores'
"$T" index stats --json "$W/data/mix.ini" > "$W/mix.json"
"$T" index stats --json "$W/data/sa" > "$W/a.json"
"$T" index stats --json "$W/data/sb" > "$W/b.json"
for k in clips tokens frames dropped_frames seconds; do
  want=$(jq -s ".[0].$k + .[1].$k" "$W/a.json" "$W/b.json")
  got=$(jq ".totals.$k" "$W/mix.json")
  [ "$want" = "$got" ] || fail "index stats: mix $k $got, stores' sum $want"
done
# quotas: a (weight 3) its 4 clips, b (repeat 2) 2 x 3: shares 0.4 and 0.6
jq -e '.draws_per_epoch == 10 and (.mix_stores | map(.draws_per_epoch) == [4, 6]) and
       (.mix_stores | map(.share) == [0.4, 0.6]) and (.stores | length == 2)' "$W/mix.json" >/dev/null ||
  fail "index stats: shares $(jq -c '.mix_stores' "$W/mix.json")"
"$T" index stats "$W/data/mix.ini" > "$W/mix.txt"
grep -q "^== store 2 of 2: 'b'" "$W/mix.txt" && grep -Eq "^  b +3 +504 .* repeat 2 +6 +60.00% +2.000" "$W/mix.txt" ||
  fail "index stats text: $(tail -5 "$W/mix.txt")"
ok "index stats of the mix: totals = the stores' sums ($(jq .totals.clips "$W/mix.json") clips), shares 0.4 / 0.6"
# 6. two ranks train the mix as one does (each rank opens every store itself), up to the
#    reassociation of the gradient sums: 1e-5 relative, tests/dist/plan_invariance.sh's
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe -np 2 \
  "$T" train "${C[@]}" "${M[@]}" --out "$W/m2" --steps 4 2>"$W/m2.log" || { tail -5 "$W/m2.log"; fail "2 ranks"; }
paste <(losses "$W/u" | head -4) <(losses "$W/m2") | awk '
  { d = $1 - $2; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1); if (r > m) m = r; k++ }
  END { printf "2 ranks: %d losses, worst relative difference %.3g\n", k, m; exit !(k == 4 && m <= 1e-5) }' ||
  fail "2 ranks' losses differ from 1 rank's"
ok "two ranks train the mix as one rank does"
echo "mix: $passed passed, 0 failed"
