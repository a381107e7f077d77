# seeds_config.sh — seeds for fuzz_config: the config presets (sourced by tools/fuzz.sh).
for f in "$SRC"/configs/model/*.conf; do cp "$f" "$OUT/$(basename "$f")"; done
