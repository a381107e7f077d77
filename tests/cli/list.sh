#!/usr/bin/env bash
# tests/cli/list.sh — `tessera index list STORE`: every clip once, in id order, with the
# id, start, length, grid, tokens, label and source the index holds (read back with the
# sqlite3 CLI as the reference), as text and as JSON; the filters --label (also '' for
# unlabelled), --source, --min-tokens, --max-tokens and --limit select exactly the clips
# the same SQL selects.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"  # T, SRC, scratch, ok/bad/same/tally
scratch list
mkdir -p "$W/src/cats" "$W/src/dogs"
ffmpeg -nostdin -v error -y -f lavfi -i "testsrc2=s=64x48:r=8" -t 3 "$W/src/cats/a.mp4"
ffmpeg -nostdin -v error -y -f lavfi -i "smptebars=s=64x48:r=8" -t 5 "$W/src/dogs/b.mp4"
ffmpeg -nostdin -v error -y -f lavfi -i "rgbtestsrc=s=64x48:r=8" -t 2 "$W/src/c.mp4"
"$T" ingest "$W/src" --out "$W/s" --fps 4 --short-side 32 --patch 1x8x8 --max-seconds 2 \
  --label-from-dir --quiet 2>/dev/null
sql() { sqlite3 -separator ' ' "$W/s/index.sqlite" "$1"; }
ids() { "$T" index list "$W/s" "$@" --json 2>/dev/null | jq -r '[.[].id] | map(tostring) | join(" ")'; }
# JSON: the rows of the index, joined with their source
same "json rows" "$("$T" index list "$W/s" --json | jq -r '.[] | "\(.id) \(.tokens) \(.T)x\(.H)x\(.W) \(.label) \(.start_s) \(.source)"')" \
  "$(sql "SELECT c.id, c.tokens, c.T || 'x' || c.H || 'x' || c.W, coalesce(c.label, ''), printf('%g', c.start_s), s.path FROM clips c JOIN sources s ON s.id = c.source_id ORDER BY c.id")"
# text: a header and one line a clip with the same ids and tokens
same "text rows" "$("$T" index list "$W/s" 2>/dev/null | awk 'NR > 1 { print $1, $5 }')" \
  "$(sql "SELECT id, tokens FROM clips ORDER BY id")"
same "text count" "$("$T" index list "$W/s" 2>&1 >/dev/null)" "index list: $(sql "SELECT count(*) FROM clips") clips match, $(sql "SELECT count(*) FROM clips") shown"
same "--label dogs" "$(ids --label dogs)" "$(sql "SELECT group_concat(id, ' ') FROM (SELECT id FROM clips WHERE label = 'dogs' ORDER BY id)")"
same "--label ''" "$(ids --label '')" "$(sql "SELECT group_concat(id, ' ') FROM (SELECT id FROM clips WHERE coalesce(label, '') = '' ORDER BY id)")"
same "--source a.mp4" "$(ids --source a.mp4)" "$(sql "SELECT group_concat(c.id, ' ') FROM (SELECT c.id FROM clips c JOIN sources s ON s.id = c.source_id WHERE s.path LIKE '%a.mp4' ORDER BY c.id) c")"
min=$(sql "SELECT max(tokens) FROM clips")
same "--min-tokens max" "$(ids --min-tokens "$min")" "$(sql "SELECT group_concat(id, ' ') FROM (SELECT id FROM clips WHERE tokens >= $min ORDER BY id)")"
same "--max-tokens min" "$(ids --max-tokens "$(sql "SELECT min(tokens) FROM clips")")" \
  "$(sql "SELECT group_concat(id, ' ') FROM (SELECT id FROM clips WHERE tokens <= (SELECT min(tokens) FROM clips) ORDER BY id)")"
same "--limit 2" "$(ids --limit 2)" "$(sql "SELECT group_concat(id, ' ') FROM (SELECT id FROM clips ORDER BY id LIMIT 2)")"
same "filters combined" "$(ids --label dogs --limit 1)" "$(sql "SELECT min(id) FROM clips WHERE label = 'dogs'")"
[ "$(sql "SELECT count(*) FROM clips")" -ge 5 ] && passed=$((passed + 1)) || { failed=$((failed + 1)); echo "FAIL: the store has too few clips" >&2; }
tally "index list"
