# seeds_cost.sh — seeds for fuzz_cost: the cost presets behind 4 bytes choosing the
# cluster and batch (sourced by tools/fuzz.sh).
for f in "$SRC"/configs/cost/*.conf; do
  { printf '\x03\x07\x0b\x2a'; cat "$f"; } >"$OUT/$(basename "$f")"
done
