#!/usr/bin/env bash
# `tessera plan` end to end: help, a real mix with --json (shape of the file), the
# async pipeline over several steps, and clear errors (exit 1) on bad input.
set -u
BIN=${TESSERA_BIN:?set by ctest}
SRC=${TESSERA_SRC:?set by ctest}
. "$SRC/tests/shared.sh"
need_shared lengths
LEN=$TESSERA_SHARED/lengths
COST=$SRC/configs/cost/h100-dit1b.conf
T=$(mktemp -d /tmp/tsr_plan_cli.XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }

# expect_fail NAME PATTERN ARGS...: exit status 1 and PATTERN in stderr
expect_fail() {
  local name=$1 pat=$2; shift 2
  "$BIN" plan "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  if [ $rc -ne 1 ]; then bad "$name: exit $rc, expected 1"; return; fi
  if grep -q -- "$pat" "$T/err"; then ok; else bad "$name: stderr lacks '$pat': $(cat "$T/err")"; fi
}

"$BIN" plan --help >"$T/help" && grep -q -- "--lengths" "$T/help" && grep -q -- "--json" "$T/help" && grep -q -- "--out FILE" "$T/help" \
  && ok || bad "help"

MIX="$LEN/ucf101_clips.csv:0.97,$LEN/youcook2_videos.csv:0.03"
BASE=(--tokens-per-second 1800 --max-seconds 300 --ranks 64 --gpus-per-node 8 --mem-tokens 65536 --cost "$COST")
if "$BIN" plan --lengths "$MIX" "${BASE[@]}" --steps 3 --seed 5 --out "$T/p.json" >"$T/out" 2>"$T/err"; then
  ok
  grep -q '^summary: dynamic plan' "$T/out" && ok || bad "summary line: $(cat "$T/out")"
  [ "$(grep -c '^[0-9]' "$T/out")" -eq 3 ] && ok || bad "3 step lines"
  for key in '"ranks":64' '"gpus_per_node":8' '"mem_tokens":65536' '"cost":{' '"steps":\[' \
             '"clips":\[{"id":' '"waves":\[{"groups":\[{"first_rank":' '"predicted_s":' \
             '"packing_only_s":' '"static_balanced_s":' '"lower_bound_s":' '"plan_ms":' \
             '"size":' '"total":'; do
    grep -q "$key" "$T/p.json" && ok || bad "json lacks $key"
  done
  # same seed, same plans (the planner is deterministic, the sampler is seeded)
  "$BIN" plan --lengths "$MIX" "${BASE[@]}" --steps 3 --seed 5 --out "$T/q.json" >/dev/null 2>&1
  sed -E 's/"plan_(cpu_)?ms[a-z_]*":[0-9.e+-]*//g' "$T/p.json" >"$T/p2"
  sed -E 's/"plan_(cpu_)?ms[a-z_]*":[0-9.e+-]*//g' "$T/q.json" >"$T/q2"
  cmp -s "$T/p2" "$T/q2" && ok || bad "same seed gives same JSON"
  # --json alone: the same document on stdout, the summary on stderr; the older `--json FILE`
  # still writes the file, with a warning naming --out
  "$BIN" plan --lengths "$MIX" "${BASE[@]}" --steps 3 --seed 5 --json >"$T/s.json" 2>"$T/s.err"
  sed -E 's/"plan_(cpu_)?ms[a-z_]*":[0-9.e+-]*//g' "$T/s.json" >"$T/s2"
  cmp -s "$T/p2" "$T/s2" && ok || bad "--json on stdout is --out's document"
  grep -q '^summary: dynamic plan' "$T/s.err" && ok || bad "--json: the summary on stderr"
  "$BIN" plan --lengths "$MIX" "${BASE[@]}" --steps 3 --seed 5 --json "$T/d.json" >/dev/null 2>"$T/d.err"
  sed -E 's/"plan_(cpu_)?ms[a-z_]*":[0-9.e+-]*//g' "$T/d.json" >"$T/d2"
  cmp -s "$T/p2" "$T/d2" && grep -q "deprecated, accepted for one release: use --out" "$T/d.err" && ok ||
    bad "--json FILE: the file and a deprecation note ($(head -c 200 "$T/d.err"))"
