# seeds_shard.sh OUT ART — seeds for fuzz_shard: the first blocks of real shards (sourced
# by tools/fuzz.sh; ART holds a small store ingested from real clips, ART/store).
# Input layout: u32 block offset, u32 payload bytes (0: unchecked), then the shard file.
i=0
for s in "$ART"/store/shards/*.tshard; do
  { printf '\x00\x10\x00\x00\x00\x00\x00\x00'; head -c 65536 "$s"; } >"$OUT/real-$i"
  i=$((i + 1))
  if [ $i -ge 4 ]; then break; fi
done
