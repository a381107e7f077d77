# tests/ingest/lib.sh — helpers shared by the ingest integration tests (sourced, not run).
#
# Environment (ctest sets it; see tests/CMakeLists.txt):
#   TESSERA_BIN     the tessera binary
#   TESSERA_SHARED  shared/ folder; real clips are in $TESSERA_SHARED/videos (read only,
#                   never copied into the repo)
# Every script gets a scratch directory $WORK (mktemp -d) removed on exit, together with
# any background process registered with bg_register.
#
# Checks do not stop the script: each failed check prints "FAIL: ..." and the script
# ends with `finish`, which prints a summary and exits 1 if anything failed. Commands
# that must work (clip generation, sqlite queries) still stop the script via set -e.

set -euo pipefail

: "${TESSERA_BIN:?TESSERA_BIN must name the tessera binary (ctest sets it)}"
export TESSERA_SHARED=${TESSERA_SHARED:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)/shared}
VIDEOS=$TESSERA_SHARED/videos
[ -x "$TESSERA_BIN" ] || { echo "FAIL: TESSERA_BIN=$TESSERA_BIN is not executable" >&2; exit 1; }
# need_clips: the tests that read the real clips ($VIDEOS) call it first: without them
# they are skipped (exit 77) with the reason.
. "$(dirname "${BASH_SOURCE[0]}")/../shared.sh"
need_clips() { need_shared videos; }
# Tests of latent files set INGEST_NO_MEDIA=1: they need neither clips nor the ffmpeg CLI.
if [ "${INGEST_NO_MEDIA:-0}" != 1 ]; then
  for _c in ffmpeg ffprobe; do
    command -v "$_c" >/dev/null || { echo "FAIL: $_c is required (tools/setup.sh installs it)" >&2; exit 1; }
  done
fi
for _c in sqlite3 awk sha256sum; do
  command -v "$_c" >/dev/null || { echo "FAIL: $_c is required (tools/setup.sh installs it)" >&2; exit 1; }
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/tessera-ingest-test.XXXXXX")
BG_PIDS=()
_lib_cleanup() {
  local p
  for p in "${BG_PIDS[@]:-}"; do
    [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true
  done
  if [ "${KEEP_WORK:-0}" = 1 ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap _lib_cleanup EXIT
bg_register() { BG_PIDS+=("$1"); }

FAILS=0
CHECKS=0
TEST_NAME=$(basename "$0" .sh)
fail() { FAILS=$((FAILS + 1)); CHECKS=$((CHECKS + 1)); echo "FAIL: $*" >&2; }
pass() { CHECKS=$((CHECKS + 1)); echo "ok: $*"; }
# check MSG CMD...: runs CMD; passes if it succeeds.
check() { local m=$1; shift; if "$@"; then pass "$m"; else fail "$m"; fi; }
expect_eq() { # expect_eq GOT WANT MSG
  if [ "$1" = "$2" ]; then pass "$3 ($1)"; else fail "$3: got '$1', want '$2'"; fi
}
expect_near() { # expect_near GOT WANT TOL MSG   (numbers; |got - want| <= tol)
  if awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= t) }'; then
    pass "$4 ($1 vs $2, tol $3)"
  else
    fail "$4: got '$1', want '$2' within $3"
  fi
}
expect_ge() { # expect_ge GOT MIN MSG
  if awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && a + 0 >= b + 0) }'; then pass "$3 ($1 >= $2)"
  else fail "$3: got '$1', want >= $2"; fi
}
# ratio_eq A B C D: A/B == C/D for positive integers (false if any is empty).
ratio_eq() { [ -n "$1" ] && [ -n "$2" ] && [ -n "$3" ] && [ -n "$4" ] && [ $(($1 * $4)) -eq $(($2 * $3)) ]; }
finish() {
  echo "$TEST_NAME: $((CHECKS - FAILS)) passed, $FAILS failed"
  [ "$FAILS" -eq 0 ]
  exit $?
}

# ---- tessera -------------------------------------------------------------------------

# tsr LOG ARGS...: runs `tessera ARGS...` with stdout+stderr in LOG; sets $RC (never
# trips set -e). Defaults: fps 8, short side 128, patch 2x16x16 (the CLI's defaults).
tsr() {
  local log=$1; shift
  RC=0
  "$TESSERA_BIN" "$@" >"$log" 2>&1 </dev/null || RC=$?
}
# tsr_ok LOG MSG ARGS...: tsr, and checks exit status 0 (shows the log tail if not).
tsr_ok() {
  local log=$1 msg=$2; shift 2
  tsr "$log" "$@"
  if [ "$RC" -eq 0 ]; then pass "$msg"; else fail "$msg: exit $RC"; tail -n 20 "$log" >&2; fi
}
# tsr_merge LOG DST SRC...: merges stores SRC... into DST.
tsr_merge() { local log=$1 dst=$2; shift 2; tsr "$log" index merge "$@" --out "$dst"; }