else
  bad "plan on a real mix: $(cat "$T/err")"
fi

# token geometry and --waves
if "$BIN" plan --lengths "$LEN/charades_videos.csv" --fps 8 --size 256x256 --patch 4x16x16 \
     --ranks 8 --mem-tokens 16384 --global-batch 32 --cost "$COST" --waves >"$T/out" 2>"$T/err"; then
  grep -q '^  wave 0:' "$T/out" && ok || bad "--waves prints waves"
else
  bad "geometry run: $(cat "$T/err")"
fi

printf 'id,tokens\n' >"$T/header.csv"
: >"$T/empty.csv"
printf 'id,tokens\na,12\nb,oops\n' >"$T/malformed.csv"
printf 'id,tokens\na,12\nb,0\n' >"$T/zero.csv"
printf 'id,tokens\na,12\nb,-4\n' >"$T/neg.csv"
printf 'id,tokens\na,1000\nb,3000\n' >"$T/ok.csv"
grep -v '^allreduce' "$COST" >"$T/noallreduce.conf"
OK=(--ranks 4 --mem-tokens 1000 --cost "$COST")
expect_fail "empty csv" "empty.csv: empty file" --lengths "$T/empty.csv" "${OK[@]}"
expect_fail "header only" "header.csv: no clips" --lengths "$T/header.csv" "${OK[@]}"
expect_fail "malformed csv" "malformed.csv:3: tokens 'oops' is not a number" --lengths "$T/malformed.csv" "${OK[@]}"
expect_fail "zero length" "zero.csv:3: tokens = 0" --lengths "$T/zero.csv" "${OK[@]}"
expect_fail "negative length" "neg.csv:3: tokens = -4" --lengths "$T/neg.csv" "${OK[@]}"
# any world size: 6 ranks plan on the blocks that fit (no group of 4 holds ranks 4-5), and a
# clip needing more than the largest power of two (4 x 1000 tokens) is refused naming it
if "$BIN" plan --lengths "$T/ok.csv" --ranks 6 --gpus-per-node 2 --mem-tokens 1000 --cost "$COST" >"$T/out" 2>"$T/err" &&
   grep -q "group set: aligned blocks \[i\*k, (i+1)\*k) of k = 1 (6), 2 (3), 4 (1; ranks 4-5 in none)" "$T/out"; then
  ok
else
  bad "6 ranks: $(cat "$T/out" "$T/err")"
fi
printf 'id,tokens\na,1000\nb,4001\n' >"$T/big.csv"
expect_fail "clip above 4 x M on 6 ranks" "no group can hold such a clip (4 ranks x 1000" --lengths "$T/big.csv" --ranks 6 --mem-tokens 1000 --cost "$COST"
expect_fail "M too small" "no group can hold" --lengths "$T/ok.csv" --ranks 4 --mem-tokens 100 --cost "$COST"
expect_fail "missing cost key" "noallreduce.conf: missing key 'allreduce'" --lengths "$T/ok.csv" --ranks 4 --mem-tokens 1000 --cost "$T/noallreduce.conf"
# without --cost: train's default cost model (sched/cost.h cost_model_cpu), named in the header
if "$BIN" plan --lengths "$T/ok.csv" --ranks 4 --mem-tokens 4000 --steps 1 >"$T/out" 2>"$T/err" &&
   grep -q "cost built-in CPU (as train's without --cost)" "$T/out"; then ok
