#!/usr/bin/env bash
# bench/ingest/spans.sh — `tessera ingest --manifest` on many short spans cut from a few long
# videos, against the ffmpeg CLI cutting the same spans one command each (the baseline), in
# the same run, on the same files and the same cores.
#
#   bench/ingest/spans.sh          (after tools/setup.sh; SIZE=N SOURCES=N REPEAT=N)
#
# The long videos, made here with the ffmpeg CLI from the real clips of $SHARED/videos
# (SHARED=../shared; nothing is copied into the repository): each clip of CLIPS below once
# re-encoded to 640x360 at 25 fps (libx264 -preset veryfast -crf 23, x264's default key
# frames: at most 250 frames apart, more at scene changes), then SOURCES videos (default:
# one per core) each joined from those segments by the concat demuxer (stream copy), the
# clip list SIZE times (default 2, ~4 minutes), rotated so that each video differs.
# The manifest: spans of 1 to 3 s with gaps of 0 to 1 s (uniform, awk's generator with a
# fixed seed), times in milliseconds, from each video's start to its end, one row each, in
# tessera's generic CSV (path,start,end), rows sorted by video.
# The two tools, the same decoding and the same threads:
# - tessera: `tessera ingest --manifest spans.csv --workers NPROC` (fps 8, short side 128,
#   patch 2x16x16: each worker one video at a time, opened once, its spans decoded in
#   order, seeking forward when that skips decoding; cores / workers decoder threads each);
#   it also crops, patchifies and writes shards + index (more work);
# - ffmpeg CLI: per span `ffmpeg -threads T -ss S -to E -i SRC -map 0:v:0 -vf fps=8,scale
#   (short side 128),setsar=1,format=rgb24 -fps_mode passthrough -f null -`, NPROC commands
#   at a time (xargs -P), T = tessera's decoder threads. Seeking before the input (-ss
#   before -i: to the key frame before S, then decoding to S) is the fast way to cut; the
#   frame-exact rule of docs/ingest.md puts -ss after -i, which decodes every span from the
#   start of its video (quadratic in a long video's spans), so it is not the baseline.
# Counted: spans per second (spans of the manifest / wall seconds), and decoded frames per
# second = the source frames inside the spans (25 fps sources: ceil(25 E) - ceil(25 S) per
# span) / wall seconds, the same numbers for both tools. Also each tool's output frames at
# 8 fps (tessera: its clips' frames + dropped frames; the CLI: the frame= count of each
# command), which should agree to within a frame per span, and the source frames tessera
# really decoded (sources.decoded_frames: key frame lead-ins and gaps included).
# Timing: each tool REPEAT times (default 2), interleaved; the best (shortest) wall time
# counts, and beside it the best CPU time (user + system, all processes: the steadier number
# on a loaded machine). Output: bench/ingest/spans.json (OUT_JSON) and one summary line with
# the ratios (throughput tessera / ffmpeg CLI, CPU time ffmpeg CLI / tessera). KEEP=1 keeps
# the work folder (videos, manifest, store, CLI logs).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VIDEOS=${SHARED:-$ROOT/../shared}/videos
BIN=${TESSERA_BIN:-$ROOT/build/tools/tessera}
OUT_JSON=${OUT_JSON:-$ROOT/bench/ingest/spans.json}
NPROC=$(nproc)
SIZE=${SIZE:-2}
SOURCES=${SOURCES:-$NPROC}
REPEAT=${REPEAT:-2}
SRC_FPS=25 FPS=8
die() { echo "spans.sh: $*" >&2; exit 1; }
[ -x "$BIN" ] || die "no tessera binary at $BIN (tools/setup.sh)"
[ -d "$VIDEOS" ] || die "no videos at $VIDEOS (set SHARED)"
for c in ffmpeg ffprobe sqlite3 jq /usr/bin/time; do command -v "$c" >/dev/null || die "$c is required (tools/setup.sh)"; done
for v in SIZE SOURCES REPEAT; do [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer"; done
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tessera-bench-spans.XXXXXX")
if [ -n "${KEEP:-}" ]; then echo "spans.sh: work folder $WORK kept" >&2; else trap 'rm -rf "$WORK"' EXIT; fi
best() { awk -v a="$1" -v b="${2:-1e30}" 'BEGIN { print (a < b) ? a : b }'; }

# The shared clips that decode to more than one frame (decord__corrupted.mp4 is broken,
# jcodec__test.mkv shows one picture), about 2 minutes in all.
CLIPS=(TimedMediaHandler__test5seconds.electricsheep.300x400.ogv
       androidx-media__bear-vp9-odd-dimensions.webm androidx-media__roadtrip-vp92-10bit.webm
       counter.mp4 decord__flipping_a_pancake.mkv delayed_start.mp4 fades.mp4
       goldeneye-vfr-drop3.mp4 issue-134-rotate.mp4 issue-195-aspect-ratio.mp4
       issue-236-split-copy.mkv mmaction2__demo.mp4 mmaction2__test.avi testvideo.mp4)

# Segment I: clip I re-encoded (NPROC at a time, by make_segments).
make_segment() {  # I CLIP
  ffmpeg -nostdin -v error -y -i "$VIDEOS/$2" -map 0:v:0 \
    -vf "fps=$SRC_FPS,scale=640:360:force_original_aspect_ratio=decrease,pad=640:360:-1:-1,setsar=1,format=yuv420p" \
    -c:v libx264 -preset veryfast -crf 23 "$WORK/seg$1.mp4" 2>"$WORK/seg$1.log" ||
    { echo "spans.sh: cannot re-encode $2: $(tail -n 3 "$WORK/seg$1.log")" >&2; exit 255; }
}
make_segments() {
  local i
  for i in "${!CLIPS[@]}"; do printf '%s\0%s\0' "$i" "${CLIPS[$i]}"; done |
    xargs -0 -n 2 -P "$NPROC" bash -c 'make_segment "$@"' _
}

# Long video v: the segments SIZE times, starting at segment v (mod the count) each pass.
make_long() {
  local v=$1 p i n=${#CLIPS[@]}
  for p in $(seq "$SIZE"); do
    for i in $(seq 0 $((n - 1))); do echo "file '$WORK/seg$(((i + v + p) % n)).mp4'"; done
  done >"$WORK/long$v.txt"
  ffmpeg -nostdin -v error -y -f concat -safe 0 -i "$WORK/long$v.txt" -c copy \
    "$WORK/long$v.mp4" || die "cannot join long video $v"
}

# Spans of a video of `dur` seconds as CSV rows path,start,end.
make_spans() {
  awk -v path="$1" -v dur="$2" -v seed="$3" 'BEGIN {
    srand(seed); t = rand()
    while (1) {
      s = int(t * 1000 + 0.5) / 1000; e = int((t + 1 + 2 * rand()) * 1000 + 0.5) / 1000
      if (e > dur - 0.2) break
      printf "%s,%.3f,%.3f\n", path, s, e
      t = e + rand()
    }
  }'
}

export -f make_segment
export VIDEOS WORK SRC_FPS
echo "spans.sh: making $SOURCES videos of the shared clips x $SIZE ..." >&2
make_segments
echo "path,start,end" >"$WORK/spans.csv"
for v in $(seq 0 $((SOURCES - 1))); do
  make_long "$v"
  dur=$(ffprobe -v error -show_entries format=duration -of csv=p=0 "$WORK/long$v.mp4")
  make_spans "$WORK/long$v.mp4" "$dur" $((v + 1)) >>"$WORK/spans.csv"
done
SPANS=$(($(wc -l <"$WORK/spans.csv") - 1))
# Source frames inside the spans (frame k of a 25 fps video shows at k / 25).
SRC_FRAMES=$(awk -F, -v f=$SRC_FPS 'function c(x) { return x == int(x) ? x : int(x) + 1 }
  NR > 1 { n += c($3 * f - 1e-9) - c($2 * f - 1e-9) } END { print n }' "$WORK/spans.csv")
VIDEO_S=$(for v in $(seq 0 $((SOURCES - 1))); do
  ffprobe -v error -show_entries format=duration -of csv=p=0 "$WORK/long$v.mp4"; done |
  awk '{ s += $1 } END { printf "%.1f", s }')
# Mean distance between key frames, from the first video's packets.
KEY_S=$(ffprobe -v error -select_streams v:0 -show_entries packet=flags -of csv=p=0 \
  "$WORK/long0.mp4" | awk -v f=$SRC_FPS '/K/ { k++ } END { printf "%.2f", NR / k / f }')
cat "$WORK"/long*.mp4 >/dev/null  # the page cache, for both tools

# Threads: tessera gives each of its NPROC workers cores / workers decoder threads.
WORKERS=$NPROC
DEC_THREADS=$((NPROC / WORKERS > 1 ? NPROC / WORKERS : 1))
# The single quotes are ffmpeg's (its filter parser's), meant literally.
# shellcheck disable=SC2089,SC2090
VF="fps=$FPS,scale=w='if(lte(iw*sar,ih),128,-2)':h='if(lte(iw*sar,ih),-2,128)',setsar=1,format=rgb24"
# Each run prints "WALL CPU" in seconds from /usr/bin/time (CPU: user + system of the
# command and of every process it waited for).
TIME=(/usr/bin/time -f '%e %U %S' -o "$WORK/time")
wall_cpu() { tail -n 1 "$WORK/time" | awk '{ printf "%s %.2f", $1, $2 + $3 }'; }
run_tessera() {
  rm -rf "$WORK/store"
  local rc=0
  "${TIME[@]}" "$BIN" ingest --manifest "$WORK/spans.csv" --out "$WORK/store" \
    --workers "$WORKERS" --quiet >"$WORK/tessera.log" 2>&1 || rc=$?
  [ "$rc" -eq 0 ] || { tail -n 20 "$WORK/tessera.log" >&2; die "tessera ingest failed (exit $rc)"; }
  wall_cpu
}
# One command per span, NPROC at a time; its last frame= line (the final report, printed
# even with -nostats) tells the frames it wrote.
cut_one() {  # ROW SRC START END
  ffmpeg -nostdin -hide_banner -nostats -threads "$DEC_THREADS" -ss "$3" -to "$4" -i "$2" \
    -map 0:v:0 -vf "$VF" -fps_mode passthrough -f null - 2>"$WORK/ff/$1.log"
}
export -f cut_one
# shellcheck disable=SC2090
export DEC_THREADS VF
run_ffmpeg() {
  rm -rf "$WORK/ff" && mkdir "$WORK/ff"
  awk 'NR > 1 { print NR - 1 "," $0 }' "$WORK/spans.csv" | tr ',\n' '\0\0' |
    "${TIME[@]}" xargs -0 -n 4 -P "$NPROC" bash -c 'cut_one "$@"' _ ||
    die "an ffmpeg command failed: $(grep -l -i error "$WORK"/ff/*.log | head -n 1)"
  wall_cpu
}
T_TSR="" T_FF="" C_TSR="" C_FF=""
for i in $(seq "$REPEAT"); do
  read -r a ac <<<"$(run_tessera)"
  read -r b bc <<<"$(run_ffmpeg)"
  echo "spans.sh: run $i/$REPEAT: tessera $a s ($ac s CPU), ffmpeg CLI $b s ($bc s CPU)" >&2
  T_TSR=$(best "$a" "$T_TSR"); T_FF=$(best "$b" "$T_FF")
  C_TSR=$(best "$ac" "$C_TSR"); C_FF=$(best "$bc" "$C_FF")
done

sql() { sqlite3 "$WORK/store/index.sqlite" "$1"; }
TSR_SPANS=$(sql "SELECT count(DISTINCT manifest_row || ':' || manifest_span) FROM clips")
TSR_OUT=$(sql "SELECT sum(frames + dropped_frames) FROM clips")
TSR_DECODED=$(sql "SELECT sum(decoded_frames) FROM sources")
FF_OUT=$(for f in "$WORK"/ff/*.log; do grep -o 'frame= *[0-9]*' "$f" | tail -n 1; done |
  awk '{ n += $NF } END { print n + 0 }')
[ "$TSR_SPANS" -eq "$SPANS" ] || die "tessera made clips of $TSR_SPANS spans of $SPANS"

CPU=$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)
jq -n --arg cpu "$CPU" --argjson nproc "$NPROC" \
  --arg commit "$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
  --argjson size "$SIZE" --argjson sources "$SOURCES" --argjson video_s "$VIDEO_S" \
  --argjson key_s "$KEY_S" --argjson spans "$SPANS" --argjson src_frames "$SRC_FRAMES" \
  --argjson repeat "$REPEAT" --argjson t_tsr "$T_TSR" --argjson t_ff "$T_FF" \
  --argjson c_tsr "$C_TSR" --argjson c_ff "$C_FF" \
  --argjson tsr_out "$TSR_OUT" --argjson tsr_dec "$TSR_DECODED" --argjson ff_out "$FF_OUT" \
  --argjson workers "$WORKERS" --argjson threads "$DEC_THREADS" --arg vf "$VF" '{
  benchmark: "manifest spans: tessera ingest --manifest vs the ffmpeg CLI, one command per span",
  machine: {nproc: $nproc, cpu: $cpu}, commit: $commit,
  videos: {what: "the shared clips re-encoded to 640x360 at 25 fps (libx264 veryfast crf 23, default key frames), joined SIZE times in rotated orders",
           size: $size, count: $sources, seconds_total: $video_s, mean_key_frame_interval_s: $key_s},
  manifest: {spans: $spans, span_seconds: "1 to 3, gaps 0 to 1", source_frames_in_spans: $src_frames},
  settings: {fps: 8, short_side: 128, patch: "2x16x16"},
  repeat: $repeat, timing: "best of repeat, interleaved; wall and CPU (user + system) seconds each the best",
  tessera: {seconds: $t_tsr, cpu_seconds: $c_tsr, spans_per_s: ($spans / $t_tsr), frames_per_s: ($src_frames / $t_tsr),
            output_frames: $tsr_out, decoded_source_frames: $tsr_dec,
            command: "tessera ingest --manifest spans.csv --workers \($workers)"},
  ffmpeg_cli: {seconds: $t_ff, cpu_seconds: $c_ff, spans_per_s: ($spans / $t_ff), frames_per_s: ($src_frames / $t_ff),
               output_frames: $ff_out,
               command: "xargs -P \($nproc): ffmpeg -threads \($threads) -ss S -to E -i SRC -map 0:v:0 -vf \($vf) -fps_mode passthrough -f null -"},
  ratio_tessera_over_ffmpeg: ($t_ff / $t_tsr),
  ratio_cpu_time_ffmpeg_over_tessera: ($c_ff / $c_tsr),
  target_ratio: 2.0
}' >"$OUT_JSON"
jq -r --arg out "$OUT_JSON" '
  def r1: . * 10 | round / 10;
  "spans bench (\(.machine.nproc) cores, \(.videos.count) videos of \(.videos.seconds_total / .videos.count | round) s, " +
  "\(.manifest.spans) spans, \(.manifest.source_frames_in_spans) source frames in them): tessera " +
  "\(.tessera.spans_per_s | r1) spans/s, \(.tessera.frames_per_s | round) frames/s; ffmpeg CLI " +
  "\(.ffmpeg_cli.spans_per_s | r1) spans/s, \(.ffmpeg_cli.frames_per_s | round) frames/s; ratio " +
  "\(.ratio_tessera_over_ffmpeg * 100 | round / 100), CPU time ratio " +
  "\(.ratio_cpu_time_ffmpeg_over_tessera * 100 | round / 100) (output frames at 8 fps: tessera " +
  "\(.tessera.output_frames), CLI \(.ffmpeg_cli.output_frames)) -> \($out)"' "$OUT_JSON"
