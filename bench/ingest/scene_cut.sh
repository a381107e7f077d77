#!/usr/bin/env bash
# bench/ingest/scene_cut.sh — tessera's scene-cut detector (ingest/scene_cut.h) against
# PySceneDetect's ContentDetector, the baseline, in the same run on the same file.
#
#   bench/ingest/scene_cut.sh       (after tools/setup.sh; PySceneDetect 0.7.2 in the venv
#                                    $TESSERA_VENV, default /opt/tessera/venv)
#
# The file: six stretches of the real clips without a cut of their own (the ones of
# tests/ingest/test_scene_cut_real.c), each at 25 fps and 640x360, joined by the ffmpeg
# CLI's concat filter: 580 frames, true cuts at the joins 4, 8, 12, 16 and 19.2 s.
# Both tools run with their defaults (threshold 27, minimum shot 15 frames) on every
# frame (25 fps), pinned to one core (taskset -c $CORE, default 0), each the fastest of
# REPEAT runs (default 5), the tools taking turns:
# - tessera: bench_scene_cut (bench/ingest/scene_cut.c) decodes with ingest/decode.h
#   straight to 256x144 RGB (short side 144: the width PySceneDetect shrinks to), then
#   feeds the detector; decoding and detecting are timed apart. Also once at ingest's
#   8 fps, for the cuts only;
# - PySceneDetect (bench/ingest/scene_cut_psd.py): detect() end to end (OpenCV decode,
#   shrink to 256 wide, detector), and its detector alone on frames decoded beforehand.
# Accuracy: a cut within one frame (1/25 s) of a join finds it; other cuts are false.
# Output: scene_cut.json beside this script (OUT_JSON) and one summary line with the ratios
# PySceneDetect time / tessera time per frame (end to end, and detector alone).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VIDEOS=${TESSERA_SHARED:-$ROOT/../shared}/videos
BIN=${BENCH_BIN:-$ROOT/build/bench/bench_scene_cut}
PY=${TESSERA_VENV:-/opt/tessera/venv}/bin/python
OUT_JSON=${OUT_JSON:-$ROOT/bench/ingest/scene_cut.json}
REPEAT=${REPEAT:-5}
die() { echo "scene_cut.sh: $*" >&2; exit 1; }
[ -x "$BIN" ] || die "no $BIN (cmake --build build --target bench_scene_cut)"
[ -x "$PY" ] || die "no $PY (a venv with scenedetect==0.7.2; set TESSERA_VENV)"
for c in ffmpeg jq; do command -v "$c" >/dev/null || die "$c is required (tools/setup.sh)"; done
PIN=()
command -v taskset >/dev/null && PIN=(taskset -c "${CORE:-0}")
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tessera-bench-scenes.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# name:start:frames of each stretch, in order; the joins follow from the frame counts.
PARTS=(decord__flipping_a_pancake.mkv:0:100 mmaction2__test.avi:0:100 testvideo.mp4:1.5:100
       fades.mp4:0:100 goldeneye-vfr-drop3.mp4:4.5:80 issue-195-aspect-ratio.mp4:7.5:100)
