# seeds_shard.sh OUT ART — seeds for fuzz_shard: real shards (sourced by tools/fuzz.sh;
# ART holds a small store ingested from real clips, ART/store), each cut at a block
# boundary so that its first blocks are whole: a seed cut inside a payload (the old 64 KiB
# prefix) failed at the first block and never reached the block and metadata parsing.
# Input layout: u32 block offset, u32 payload bytes (0: unchecked), then the shard file.
# Also the shards of a store of manifest clips (per-clip captions before their clips;
# spans, scores, scene cuts in the trailers) that the test build's test_store_captions
# writes, when that build is there.
i=0
for s in "$ART"/store/shards/*.tshard; do
  rel=shards/${s##*/}
  # Block offsets of this shard in order; cut after 1, 2 and 3 blocks (the next block's
  # offset), under the fuzzer's 256 KiB input limit.
  mapfile -t offs < <(sqlite3 "$ART/store/index.sqlite" "SELECT offset FROM clips WHERE shard = '$rel' ORDER BY offset;")
  offs+=("$(stat -c %s "$s")")
  for k in 1 2 3; do
    [ "${#offs[@]}" -gt "$k" ] || break
    cut=${offs[$k]}
    [ "$cut" -le 262000 ] || break
    le=$(printf '%08x' "${offs[$((k - 1))]}")
    { printf "\\x${le:6:2}\\x${le:4:2}\\x${le:2:2}\\x${le:0:2}\\x00\\x00\\x00\\x00"; head -c "$cut" "$s"; } >"$OUT/real-$i-$k"
  done
  i=$((i + 1))
  if [ $i -ge 4 ]; then break; fi
done
MAKE_MANIFEST=$SRC/build/tests/store/test_store_captions
if [ -x "$MAKE_MANIFEST" ]; then
  rm -rf "$OUT/.manifest-store"
  "$MAKE_MANIFEST" make "$OUT/.manifest-store" >/dev/null
  for s in "$OUT/.manifest-store"/shards/*.tshard; do
    { printf '\x00\x20\x00\x00\x00\x00\x00\x00'; cat "$s"; } >"$OUT/manifest-${s##*/}"
  done
  rm -rf "$OUT/.manifest-store"
fi