else bad "no --cost: $(cat "$T/out" "$T/err" | head -5)"; fi
# every missing required option in one message
expect_fail "all missing" "missing --lengths or --data, --ranks, --mem-tokens (or --config and --mem-bytes)"
expect_fail "two missing" "missing --ranks, --mem-tokens" --lengths "$T/ok.csv"
# the lengths CSV through the manifests' CSV reader: a quoted comma (as pandas writes one)
printf 'id,caption,tokens\na,"a dog, a cat",1000\nb,plain,3000\n' >"$T/quoted.csv"
if "$BIN" plan --lengths "$T/quoted.csv" "${OK[@]}" --steps 1 >"$T/out" 2>"$T/err" &&
   grep -q "2 clips from 1 source" "$T/out"; then ok
else bad "quoted comma: $(cat "$T/out" "$T/err" | head -5)"; fi
expect_fail "no geometry" "--fps" --lengths "$LEN/ucf101_clips.csv" "${OK[@]}"
expect_fail "missing file" "nope.csv: cannot open" --lengths "$T/nope.csv" "${OK[@]}"
expect_fail "bad option" "unknown option" --lengths "$T/ok.csv" "${OK[@]}" --frobnicate
expect_fail "bad number" "--ranks: 'x'" --lengths "$T/ok.csv" --ranks x --mem-tokens 1000 --cost "$COST"
expect_fail "unwritable json" "cannot write" --lengths "$T/ok.csv" "${OK[@]}" --json /nonexistent/dir/p.json
# Issue 9, part 6: absurd numbers end with a message naming them, never a crash (a = 1e308
# segfaulted in sched/dynamic.c; 1e30 tokens became INT64_MIN without file or line).
sed 's/^a = .*/a = 1e308/' "$COST" >"$T/a308.conf"
sed 's/^b = .*/b = 1e300/' "$COST" >"$T/b300.conf"
sed 's/^a = .*/a = 0/' "$COST" >"$T/a0.conf"
{ cat "$COST"; echo "b = 2e-9"; } >"$T/btwice.conf"
printf 'id,tokens\na,12\nb,1e30\n' >"$T/huge.csv"
expect_fail "a = 1e308" "a308.conf:.*: key 'a' = 1e+308 is out of range" --lengths "$T/ok.csv" --ranks 4 --mem-tokens 1000 --cost "$T/a308.conf"
expect_fail "b = 1e300" "b300.conf:.*: key 'b' = 1e+300 is out of range" --lengths "$T/ok.csv" --ranks 4 --mem-tokens 1000 --cost "$T/b300.conf"
expect_fail "a = 0" "a0.conf:.*: key 'a' = 0 is out of range" --lengths "$T/ok.csv" --ranks 4 --mem-tokens 1000 --cost "$T/a0.conf"
expect_fail "cost key twice" "btwice.conf:.*: key 'b' given twice (lines" --lengths "$T/ok.csv" --ranks 4 --mem-tokens 1000 --cost "$T/btwice.conf"
expect_fail "1e30 tokens" "huge.csv:3: tokens = 1e30" --lengths "$T/huge.csv" "${OK[@]}"
expect_fail "mem tokens overflow" "--mem-tokens: '9223372036854775807' is not an integer in \[1, 274877906944\]" --lengths "$T/ok.csv" --ranks 4 --mem-tokens 9223372036854775807 --cost "$COST"
expect_fail "mem tokens past int64" "--mem-tokens: '99999999999999999999'" --lengths "$T/ok.csv" --ranks 4 --mem-tokens 99999999999999999999 --cost "$COST"
expect_fail "ranks 2^30" "--ranks: '1073741824'" --lengths "$T/ok.csv" --ranks 1073741824 --mem-tokens 1000 --cost "$COST"
expect_fail "negative ranks" "--ranks: '-4'" --lengths "$T/ok.csv" --ranks -4 --mem-tokens 1000 --cost "$COST"
expect_fail "fps inf" "--fps: 'inf'" --lengths "$T/ok.csv" "${OK[@]}" --fps inf --size 64x64 --patch 1x16x16
expect_fail "tps nan" "--tokens-per-second: 'nan'" --lengths "$T/ok.csv" "${OK[@]}" --tokens-per-second nan
expect_fail "size overflow" "--size: '99999999999x64'" --lengths "$T/ok.csv" "${OK[@]}" --fps 8 --size 99999999999x64 --patch 1x16x16

