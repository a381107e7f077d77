# seeds_index.sh OUT ART — seeds for fuzz_index (sourced by tools/fuzz.sh). The target
# builds its rows from the input: a selector byte per column (0..2: the real value of a
# valid row, 3: a small edit, 4: any 64-bit integer, 5: a real, 6: text, 7: NULL). Seeds:
# the all-real row (every selector 0), and rows whose shard column is the text of a shard
# name of the real store ART/store (so the path checks see real names).
printf '\x00%.0s' $(seq 64) >"$OUT/valid"
i=0
while read -r shard; do
  {
    printf '\x00%.0s' $(seq 10)   # source row: 9 selectors and the status byte
    printf '\x00%.0s' $(seq 19)   # clip columns 1..19: real
    printf '\x06'; printf "\\x$(printf %02x ${#shard})"; printf '%s' "$shard"
    printf '\x00%.0s' $(seq 4)    # offset, bytes, checksum, label: real
  } >"$OUT/real-$i"
  i=$((i + 1))
  if [ $i -ge 4 ]; then break; fi
done < <(sqlite3 "$ART/store/index.sqlite" "SELECT DISTINCT shard FROM clips ORDER BY shard;")
