#!/usr/bin/env bash
# tests/cli/list_manifest.sh — `tessera index list` and `index stats` on a store of manifest
# clips (made by tests/store/test_store_captions.c: spans, open ends, a clip cut at the
# video's end, scores, per-clip captions), against the index read with the sqlite3 CLI:
# list's JSON carries each clip's manifest row, span, span times, span_cut, scores and
# caption (null where it has none), its text the row:span and span columns; --row R selects
# the clips of row R; stats gives the manifest clips, those cut at the end, and per score
# the count, min, mean and max that SQL computes; a damaged manifest value is a CORRUPT
# line of `index verify`.
set -uo pipefail
T=${TESSERA_BIN:?set by ctest}
MAKE=${MAKE_MANIFEST_STORE:?set by ctest}
W=$(mktemp -d "${TMPDIR:-/tmp}/tessera-list-manifest.XXXXXX")
trap 'rm -rf "$W"' EXIT
pass=0 failn=0
same() {  # same NAME GOT WANT
  if [ "$2" = "$3" ]; then pass=$((pass + 1)); else failn=$((failn + 1)); echo "FAIL: $1: got '$2', want '$3'" >&2; fi
}
"$MAKE" make "$W/s" >/dev/null || { echo "FAIL: could not make the store" >&2; exit 1; }
sql() { sqlite3 -separator ' ' "$W/s/index.sqlite" "$1"; }
ids() { "$T" index list "$W/s" "$@" --json 2>/dev/null | jq -r '[.[].id] | map(tostring) | join(" ")'; }

# JSON: every manifest field, scores (jq prints the shortest number, as the canonical text)
same "json manifest fields" \
  "$("$T" index list "$W/s" --json | jq -r '.[] | "\(.id) \(.manifest_row) \(.manifest_span) \(.span_start) \(.span_end) \(.span_cut) \(.scores | tojson) \(.caption)"')" \
  "$(sql "SELECT id, coalesce(manifest_row, 'null'), coalesce(manifest_span, 'null'),
                 CASE WHEN span_start IS NULL THEN 'null' ELSE printf('%g', span_start) END,
                 CASE WHEN span_end IS NULL THEN 'null' ELSE printf('%g', span_end) END,
                 CASE span_cut WHEN 1 THEN 'true' WHEN 0 THEN 'false' ELSE 'null' END,
                 coalesce(scores, 'null'), coalesce(caption, 'null') FROM clips ORDER BY id")"
# text: row:span and span_s columns (ids and tokens stay at $1 and $5)
same "text columns" "$("$T" index list "$W/s" 2>/dev/null | awk 'NR > 1 { print $1, $5, $7, $8 }')" \
  "$(sql "SELECT id, tokens,
                 CASE WHEN manifest_row IS NULL THEN '-' ELSE manifest_row || ':' || manifest_span END,
                 CASE WHEN manifest_row IS NULL THEN '-' ELSE
                   CASE WHEN span_start IS NULL THEN 'start' ELSE printf('%g', span_start) END || '-' ||
                   CASE WHEN span_end IS NULL THEN 'end' ELSE printf('%g', span_end) END ||
                   CASE span_cut WHEN 1 THEN ',cut' ELSE '' END END FROM clips ORDER BY id")"
same "text scores" "$("$T" index list "$W/s" 2>/dev/null | sed -n '2,$ s/^ *\([0-9]*\) .*\.mp4  \(.*\)$/\1 \2/p')" \
  "$(sql "SELECT id, scores FROM clips WHERE scores IS NOT NULL ORDER BY id")"
# --row
for r in 1 2 3; do
  same "--row $r" "$(ids --row $r)" "$(sql "SELECT group_concat(id, ' ') FROM (SELECT id FROM clips WHERE manifest_row = $r ORDER BY id)")"
done
same "--row of no clip" "$(ids --row 99)" ""
same "--row with --limit" "$(ids --row 1 --limit 1)" "$(sql "SELECT min(id) FROM clips WHERE manifest_row = 1")"
"$T" index list "$W/s" --row 0 >/dev/null 2>"$W/err"
same "--row 0 refused" "$?:$(grep -c -- '--row' "$W/err")" "1:1"
# stats
"$T" index stats "$W/s" --json >"$W/stats.json"
same "stats manifest clips" "$(jq -r '"\(.manifest_clips) \(.span_cut_clips)"' "$W/stats.json")" \
  "$(sql "SELECT count(manifest_row), total(span_cut) FROM clips" | awk '{ printf "%d %d", $1, $2 }')"
same "stats scores" \
  "$(jq -r '.scores | to_entries[] | "\(.key)|\(.value.count)|\(.value.min)|\(.value.mean)|\(.value.max)"' "$W/stats.json" | sort)" \
  "$(sql "SELECT j.key || '|' || count(*) || '|' || min(j.value) || '|' || avg(j.value) || '|' || max(j.value)
          FROM clips, json_each(clips.scores) j GROUP BY j.key ORDER BY j.key")"
"$T" index stats "$W/s" >"$W/stats.txt"
same "stats text" "$(grep -c "manifest: $(sql "SELECT count(manifest_row) FROM clips") clips from manifest rows, $(sql "SELECT count(*) FROM clips WHERE span_cut = 1") of them cut" "$W/stats.txt")" 1
same "stats text scores" "$(awk '$1 == "aesthetic_score" { print $2, $3, $4, $5 }' "$W/stats.txt")" \
  "$(sql "SELECT count(*), min(v), avg(v), max(v) FROM (SELECT json_extract(scores, '$.aesthetic_score') v FROM clips) WHERE v IS NOT NULL")"
# a damaged value: verify lists the clip
sql "UPDATE clips SET manifest_span = 'x' WHERE id = 2"
"$T" index verify "$W/s" >"$W/verify.txt" 2>&1
same "verify of a damaged manifest value" "$?:$(grep -c '^CORRUPT: clip 2 .*manifest record' "$W/verify.txt")" "3:1"
echo "index list (manifest): $pass passed, $failn failed"
[ $failn -eq 0 ]