# --data STORE: the clip lengths of an ingested store. Three generated clips of 2, 4 and
# 6 s at 8 fps, patch 2x16x16 (160x120 -> 160x128, 8x10 tokens a tubelet): the plan must see
# exactly the token counts the index holds.
for d in 2 4 6; do
  ffmpeg -nostdin -v error -y -f lavfi -i "testsrc2=s=160x120:r=24:d=$d" "$T/clip$d.mp4" || bad "make clip $d"
done
"$BIN" ingest "$T"/clip*.mp4 --out "$T/store" --quiet 2>"$T/ingest.err" || bad "ingest for --data: $(cat "$T/ingest.err")"
want=$(sqlite3 "$T/store/index.sqlite" "SELECT group_concat(tokens, ',') FROM (SELECT tokens FROM clips ORDER BY tokens)")
if "$BIN" plan --data "$T/store" --ranks 4 --mem-tokens 4096 --global-batch 3 --cost "$COST" \
     --json "$T/d.json" >"$T/out" 2>"$T/err"; then
  got=$(jq -r '[.steps[0].clips[].tokens] | sort | map(tostring) | join(",")' "$T/d.json")
  [ "$got" = "$want" ] && ok || bad "--data: plan clip tokens '$got', index says '$want'"
else
  bad "--data plan failed: $(cat "$T/err")"
fi
expect_fail "--data of a missing store" "nostore" --data "$T/nostore" --ranks 4 --mem-tokens 4096 --cost "$COST"

# --config --mem-bytes: M from the trainer's memory model (model/train/memory.h). The
# model's tokens for 2 GiB per GPU on 4 ranks: the plan uses the M it prints with the
# breakdown, whose total fits 2 GiB and fills it to within a few tokens' bytes (> 2e9), and
# the breakdown names every part; bad combinations are refused.
CONF=$SRC/configs/model/tiny.conf
if "$BIN" plan --lengths "$T/ok.csv" --ranks 4 --cost "$COST" --config "$CONF" \
     --mem-bytes 2147483648 >"$T/out" 2>"$T/err"; then
  m=$(sed -n 's/.*4 ranks (8 per node), \([0-9]*\) mem tokens.*/\1/p' "$T/out")
  total=$(sed -n 's/^memory per GPU .*: [0-9.]* [GM]iB (\([0-9]*\) bytes) for \([0-9]*\) tokens.*/\1 \2/p' "$T/out")
  set -- $total
  [ -n "$m" ] && [ "${2:-}" = "$m" ] && [ "${1:-0}" -le 2147483648 ] && [ "${1:-0}" -gt 2000000000 ] && ok \
    || bad "--mem-bytes: mem tokens '$m', model '$total': $(cat "$T/out")"
  for part in weights grads optimizer activations inputs "ring buffers of 2 CP sizes" "attention workspace" "reserve 1.000 GiB"; do
    grep -q "^memory per GPU.*$part" "$T/out" && ok || bad "--mem-bytes breakdown lacks '$part'"
  done
else
  bad "--mem-bytes plan failed: $(cat "$T/err")"
fi
# the memory model at 12 ranks (not a power of two): ring buffers of the CP sizes 2, 4, 8 the
# group set has, ZeRO's shards over the 12 ranks
if "$BIN" plan --lengths "$T/ok.csv" --ranks 12 --cost "$COST" --config "$CONF" --set train.zero=1 \
     --mem-bytes 2147483648 >"$T/out" 2>"$T/err" && grep -q "12 ranks (8 per node)" "$T/out" &&
   grep -q "^memory per GPU.*ring buffers of 3 CP sizes" "$T/out"; then
  ok