# sql STORE QUERY: runs QUERY on STORE/index.sqlite, '|'-separated rows, no header.
sql() { sqlite3 -batch -noheader -separator '|' "$1/index.sqlite" "$2"; }
# sq STRING: STRING as an SQL string literal.
sq() { printf "'%s'" "${1//\'/\'\'}"; }
# src_is NAME: SQL condition "sources row s is the file whose base name is NAME"
# (paths are stored absolute; matched by the '/NAME' suffix).
src_is() { local n; n=$(sq "/$1"); echo "substr(s.path, -length($n)) = $n"; }
# source_col STORE NAME COLUMN: a column of the sources row of file NAME.
source_col() { sql "$1" "SELECT s.$3 FROM sources s WHERE $(src_is "$2");"; }
# clip_cols STORE NAME COLS [CLIP_INDEX]: columns of one clip of file NAME ('|'-joined).
# Qualify the columns that sources also has: c.decoded_frames, c.label.
clip_cols() {
  sql "$1" "SELECT $3 FROM clips c JOIN sources s ON c.source_id = s.rowid
            WHERE $(src_is "$2") AND c.clip_index = ${4:-0};"
}
# out_frames STORE NAME: output frames at the target rate over all clips of NAME
# (stored + dropped after the last full tubelet).
out_frames() {
  sql "$1" "SELECT COALESCE(SUM(c.frames + c.dropped_frames), 0) FROM clips c
            JOIN sources s ON c.source_id = s.rowid WHERE $(src_is "$2");"
}

# canonical_dump STORE: the store's content independent of how it was produced (shard
# names, offsets, row ids and timing left out): sources then clips, ordered.
canonical_dump() {
  sql "$1" "SELECT 'source', path, status FROM sources ORDER BY path;"
  sql "$1" "SELECT 'clip', s.path, c.clip_index, c.T, c.H, c.W, c.frames, c.checksum
            FROM clips c JOIN sources s ON c.source_id = s.rowid
            ORDER BY s.path, c.clip_index;"
}
# no_duplicate_clips STORE: true if no (source, clip_index) appears twice.
no_duplicate_clips() {
  [ -z "$(sql "$1" "SELECT source_id, clip_index FROM clips GROUP BY 1, 2 HAVING COUNT(*) > 1;")" ]
}
# verify_ok STORE MSG: `tessera index verify STORE` exits 0.
verify_ok() { tsr "$WORK/verify.log" index verify "$1"; if [ "$RC" -eq 0 ]; then pass "$2"; else
  fail "$2: index verify exit $RC"; tail -n 20 "$WORK/verify.log" >&2; fi; }

# ---- clips -----------------------------------------------------------------------------

# gen OUT ARGS...: runs ffmpeg ARGS... OUT (quiet, overwrite).
gen() { local out=$1; shift; mkdir -p "$(dirname "$out")"; ffmpeg -nostdin -v error -y "$@" "$out"; }
# gen_src OUT SOURCE SIZE RATE SECONDS [output args...]: a lavfi test source (testsrc2,
# mandelbrot, ...) as H.264 (yuv420p unless the output args say otherwise).
gen_src() {
  local out=$1 src=$2 size=$3 rate=$4 secs=$5; shift 5
  gen "$out" -f lavfi -i "$src=size=$size:rate=$rate" -t "$secs" \
    -c:v libx264 -preset ultrafast -pix_fmt yuv420p "$@"
}

# source_end_frames FILE FPS: the number of output frames the frame-selection rule of
# ingest/decode.h gives for FILE at FPS (N or N/D): with t_0 the first decoded frame's
# timestamp and end = last timestamp + that frame's duration, the count of n >= 0 with
# t_0 + n/FPS < end. Timestamps come from ffprobe's decoded frames (best effort
# timestamp; duration from the packet, else the previous frame interval).
source_end_frames() {
  ffprobe -v error -select_streams v:0 \
    -show_entries frame=best_effort_timestamp_time,pkt_duration_time,duration_time \
    -of compact=p=0 "$1" 2>/dev/null |
    awk -F'|' -v fps="$2" '
      BEGIN { n = split(fps, f, "/"); rate = (n == 2) ? f[1] / f[2] : f[1] + 0 }
      {
        t = ""; d = ""
        for (i = 1; i <= NF; i++) {
          split($i, kv, "=")
          if (kv[1] == "best_effort_timestamp_time") t = kv[2]
          if ((kv[1] == "pkt_duration_time" || kv[1] == "duration_time") && kv[2] != "N/A") d = kv[2]
        }
        if (t == "" || t == "N/A") next
        if (!seen) { t0 = t; last = t; ld = d; seen = 1; next }
        if (t + 0 >= last + 0) { gap = t - last; last = t; ld = d }
      }
      END {
        if (!seen) { print 0; exit }
        dur = (ld != "" && ld + 0 > 0) ? ld : gap
        x = (last + dur - t0) * rate
        c = int(x); if (c < x - 1e-3) c++   # ceil; ffprobe prints times to 1 us
        print c
      }'
}

