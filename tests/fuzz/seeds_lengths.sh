# seeds_lengths.sh — seeds for fuzz_lengths: the first 200 lines of each real length file
# in $SHARED/lengths, behind 2 bytes choosing geometry and caps (sourced by tools/fuzz.sh);
# without that folder (a plain clone) a few made-up rows of each column the reader knows.
for f in "$SHARED"/lengths/*.csv; do
  [ -f "$f" ] || continue
  { printf '\x01\x03'; head -n 200 "$f"; } >"$OUT/$(basename "$f")"
done
if [ ! -d "$SHARED/lengths" ]; then
  printf '\x01\x03dataset,id,duration_s\nx,"a,1",10\nx,b,2.74\n' >"$OUT/duration.csv"
  printf '\x01\x03id,tokens\na,100\nb,7\n' >"$OUT/tokens.csv"
fi