else
  bad "--mem-bytes at 12 ranks: $(cat "$T/out" "$T/err")"
fi
# --set train.zero=Z: ZeRO's exposed communication (sched/cost.h "ZeRO") printed and in the
# JSON, against the closed form from the model's sizes and the cost file (4 ranks in a node:
# bw_intra, lat): the step's all-gather t_ag = 3/4 * 4P / bw_intra + nb * lat; at stage 2 each
# wave adds its last block's reduce-scatter 3/4 * 4Pb / bw_intra + lat (the other buckets',
# checked to be shorter than 2/3 of ovh, hide behind any wave's backward; the JSON has 9
# significant digits)
for z in 0 1 2; do
  if "$BIN" plan --lengths "$T/ok.csv" --ranks 4 --cost "$COST" --config "$CONF" --steps 2 \
       --mem-bytes 2147483648 --set train.zero=$z --json "$T/z$z.json" >"$T/out" 2>"$T/err"; then
    if [ $z = 0 ]; then ! grep -q "^ZeRO" "$T/out" && ok || bad "zero 0 prints a ZeRO line"
    else grep -q "^ZeRO stage $z (.*): communication per step, exposed: [0-9.]* s" "$T/out" && ok \
      || bad "zero $z: no ZeRO line: $(cat "$T/out")"; fi
    python3 - "$T/z$z.json" "$z" <<'PY' && ok || bad "zero $z: JSON's zero_s against the closed form"
import json, sys
j = json.load(open(sys.argv[1])); z = int(sys.argv[2]); c = j["cost"]; zo = j["zero"]
N, bw, lat = j["ranks"], c["bw_intra"], c["lat"]
P, Pb, nb = zo["params"], zo["block"], zo["buckets"]
assert zo["stage"] == z, zo
tag = (N - 1) / N * 4 * P / bw + nb * lat if z else 0
assert abs(zo["step_s"] - tag) <= 1e-8 * max(1e-3, tag), (zo, tag)
last = (N - 1) / N * 4 * Pb / bw + lat if z >= 2 else 0
assert (N - 1) / N * 4 * (P - Pb) / bw + (nb - 1) * lat < 2 / 3 * c["ovh"]
tot = 0
for s in j["steps"]:
    want = tag + len(s["waves"]) * last
    assert abs(s["zero_s"] - want) <= 1e-8 * max(1e-3, want), (s["zero_s"], want)
    assert s["predicted_s"] >= s["zero_s"], s["predicted_s"]
    tot += s["zero_s"]
assert abs(j["total"]["zero_s"] - tot) <= 1e-8 * max(1e-3, tot)
PY
  else
    bad "zero $z plan failed: $(cat "$T/err")"
  fi
done
# --config's attention mask (sched/cost.h cost_clip_area): one clip of 10 frames of 30 x 52
# tokens on one rank, block-causal by chunks of 2 frames: 5 chunks of 3120 tokens, area
# 3120^2 (1 + 2 + 3 + 4 + 5) against the full 3120^2 * 25: the plan is b * 3120^2 * 10
# faster. Without the frame's grid a masked config is refused.
printf 'tokens\n15600\n' > "$T/one.csv"
ONE=(--lengths "$T/one.csv" --ranks 1 --mem-tokens 65536 --global-batch 1 --cost "$COST" --config "$CONF")
if "$BIN" plan "${ONE[@]}" --out "$T/full.json" >/dev/null 2>"$T/err" &&
   "$BIN" plan "${ONE[@]}" --set model.attn_mask=block_causal --set model.mask_chunk=2 \
     --frame-grid 30x52 --json "$T/causal.json" >/dev/null 2>>"$T/err"; then
  python3 - "$T/full.json" "$T/causal.json" <<'PY' && ok || bad "block_causal plan: not b * area less"