# probe FILE ENTRIES: ffprobe stream entries of the first video stream, e.g.
# `probe f.mp4 width,height` -> "1280|720".
probe() {
  ffprobe -v error -select_streams v:0 -show_entries "stream=$2" -of csv=p=0:s='|' "$1" | head -n 1 | sed 's/|*$//'
}

# expected_grid W H SAR_NUM SAR_DEN ROTATION SHORT PH PW: "Hs Ws h w" — the token grid
# H, W and the scaled size before the crop, from the closed form of ingest/decode.h:
# display width = W * SAR; swapped for 90/270 rotation; short side scaled to SHORT
# (other side rounded to the nearest integer); H = floor(h / PH), W = floor(w / PW).
expected_grid() {
  awk -v w="$1" -v h="$2" -v sn="$3" -v sd="$4" -v rot="$5" -v S="$6" -v ph="$7" -v pw="$8" 'BEGIN {
    if (sn <= 0 || sd <= 0) { sn = 1; sd = 1 }
    dw = w * sn / sd; dh = h
    if (rot == 90 || rot == 270 || rot == -90 || rot == -270) { t = dw; dw = dh; dh = t }
    if (dw < dh) { ow = S; oh = int(dh * S / dw + 0.5) } else { oh = S; ow = int(dw * S / dh + 0.5) }
    printf "%d %d %d %d\n", int(oh / ph), int(ow / pw), oh, ow
  }'
}

# psnr_avg LOG: the average PSNR printed by ffmpeg's psnr filter in LOG ("inf" -> 99).
psnr_avg() {
  grep -o 'average:[0-9.inf]*' "$1" | tail -n 1 | cut -d: -f2 | sed 's/^inf$/99/'
}

# gen_rotated OUT IN DEGREES: remuxes IN with a display rotation (ffmpeg >= 6:
# -display_rotation; 5.x: the stream's "rotate" tag, which the MP4 muxer turns into the
# display matrix).
gen_rotated() {
  if ffmpeg -hide_banner -h long 2>/dev/null | grep -q -- '-display_rotation'; then
    gen "$1" -display_rotation "$3" -i "$2" -c copy
  else
    gen "$1" -i "$2" -c copy -metadata:s:v:0 rotate="$3"
  fi
}
# probe_rotation FILE: clockwise degrees (0, 90, 180, 270) a player applies for display
# (ffprobe reports the display matrix's counter-clockwise angle).
probe_rotation() {
  local r
  r=$(ffprobe -v error -select_streams v:0 -show_entries stream_side_data=rotation -of csv=p=0 "$1" | grep -m1 -o -- '-\?[0-9]\+' || true)
  echo $(( ((-${r:-0}) % 360 + 360) % 360 ))
}
# probe_sar FILE: "num den" of the sample aspect ratio (1 1 if unset).
probe_sar() {
  local s
  s=$(probe "$1" sample_aspect_ratio)
  case $s in *:*) [ "${s%%:*}" -gt 0 ] 2>/dev/null && { echo "${s%%:*} ${s##*:}"; return; } ;; esac
  echo "1 1"
}

# gen_set DIR N: N small distinct H.264 clips (2-4 s, 320x240, testsrc2 / mandelbrot at
# 25 or 30 fps) named clip-NN.mp4 in DIR.
gen_set() {
  local dir=$1 n=$2 i src rate secs
  for ((i = 0; i < n; i++)); do
    src=testsrc2; ((i % 3 == 2)) && src=mandelbrot
    rate=$((i % 2 ? 30 : 25)); secs=$((2 + i % 3))
    gen_src "$(printf '%s/clip-%02d.mp4' "$dir" "$i")" "$src" 320x240 "$rate" "$secs"
  done
}
# sleep_ms MS: sleeps MS milliseconds.
sleep_ms() { sleep "$(awk -v m="$1" 'BEGIN { printf "%.3f", m / 1000 }')"; }
