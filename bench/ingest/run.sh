#!/usr/bin/env bash
# bench/ingest/run.sh — throughput of `tessera ingest` against the ffmpeg CLI doing the
# equivalent work, in the same run, on the same files and the same number of cores.
#
#   bench/ingest/run.sh [VIDEOS_DIR]     (default: $SHARED/videos, SHARED=../shared)
#
# Work measured (both tools): decode every video file of VIDEOS_DIR, resample to 8 fps
# by timestamps, apply the display rotation and SAR, scale the short side to 128,
# convert to RGB24. tessera also crops, patchifies and writes shards + index (more work).
# Fairness: tessera runs `--workers NPROC` (one source per worker, libavcodec's own
# decoder threads inside); the ffmpeg CLI runs the files NPROC at a time (xargs -P NPROC),
# each with its default decoder threading, sink `-f null -` after `format=rgb24`.
# Throughput = source frames / wall seconds, where source frames = the frames tessera
# decoded (sum of sources.decoded_frames in its index), the same number for both tools.
# Output: bench/ingest/results.json and one summary line; also tessera's peak RSS
# (/usr/bin/time -v) when ingesting the longest clip alone. Targets: ratio >= 1.0,
# peak < 512 MB.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SHARED=${SHARED:-$ROOT/../shared}
VIDEOS=${1:-$SHARED/videos}
BIN=${TESSERA_BIN:-$ROOT/build/tools/tessera}
OUT_JSON=${OUT_JSON:-$ROOT/bench/ingest/results.json}
NPROC=$(nproc)
[ -x "$BIN" ] || { echo "bench: no tessera binary at $BIN (run tools/setup.sh)" >&2; exit 1; }
[ -d "$VIDEOS" ] || { echo "bench: no videos at $VIDEOS (set SHARED or pass a directory)" >&2; exit 1; }
for c in ffmpeg ffprobe sqlite3 /usr/bin/time; do
  command -v "$c" >/dev/null || { echo "bench: $c is required (tools/setup.sh)" >&2; exit 1; }
done
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tessera-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

mapfile -d '' FILES < <(find "$VIDEOS" -type f \( -iname '*.mp4' -o -iname '*.mkv' -o -iname '*.webm' \
  -o -iname '*.avi' -o -iname '*.mov' -o -iname '*.ogv' -o -iname '*.m4v' \) -print0 | sort -z)
[ ${#FILES[@]} -gt 0 ] || { echo "bench: no video files in $VIDEOS" >&2; exit 1; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

# Warm the page cache so neither tool pays for the first read.
cat "${FILES[@]}" >/dev/null

# Each tool runs REPEAT times, interleaved, and its best (shortest) wall time counts:
# the machine is shared, and the minimum is the least disturbed measurement.
REPEAT=${REPEAT:-3}
VF="fps=8,scale=w='if(lte(iw*sar,ih),128,-2)':h='if(lte(iw*sar,ih),-2,128)',setsar=1,format=rgb24"
run_tessera() {
  rm -rf "$WORK/store"
  local t0 t1 rc=0
  t0=$(now)
  "$BIN" ingest "${FILES[@]}" --out "$WORK/store" --workers "$NPROC" --quiet >"$WORK/tessera.log" 2>&1 || rc=$?
  t1=$(now)
  [ "$rc" -le 2 ] || { echo "bench: tessera ingest failed (exit $rc):" >&2; tail -n 20 "$WORK/tessera.log" >&2; exit 1; }
  secs "$t0" "$t1"
}
run_ffmpeg() {  # the same files, NPROC at a time
  local t0 t1
  t0=$(now)
  printf '%s\0' "${FILES[@]}" | xargs -0 -P "$NPROC" -I{} \
    ffmpeg -nostdin -v quiet -i {} -map 0:v:0 -vf "$VF" -f null - >/dev/null 2>&1 || true
  t1=$(now)
  secs "$t0" "$t1"
}
T_TSR=""; T_FF=""
for i in $(seq "$REPEAT"); do
  a=$(run_tessera); b=$(run_ffmpeg)
  echo "bench: run $i/$REPEAT: tessera $a s, ffmpeg CLI $b s" >&2
  T_TSR=$(awk -v x="$a" -v y="${T_TSR:-1e9}" 'BEGIN { print (x < y) ? x : y }')
  T_FF=$(awk -v x="$b" -v y="${T_FF:-1e9}" 'BEGIN { print (x < y) ? x : y }')
done
rc=$(sqlite3 "$WORK/store/index.sqlite" "SELECT CASE WHEN COUNT(*) > 0 THEN 2 ELSE 0 END FROM sources WHERE status = 'failed';")
FRAMES=$(sqlite3 "$WORK/store/index.sqlite" "SELECT COALESCE(SUM(decoded_frames), 0) FROM sources;")

# Peak memory of tessera on the longest clip (most source frames decoded above; container
# durations can lie, e.g. a truncated file's header).
LONGEST=$(sqlite3 "$WORK/store/index.sqlite" \
  "SELECT path FROM sources WHERE status = 'done' ORDER BY decoded_frames DESC LIMIT 1;")
/usr/bin/time -v "$BIN" ingest "$LONGEST" --out "$WORK/longest" --workers "$NPROC" --quiet \
  >"$WORK/longest.log" 2>&1 || true
RSS_KB=$(awk -F: '/Maximum resident set size/ { gsub(/ /, "", $2); print $2 }' "$WORK/longest.log")

CPU=$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
read -r FPS_TSR FPS_FF RATIO RSS_MB < <(awk -v f="$FRAMES" -v a="$T_TSR" -v b="$T_FF" -v r="${RSS_KB:-0}" \
  'BEGIN { x = f / a; y = f / b; printf "%.1f %.1f %.3f %.1f\n", x, y, x / y, r / 1024 }')
json_str() { printf '"%s"' "$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g')"; }
cat >"$OUT_JSON" <<JSON
{
  "benchmark": "ingest",
  "machine": {"nproc": $NPROC, "cpu": $(json_str "$CPU")},
  "commit": $(json_str "$COMMIT"),
  "videos": $(json_str "$VIDEOS"),
  "files": ${#FILES[@]},
  "repeat": $REPEAT, "timing": "best of repeat, interleaved",
  "source_frames": $FRAMES,
  "settings": {"fps": 8, "short_side": 128, "patch": "2x16x16"},
  "tessera": {"seconds": $T_TSR, "frames_per_s": $FPS_TSR, "exit_status": $rc,
              "command": "tessera ingest FILES --workers $NPROC"},
  "ffmpeg_cli": {"seconds": $T_FF, "frames_per_s": $FPS_FF,
                 "command": $(json_str "xargs -P $NPROC ffmpeg -i FILE -map 0:v:0 -vf $VF -f null -")},
  "ratio_tessera_over_ffmpeg": $RATIO,
  "peak_rss_mb_longest_clip": {"file": $(json_str "$(basename "$LONGEST")"), "mb": $RSS_MB},
  "targets": {"ratio": 1.0, "peak_rss_mb": 512}
}
JSON
echo "ingest bench ($NPROC cores, ${#FILES[@]} files, $FRAMES source frames): tessera $FPS_TSR frames/s," \
  "ffmpeg CLI $FPS_FF frames/s, ratio $RATIO; tessera peak RSS $RSS_MB MB on $(basename "$LONGEST")" \
  "-> $OUT_JSON"
