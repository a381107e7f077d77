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
# The draws assign in this shell: a draw inside $(...) would run in a subshell, which bash
# (5.1 on) reseeds, so the clips would differ from run to run.
rnd() { printf -v "$1" %d $((RANDOM % $2)); }                     # VAR = 0 .. n-1
jit() { printf -v "$1" %d $(($2 + RANDOM % (2 * $3 + 1) - $3)); }  # VAR = v +- j
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
  jit h 32 10; jit v 0 6; jit ar 240 15; jit ag 130 30; jit ab 40 30
  jit br 90 30; jit bg 30 20; jit bb 140 30
  f="clip(0.5+(Y-$h-$v*T)/40,0,1)"
  make "$D/sunset/s$i.mp4" $d "$ar+($br-$ar)*$f" "$ag+($bg-$ag)*$f" "$ab+($bb-$ab)*$f"
  # sea: a wave of period p rolling down at v px/s, between dark blue and cyan
  jit p 28 6; jit v 10 4; rnd ph 628; jit tilt 0 3
  jit r0 20 15; jit r1 60 20; jit g0 60 20; jit g1 140 20; jit b0 120 20; jit b1 90 20
  w="(0.5+0.5*sin(2*PI*(Y+$tilt*X/10-$v*T)/$p+$ph/100))"
  make "$D/sea/w$i.mp4" $d "$r0+$r1*$w" "$g0+$g1*$w" "$b0+$b1*$w"
  # moon: radius R at (x0, y0) moving (vx, vy) px/s over a dark sky
  jit x0 32 12; jit y0 32 12; jit vx 0 8; jit vy 0 8; jit R 15 4
  jit mr 235 15; jit sr 15 10; jit mg 225 20; jit sg 20 10; jit mb 170 30; jit sb 60 20
  in="lt(hypot(X-($x0+$vx*T),Y-($y0+$vy*T)),$R)"
  make "$D/moon/m$i.mp4" $d "if($in,$mr,$sr)" "if($in,$mg,$sg)" "if($in,$mb,$sb)"
done
