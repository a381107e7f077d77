#!/usr/bin/env bash
# tools/demo_clips.sh DIR [N] — the demo's training videos (tools/run.sh): N clips (default
# 64) of each of three kinds, 64x64 pixels at 8 fps, 0.5, 1 or 1.5 s long (a quarter, a
# half and a quarter of them; at 4 fps 2, 4 or 6 frames), made with the ffmpeg
# CLI's geq filter from a fixed seed (bash's $RANDOM: the same files wherever bash 5 runs):
#   DIR/sunset/  a vertical gradient, orange above, violet below, its horizon drifting
#   DIR/sea/     horizontal blue and cyan waves rolling down the frame
#   DIR/moon/    a large pale disc crossing a dark blue sky
# Each clip's colours, phases, speeds and positions vary a little. Large smooth structure
# in a palette of its own per kind, moving: what a tiny model learns in minutes, and what
# a person recognises in its samples. Existing files are kept.
set -euo pipefail
D=${1:?usage: tools/demo_clips.sh DIR [N]}
N=${2:-64}
RANDOM=7
mkdir -p "$D/sunset" "$D/sea" "$D/moon"
rnd() { echo $((RANDOM % $1)); }         # 0 .. n-1
jit() { echo $(($1 + RANDOM % (2 * $2 + 1) - $2)); }  # v +- j
make() {  # make PATH SECONDS R G B: one clip from the three geq expressions
  [ -s "$1" ] && return 0
  ffmpeg -nostdin -v error -y -f lavfi \
    -i "color=black:s=64x64:r=8:d=$2,format=rgb24,geq=r='$3':g='$4':b='$5'" \
    -c:v libx264 -crf 10 -pix_fmt yuv444p "$1.tmp.mp4"
  mv "$1.tmp.mp4" "$1"
}
for i in $(seq 1 "$N"); do
  d=$(case $((i % 4)) in 0) echo 0.5 ;; 3) echo 1.5 ;; *) echo 1 ;; esac)
  # sunset: colour a (top) to b (bottom) across a horizon at height h moving at v px/s
  h=$(jit 32 10) v=$(jit 0 6) ar=$(jit 240 15) ag=$(jit 130 30) ab=$(jit 40 30)
  br=$(jit 90 30) bg=$(jit 30 20) bb=$(jit 140 30)
  f="clip(0.5+(Y-$h-$v*T)/40,0,1)"
  make "$D/sunset/s$i.mp4" $d "$ar+($br-$ar)*$f" "$ag+($bg-$ag)*$f" "$ab+($bb-$ab)*$f"
  # sea: a wave of period p rolling down at v px/s, between dark blue and cyan
  p=$(jit 28 6) v=$(jit 10 4) ph=$(rnd 628) tilt=$(jit 0 3)
  w="(0.5+0.5*sin(2*PI*(Y+$tilt*X/10-$v*T)/$p+$ph/100))"
  make "$D/sea/w$i.mp4" $d "$(jit 20 15)+$(jit 60 20)*$w" "$(jit 60 20)+$(jit 140 20)*$w" "$(jit 120 20)+$(jit 90 20)*$w"
  # moon: radius R at (x0, y0) moving (vx, vy) px/s over a dark sky
  x0=$(jit 32 12) y0=$(jit 32 12) vx=$(jit 0 8) vy=$(jit 0 8) R=$(jit 15 4)
  in="lt(hypot(X-($x0+$vx*T),Y-($y0+$vy*T)),$R)"
  make "$D/moon/m$i.mp4" $d "if($in,$(jit 235 15),$(jit 15 10))" "if($in,$(jit 225 20),$(jit 20 10))" "if($in,$(jit 170 30),$(jit 60 20))"
done