import json, sys
f, c = (json.load(open(p)) for p in sys.argv[1:3])
want = c["cost"]["b"] * 3120 ** 2 * 10
got = f["steps"][0]["predicted_s"] - c["steps"][0]["predicted_s"]
assert abs(got - want) <= 1e-6 * want, (got, want)
PY
else
  bad "masked plan failed: $(cat "$T/err")"
fi
# --placement (sched/placement.h): the same clip on 4 ranks of 4,000 tokens (CP 4, ring).
# Contiguous chunks of 3,900 tokens over 5 blocks of 3,120: rank r needs the keys up to the
# end of the block of its last token, so it receives 6240-3900, 9360-3900, 12480-3900 and
# 15600-3900 tokens, and its work is 3120 per token of block 0 ... 15600 of block 4: the
# last rank 3120*780*4 + 3120*3120*5 of 3120^2*15/4 on average, 1.6x. Blockwise balances.
PL=(--lengths "$T/one.csv" --ranks 4 --mem-tokens 4000 --global-batch 1 --cost "$COST" --config "$CONF"
    --set model.attn_mask=block_causal --set model.mask_chunk=2 --frame-grid 30x52 --cp-mode ring)
if "$BIN" plan "${PL[@]}" --placement contiguous --out "$T/pc.json" >/dev/null 2>"$T/err" &&
   "$BIN" plan "${PL[@]}" --placement blockwise --out "$T/pb.json" >/dev/null 2>>"$T/err"; then
  python3 - "$T/pc.json" "$T/pb.json" <<'PY' && ok || bad "--placement: groups not as counted by hand"
import json, sys
c, b = (json.load(open(p))["steps"][0] for p in sys.argv[1:3])
gc, gb = ([g for w in s["waves"] for g in w["groups"] if g["clips"]][0] for s in (c, b))
assert gc["placement"] == "contiguous" and gc["kv_recv_tokens"] == [2340, 5460, 8580, 11700], gc
assert abs(gc["work_imbalance"] - 1.6) < 1e-12, gc
assert gb["placement"] == "blockwise" and gb["work_imbalance"] <= 1.01, gb
assert b["predicted_s"] < c["predicted_s"], (b["predicted_s"], c["predicted_s"])
PY
else
  bad "--placement plan failed: $(cat "$T/err")"
fi
# --placement zigzag pinned: 8 pieces of 1,950 tokens, rank r holds pieces r and 7 - r and
# receives the keys up to the end of the block of its last token less its own 3,900:
# ranks 0 and 1 15600 - 3900, ranks 2 and 3 12480 - 3900 (balanced to the token).
if "$BIN" plan "${PL[@]}" --placement zigzag --out "$T/pz.json" >/dev/null 2>"$T/err"; then
  python3 - "$T/pz.json" <<'PY' && ok || bad "--placement zigzag: groups not as counted by hand"
import json, sys
s = json.load(open(sys.argv[1]))["steps"][0]
g = [g for w in s["waves"] for g in w["groups"] if g["clips"]][0]
assert g["kv_recv_tokens"] == [11700, 11700, 8580, 8580] and g["work_imbalance"] == 1.0, g
PY
else
  bad "--placement zigzag plan failed: $(cat "$T/err")"
fi
expect_fail "bad --placement" "--placement: 'zig' is not even, contiguous, blockwise, zigzag, balanced, greedy or metis" "${PL[@]}" --placement zig
expect_fail "mask without a frame grid" "needs the token grid of a latent frame" "${ONE[@]}" --set model.attn_mask=window
expect_fail "--mem-bytes without --config" "--mem-bytes needs --config" --lengths "$T/ok.csv" --ranks 4 --cost "$COST" --mem-bytes 2147483648
expect_fail "both limits" "--mem-tokens or --mem-bytes, not both" --lengths "$T/ok.csv" "${OK[@]}" --config "$CONF" --mem-bytes 2147483648
expect_fail "--mem-bytes too small" "does not fit .* even with 1 token" --lengths "$T/ok.csv" --ranks 4 --cost "$COST" --config "$CONF" --mem-bytes 1048576

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
