# seeds_lengths.sh — seeds for fuzz_lengths: the first 200 lines of each real length file
# in $SHARED/lengths, behind 2 bytes choosing geometry and caps (sourced by tools/fuzz.sh).
for f in "$SHARED"/lengths/*.csv; do
  { printf '\x01\x03'; head -n 200 "$f"; } >"$OUT/$(basename "$f")"
done