IN=() FG="" CAT="" JOINS=() total=0
for i in "${!PARTS[@]}"; do
  IFS=: read -r f from n <<<"${PARTS[$i]}"
  IN+=(-i "$VIDEOS/$f")
  FG+="[$i:v]trim=start=$from,setpts=PTS-STARTPTS,fps=25,scale=640:360:flags=bicubic,setsar=1,"
  FG+="format=yuv420p,trim=end_frame=$n,setpts=PTS-STARTPTS[s$i];"
  CAT+="[s$i]"
  total=$((total + n))
  [ "$i" -lt $((${#PARTS[@]} - 1)) ] && JOINS+=("$(awk -v t="$total" 'BEGIN { print t / 25 }')")
done
JOINED=$WORK/joined.mp4
ffmpeg -nostdin -v error -y "${IN[@]}" \
  -filter_complex "${FG}${CAT}concat=n=${#PARTS[@]}:v=1:a=0[v]" \
  -map '[v]' -c:v libx264 -preset veryfast -crf 18 -g 50 "$JOINED"
JOINS_JSON=$(printf '%s\n' "${JOINS[@]}" | jq -s -c .)

# score CUTS_JSON FPS: {"found": joins with a cut within one frame, "false": other cuts}
score() {
  jq -c -n --argjson cuts "$1" --argjson joins "$JOINS_JSON" --argjson fps "$2" '
    def near($a; $b): (($a - $b) | fabs) <= 1 / $fps + 1e-6;
    {found: [$joins[] as $j | select(any($cuts[]; near(.; $j)))] | length,
     false: [$cuts[] as $c | select(all($joins[]; near($c; .) | not))] | length}'
}

# Interleaved, so that a burst of load on the shared machine hits both tools alike.
best() { awk -v a="$1" -v b="${2:-1e30}" 'BEGIN { print (a < b) ? a : b }'; }
t_tsr="" t_tsr_det="" t_psd="" t_psd_det="" tsr="" psd=""
for _ in $(seq "$REPEAT"); do
  tsr=$("${PIN[@]}" "$BIN" "$JOINED" --fps 25 --short-side 144)
  t_tsr=$(best "$(jq '.decode_s + .detect_s' <<<"$tsr")" "$t_tsr")
  t_tsr_det=$(best "$(jq .detect_s <<<"$tsr")" "$t_tsr_det")
  psd=$("${PIN[@]}" "$PY" "$ROOT/bench/ingest/scene_cut_psd.py" "$JOINED" 1 2>/dev/null)
  t_psd=$(best "$(jq .end_to_end_s <<<"$psd")" "$t_psd")
  t_psd_det=$(best "$(jq .detect_s <<<"$psd")" "$t_psd_det")
done
psd=$(jq -c --argjson e "$t_psd" --argjson d "$t_psd_det" '.end_to_end_s = $e | .detect_s = $d' \
        <<<"$psd")
tsr8=$("${PIN[@]}" "$BIN" "$JOINED" --fps 8 --short-side 144)

frames=$(jq .frames <<<"$tsr")
CPU=$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)
jq -n --argjson tsr "$tsr" --argjson tsr8 "$tsr8" --argjson psd "$psd" \
  --argjson joins "$JOINS_JSON" --argjson e2e "$t_tsr" --argjson det "$t_tsr_det" \
  --argjson s_tsr "$(score "$(jq -c .cuts <<<"$tsr")" 25)" \
  --argjson s_tsr8 "$(score "$(jq -c .cuts <<<"$tsr8")" 8)" \
  --argjson s_psd "$(score "$(jq -c .cuts <<<"$psd")" 25)" \
  --arg cpu "$CPU" \
  --arg commit "$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
  --argjson repeat "$REPEAT" '{
  benchmark: "scene cuts: tessera (ingest/scene_cut.h) vs PySceneDetect ContentDetector",
  machine: {cpu: $cpu, cores_used: 1}, commit: $commit,
  file: {what: "6 cut-free stretches of the shared clips, 640x360 at 25 fps, joined",
         frames: $tsr.frames, joins_s: $joins},
  settings: {threshold: 27, min_shot_frames: 15}, repeat: $repeat,
  timing: "best of repeat, interleaved; one core",
  tessera: {frames: $tsr.frames, size: "\($tsr.width)x\($tsr.height)", cuts: $tsr.cuts,
            joins_found: $s_tsr.found, false_cuts: $s_tsr.false,
            end_to_end_ms_per_frame: ($e2e * 1000 / $tsr.frames),
            detect_ms_per_frame: ($det * 1000 / $tsr.frames),
            at_8_fps: {frames: $tsr8.frames, cuts: $tsr8.cuts, joins_found: $s_tsr8.found,
                       false_cuts: $s_tsr8.false}},
  pyscenedetect: {version: $psd.version, opencv: $psd.opencv, frames: $psd.frames,
                  size: "\($psd.width)x\($psd.height)", cuts: $psd.cuts,
                  joins_found: $s_psd.found, false_cuts: $s_psd.false,
                  end_to_end_ms_per_frame: ($psd.end_to_end_s * 1000 / $psd.frames),
                  detect_ms_per_frame: ($psd.detect_s * 1000 / $psd.frames)},
  ratio_pyscenedetect_over_tessera: {
    end_to_end: (($psd.end_to_end_s / $psd.frames) / ($e2e / $tsr.frames)),
    detect: (($psd.detect_s / $psd.frames) / ($det / $tsr.frames))}
}' >"$OUT_JSON"
jq -r --arg out "$OUT_JSON" '
  def ms: . * 1000 | round / 1000;
  def x: . * 100 | round / 100;
  "scene cuts (\(.file.frames) frames, \(.file.joins_s | length) joins): tessera found " +
  "\(.tessera.joins_found) (\(.tessera.false_cuts) false; at 8 fps " +
  "\(.tessera.at_8_fps.joins_found), \(.tessera.at_8_fps.false_cuts) false), PySceneDetect " +
  "\(.pyscenedetect.joins_found) (\(.pyscenedetect.false_cuts) false); ms per frame end to " +
  "end: tessera \(.tessera.end_to_end_ms_per_frame | ms), PySceneDetect " +
  "\(.pyscenedetect.end_to_end_ms_per_frame | ms) (ratio " +
  "\(.ratio_pyscenedetect_over_tessera.end_to_end | x)); detector alone: tessera " +
  "\(.tessera.detect_ms_per_frame | ms), PySceneDetect \(.pyscenedetect.detect_ms_per_frame | ms)" +
  " (ratio \(.ratio_pyscenedetect_over_tessera.detect | x)) -> \($out)"' "$OUT_JSON"
