#!/usr/bin/env bash
# tests/ingest/verify_rows.sh — `index verify` at scale of damage (issue 24, 9): every
# damaged clip row is listed, not only the first. A store of five clips, four of them
# damaged in the index in different ways (a checksum that is not hex, a caption record
# without its checksum, a grid past int, a source row deleted), and one intact: verify
# exits 3 and names each of the four clips with what is wrong, and checks the intact one.
# (verify stopped at the first row it could not read with exit 1, and never saw a clip
# whose source row was missing: the join left it out.)
source "$(dirname "$0")/lib.sh"
ML=${MAKE_LATENTS:?ctest sets MAKE_LATENTS to the make_latents binary}
D=$WORK/src
for i in 1 2 3 4 5; do gen_src "$D/v$i.mp4" testsrc2 64x48 8 1; done
"$ML" "$D/v2.mp4.caption.safetensors" --shape 1,1,1,1 --text 3,8 --caption "two"
S=$WORK/store
tsr_ok "$WORK/i.log" "ingest five videos, one with a caption" ingest "$D" --out "$S" --fps 4 \
  --short-side 32 --patch 1x16x16 --captions --workers 1 --quiet
verify_ok "$S" "verify before any edit"
id() { sql "$S" "SELECT c.id FROM clips c JOIN sources s ON s.id = c.source_id WHERE $(src_is "$1")"; }
c1=$(id v1.mp4) c2=$(id v2.mp4) c3=$(id v3.mp4) c4=$(id v4.mp4)
sql "$S" "UPDATE clips SET checksum = 'not-a-checksum!!' WHERE id = $c1;
          UPDATE clips SET caption_checksum = NULL WHERE id = $c2;
          UPDATE clips SET T = 4294967297 WHERE id = $c3;
          PRAGMA foreign_keys = OFF; DELETE FROM sources WHERE id = (SELECT source_id FROM clips WHERE id = $c4);"
tsr "$WORK/v.log" index verify "$S"
expect_eq "$RC" 3 "verify: corruption found (exit 3), not stopped (exit 1)"
check "clip $c1: its checksum named" grep -q "CORRUPT: clip $c1 of store .*invalid checksum 'not-a-checksum!!'" "$WORK/v.log"
check "clip $c2: its caption record named" grep -q "CORRUPT: clip $c2 of store .*damaged caption record" "$WORK/v.log"
check "clip $c3: its grid named" grep -q "CORRUPT: clip $c3 of store .*value out of range" "$WORK/v.log"
check "clip $c4: its missing source named" grep -q "CORRUPT: clip $c4 of store .*source row (source id [0-9]*) is missing" "$WORK/v.log"
check "the summary counts 5 clips, 4 bad" grep -q "5 clips (4 bad)" "$WORK/v.log"
check "each damaged row says what to do" grep -q "index row damaged: .* rebuild it from the shards" "$WORK/v.log"
finish
