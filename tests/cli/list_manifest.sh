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
. "$(dirname "$0")/../lib.sh"  # T, SRC, scratch, ok/bad/same/tally
MAKE=${MAKE_MANIFEST_STORE:?set by ctest}
scratch list-manifest
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
# --where, on a copy whose scores straddle the thresholds: clip 4 has none, clip 5 scores
# that are not JSON (so none), clip 6 keeps the test store's key with a space ("motion score").
cp -r "$W/s" "$W/w"
sqlite3 "$W/w/index.sqlite" "UPDATE clips SET scores = CASE id
  WHEN 1 THEN '{\"aesthetic_score\":4.5,\"motion_score\":0.25}'
  WHEN 2 THEN '{\"aesthetic_score\":3.75,\"motion_score\":-0.001}'
  WHEN 3 THEN '{\"aesthetic_score\":5.25,\"matching_score\":1e-3}'
  WHEN 4 THEN NULL WHEN 5 THEN 'not json' ELSE scores END"
wsql() { sqlite3 -separator ' ' "$W/w/index.sqlite" "$1"; }
wids() { "$T" index list "$W/w" "$@" --json 2>/dev/null | jq -r '[.[].id] | map(tostring) | join(" ")'; }
# sel CONDITION: the ids SQL selects, CONDITION written with s(NAME) for the clip's score
# NAME, its keys spelled as --where spells names (a space as '_'), NULL when it has none
sel() {
  local score="(SELECT j.value FROM json_each(CASE WHEN json_valid(clips.scores) THEN
    clips.scores ELSE '{}' END) j WHERE replace(j.key, ' ', '_') = '\\1' LIMIT 1)"
  wsql "SELECT coalesce(group_concat(id, ' '), '') FROM (SELECT id FROM clips
        WHERE $(sed "s/s(\([a-z_]*\))/${score//$'\n'/ }/g" <<<"$1") ORDER BY id)"
}
while IFS='|' read -r args cond; do
  eval "set -- $args"
  same "list $args" "$(wids "$@")" "$(sel "$cond")"
done <<'CASES'
--where "aesthetic_score >= 4.5"|s(aesthetic_score) >= 4.5
--where "aesthetic_score > 4.5"|s(aesthetic_score) > 4.5
--where "aesthetic_score<=4.5"|s(aesthetic_score) <= 4.5
--where "aesthetic_score < 4.5"|s(aesthetic_score) < 4.5
--where "aesthetic_score == 4.5"|s(aesthetic_score) = 4.5
--where "aesthetic_score != 4.5"|s(aesthetic_score) != 4.5
--where "aesthetic score >= 3.75" --where "motion_score < 0"|s(aesthetic_score) >= 3.75 AND s(motion_score) < 0
--where "aesthetic_score > 0" --where "matching_score == 0.001"|s(aesthetic_score) > 0 AND s(matching_score) = 0.001
--where "motion score > 0.3"|s(motion_score) > 0.3
--where "motion_score >= -1e9"|s(motion_score) >= -1e9
--where "motion_score != 0.25"|s(motion_score) != 0.25
--where "clarity > 0"|s(clarity) > 0
--where "aesthetic_score > 0" --row 1|s(aesthetic_score) > 0 AND manifest_row = 1
CASES
same "list --where with --limit" "$(wids --where "aesthetic_score >= 3.75" --limit 1)" \
  "$(sel "s(aesthetic_score) >= 3.75" | cut -d' ' -f1)"
n=$(sel "s(aesthetic_score) >= 3.75" | wc -w)
same "list --where count" "$("$T" index list "$W/w" --where "aesthetic_score >= 3.75" 2>&1 >/dev/null)" \
  "index list: $n clips match, $n shown"
for bad in "aesthetic_score = 4" "aesthetic_score >= high" ">= 4" "aesthetic_score"; do
  for sub in list stats; do
    "$T" index $sub "$W/w" --where "$bad" >/dev/null 2>"$W/err"
    same "$sub --where '$bad' refused" "$?:$(grep -c -- "--where '$bad'" "$W/err")" "1:1"
  done
done
# stats --where: the selected clips' totals, manifest clips and score sums; sources stay the
# store's, clips_in_store counts them all
ids=$(sel "s(aesthetic_score) >= 4.5" | tr ' ' ',')
"$T" index stats "$W/w" --where "aesthetic_score >= 4.5" --json >"$W/ws.json"
same "stats --where totals" \
  "$(jq -r '"\(.clips) \(.tokens) \(.frames) \(.dropped_frames) \(.seconds * 1e6 | round) \(.manifest_clips) \(.span_cut_clips) \(.clips_in_store) \(.sources.done) \(.where)"' "$W/ws.json")" \
  "$(wsql "SELECT count(*), total(tokens), total(frames), total(dropped_frames),
                  round(total(duration_s) * 1e6), count(manifest_row), total(span_cut)
           FROM clips WHERE id IN ($ids)" | awk '{ printf "%d %d %d %d %d %d %d", $1, $2, $3, $4, $5, $6, $7 }'
  ) $(wsql "SELECT count(*) FROM clips") $(wsql "SELECT count(*) FROM sources WHERE status = 'done'") where aesthetic_score >= 4.5"
same "stats --where scores" \
  "$(jq -r '.scores | to_entries[] | "\(.key)|\(.value.count)|\(.value.min)|\(.value.mean)|\(.value.max)"' "$W/ws.json" | sort)" \
  "$(wsql "SELECT j.key || '|' || count(*) || '|' || min(j.value) || '|' || avg(j.value) || '|' || max(j.value)
           FROM clips, json_each(clips.scores) j WHERE clips.id IN ($ids) GROUP BY j.key ORDER BY j.key")"
"$T" index stats "$W/w" --where "aesthetic_score >= 3.75" --where "motion_score<0.5" >"$W/ws.txt"
n=$(sel "s(aesthetic_score) >= 3.75 AND s(motion_score) < 0.5" | wc -w)
same "stats --where text" \
  "$(grep -c "^selected: $n of $(wsql "SELECT count(*) FROM clips") clips pass where aesthetic_score >= 3.75; where motion_score < 0.5 " "$W/ws.txt"):$(sed -n 's/^clips: \([0-9]*\),.*/\1/p' "$W/ws.txt")" \
  "1:$n"
same "stats --where of no clip" \
  "$("$T" index stats "$W/w" --where "clarity > 0" --json | jq -c '[.clips, .tokens, .histogram_seconds, .scores]')" \
  '[0,0,[],{}]'
same "stats without --where" "$("$T" index stats "$W/w" --json | jq -c '[.where, .clips_in_store == .clips]')" \
  '["",true]'
# a damaged value: verify lists the clip
sql "UPDATE clips SET manifest_span = 'x' WHERE id = 2"
"$T" index verify "$W/s" >"$W/verify.txt" 2>&1
same "verify of a damaged manifest value" "$?:$(grep -c '^CORRUPT: clip 2 .*manifest record' "$W/verify.txt")" "3:1"
tally "index list (manifest)"
