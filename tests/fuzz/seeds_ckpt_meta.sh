# seeds_ckpt_meta.sh OUT ART — seeds for fuzz_ckpt_meta (sourced by tools/fuzz.sh): the
# metadata of the real checkpoints of ART/run as KEY NUL VALUE NUL pairs (jq reads the
# safetensors header; the writer's own xxh3: keys left out), and copies of the first with one
# value set to what a crafted file may hold (the values that overflowed the encoder and the
# sampler, and the limits around them), so the fuzzer starts at the edges.
# pairs CKPT [KEY VALUE]: CKPT's metadata as pairs, KEY's value replaced by VALUE
pairs() {
  local len
  len=$(od -An -t u8 -N 8 "$1" | tr -d ' ')
  head -c $((8 + len)) "$1" | tail -c "$len" |
    jq -j --arg k "${2:-}" --arg v "${3:-}" '.__metadata__ | if $k != "" then .[$k] = $v else . end |
      to_entries[] | select(.key | startswith("xxh3:") | not) | .key, "\u0000", .value, "\u0000"'
}
n=0
for ck in "$ART"/run/ckpt-*.safetensors; do
  [ -f "$ck" ] || continue
  pairs "$ck" >"$OUT/real-$n"
  n=$((n + 1))
done
ck=$(ls "$ART"/run/ckpt-*.safetensors 2>/dev/null | head -1)
[ -n "$ck" ] || { echo "seeds_ckpt_meta: no checkpoint in $ART/run" >&2; return 0; }
while read -r name key value; do
  pairs "$ck" "$key" "$value" >"$OUT/$name"
done <<'LIST'
epoch-max sampler_epoch 9223372036854775807
epoch-2p62 sampler_epoch 4611686018427387904
pos-past sampler_pos 1000000
step-max step 9223372036854775807
fps-int-max store_fps 2147483647/2147483647
fps-den-0 store_fps 8/0
patch-overflow store_patch 2x16x99999999999
dtype-7 store_dtype 7
channels-past-int store_channels 2147483648
max-seconds-nan store_max_seconds nan
clips-0 clips 0
labels-not-strings labels ["a",1]
LIST
