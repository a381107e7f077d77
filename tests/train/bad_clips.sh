#!/usr/bin/env bash
# tests/train/bad_clips.sh — damaged clips never reach a step unnoticed (docs/train.md,
# "Bad clips"): one flipped payload byte stops `tessera train` naming the clip, shard and
# offset (and `tessera index verify`), or with --skip-bad-clips the clip is left out,
# reported once and counted in metrics.jsonl; index rows that point past the end of a
# shard, and a crafted grid whose T*H*W overflows int64, are refused at start.
source "$(dirname "$0")/lib.sh"
need_store
n=$(sqlite3 "$STORE/index.sqlite" "select count(*) from clips")
EPOCH=$(((n + 3) / 4))  # steps of one epoch at train.global_batch = 4
# clip: the third clip's id, shard and block offset
read -r id shard off <<<"$(sqlite3 -separator ' ' "$STORE/index.sqlite" \
  "select id, shard, offset from clips order by id limit 1 offset 2")"

# 1. one payload byte flipped (inside the payload: past the 64-byte block header)
cp -r "$STORE" "$W/flip"
pos=$((off + 64 + 100))
b=$(od -An -tu1 -j$pos -N1 "$W/flip/$shard" | tr -d ' ')
printf "\\x$(printf %02x $((b ^ 1)))" | dd of="$W/flip/$shard" bs=1 seek=$pos conv=notrunc status=none
rc=0; $T index verify "$W/flip" >"$W/verify.out" 2>&1 || rc=$?
[ $rc -ne 0 ] && grep -q "checksum" "$W/verify.out" || { cat "$W/verify.out"; fail "index verify missed the flip"; }
expect_fail "clip $id of store .*payload checksum mismatch in block at offset $off .*tessera index verify" \
  $T train --config "$CONF" --data "$W/flip" --out "$W/stop" "${SMALL[@]}" --steps $EPOCH
! ls "$W"/stop/ckpt-* >/dev/null 2>&1 || fail "a run stopped by a bad clip wrote a checkpoint"

# 2. --skip-bad-clips: two epochs without the clip, reported once, counted in metrics
$T train --config "$CONF" --data "$W/flip" --out "$W/skip" "${SMALL[@]}" --steps $((2 * EPOCH)) \
  --skip-bad-clips 2>"$W/skip.err" || { cat "$W/skip.err"; fail "--skip-bad-clips run failed"; }
[ "$(grep -c "skipping bad clip $id " "$W/skip.err")" -eq 1 ] || { cat "$W/skip.err"; fail "clip $id not reported exactly once"; }
[ "$(jq -s 'map(.clips) | add' "$W/skip/metrics.jsonl")" -eq $((2 * (n - 1))) ] ||
  fail "two epochs should train $((2 * (n - 1))) clips: $(jq -c .clips "$W/skip/metrics.jsonl" | tr '\n' ' ')"
[ "$(jq -s '.[-1].bad_clips' "$W/skip/metrics.jsonl")" -eq 1 ] || fail "metrics bad_clips is not 1"
[ "$(jq -s '.[0].bad_clips' "$W/skip/metrics.jsonl")" -le 1 ] || fail "metrics bad_clips > 1"
echo "ok: skipped clip $id, $((2 * (n - 1))) clips trained in two epochs"

# 3. rows past the end of the shard, found at start (before the first step)
cp -r "$STORE" "$W/past"
sqlite3 "$W/past/index.sqlite" "update clips set offset = offset + 1073741824 where id = $id"
expect_fail "clip $id lies past the end of shard $shard: its block at offset $((off + 1073741824))" \
  $T train --config "$CONF" --data "$W/past" --out "$W/r3" "${SMALL[@]}" --steps 1
cp -r "$STORE" "$W/trunc"
last=$(sqlite3 "$W/trunc/index.sqlite" "select id || ' ' || offset from clips where shard = '$shard' order by offset desc limit 1")
truncate -s $((${last#* } + 200)) "$W/trunc/$shard"
expect_fail "clip ${last% *} lies past the end of shard $shard: its block at offset ${last#* }" \
  $T train --config "$CONF" --data "$W/trunc" --out "$W/r4" "${SMALL[@]}" --steps 1

# 4. a crafted grid whose T*H*W wraps to 0 in int64 (2^22 * 2^21 * 2^21 = 2^64), with
#    tokens = bytes = 0 to match the wrapped product: refused, naming the clip
cp -r "$STORE" "$W/grid"
sqlite3 "$W/grid/index.sqlite" "update clips set T = 4194304, H = 2097152, W = 2097152, tokens = 0, bytes = 0 where id = $id"
expect_fail "clip $id .*token grid 4194304x2097152x2097152" \
  $T train --config "$CONF" --data "$W/grid" --out "$W/r5" "${SMALL[@]}" --steps 1
[ ! -e "$W/r3/metrics.jsonl" ] && [ ! -e "$W/r5/metrics.jsonl" ] || fail "a refused store started training"
echo "bad_clips: all caught"
