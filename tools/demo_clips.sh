#!/usr/bin/env bash
# tools/demo_clips.sh DIR [N] — the demo's training videos (tools/run.sh): N clips (default
# 64) of each of three kinds, 64x64 pixels at 8 fps, 0.5, 1 or 1.5 s long (a quarter, a
# half and a quarter of them; at 4 fps 2, 4 or 6 frames), made with the ffmpeg
# CLI's geq filter from a fixed seed (bash's $RANDOM: the same files wherever bash 5 runs):
#   DIR/sunset/  a vertical gradient, orange above, violet below, its horizon drifting
#   DIR/sea/     horizontal blue and cyan waves rolling down the frame
#   DIR/moon/    a large disc, pale, yellow, golden or red, crossing a dark, black or
#                indigo sky
# Each clip's colours, phases, speeds and positions vary. Large smooth structure in a
# palette of its own per kind, moving: what a tiny model learns in minutes, and what a
# person recognises in its samples.
# It also writes, for text-to-video training (docs/demo.md):
#   DIR/demo.csv     a manifest in tessera's generic form (path,start,end,caption; docs/
#                    manifest.md): every clip whole, with a caption that says what the
#                    generator drew for it: its colours, speed, direction, size, position
#                    ("an orange sun setting slowly over a violet sky, the horizon high")
#   DIR/palette.txt  the colour words of the captions and the colour each names, "WORD R G
#                    B" a line: tools/sample_stats.py names a sample's colours with them
# An existing file is kept when an earlier run made it from the same draws
# (DIR/recipes.txt), else made again.
# (for shellcheck: the draws assign through printf -v; COLOURS' entries are WORD:R,G,B)
# shellcheck disable=SC2154,SC2054
set -euo pipefail
D=${1:?usage: tools/demo_clips.sh DIR [N]}
N=${2:-64}
RANDOM=7
mkdir -p "$D/sunset" "$D/sea" "$D/moon"
# The draws assign in this shell: a draw inside $(...) would run in a subshell, which bash
# (5.1 on) reseeds, so the clips would differ from run to run.
rnd() { printf -v "$1" %d $((RANDOM % $2)); }                     # VAR = 0 .. n-1
jit() { printf -v "$1" %d $(($2 + RANDOM % (2 * $3 + 1) - $3)); }  # VAR = v +- j

# The colour words and the colour each names. A sunset's and a sea's colours are drawn
# from a continuous range and named by the nearest word of their part's list (each word
# sits in the middle of the part of the range it names); a moon's disc and sky are drawn
# around a word of their list. Some words serve two parts (a red sun, a red moon), so the
# model learns them as colours rather than as kinds; "orange" and "violet" are a
# sunset's only (tools/run.sh samples "an orange moon over a violet sky").
COLOURS=(red:240,100,40 orange:240,130,40 golden:240,160,40 violet:90,30,140
         indigo:65,25,165 purple:120,35,115 blue:80,180,235 cyan:80,200,210
         turquoise:80,215,180 pale:238,230,190 yellow:235,215,145 dark:15,20,65 black:10,15,42)
declare -A RGB=()
for e in "${COLOURS[@]}"; do RGB[${e%%:*}]=${e#*:}; done
SUN=(red orange golden)        # a sunset's upper sky
DUSK=(violet indigo purple)    # a sunset's lower sky
CREST=(blue cyan turquoise)    # a wave's crest
MOON=(pale yellow golden red)  # a moon's disc
NIGHT=(dark black indigo)      # a moon's sky
name() {  # name R G B WORD...: the nearest word (squared RGB distance)
  local r=$1 g=$2 b=$3 best="" bd=-1 w cr cg cb d; shift 3
  for w in "$@"; do
    IFS=, read -r cr cg cb <<<"${RGB[$w]}"
    d=$(((r - cr) ** 2 + (g - cg) ** 2 + (b - cb) ** 2))
    if [ $bd -lt 0 ] || [ $d -lt $bd ]; then best=$w bd=$d; fi
  done
  echo "$best"
}
near() {  # near R G B J WORD...: R, G, B = a random word's colour, each channel +- J
  local k c
  rnd k $(($# - 4)); k=$((k + 5))  # the position of the word among the arguments
  IFS=, read -r -a c <<<"${RGB[${!k}]}"
  jit "$1" "${c[0]}" "$4"; jit "$2" "${c[1]}" "$4"; jit "$3" "${c[2]}" "$4"
}
a() { case $1 in [aeiou]*) echo "an $1" ;; *) echo "a $1" ;; esac; }  # "an orange", "a red"
abs() { echo $(($1 < 0 ? -$1 : $1)); }
pace() { local s; s=$(abs "$1"); [ "$s" -le "$2" ] && echo slowly || echo fast; }  # |v| vs a limit

sunset_caption() {  # V H AR AG AB BR BG BB: the horizon moves V px/s from height H
  local v=$1 h=$2 top low move where=""
  top=$(name "$3" "$4" "$5" "${SUN[@]}") low=$(name "$6" "$7" "$8" "${DUSK[@]}")
  if [ "$(abs "$v")" -le 1 ]; then move="standing still"
  else move="$([ "$v" -gt 0 ] && echo setting || echo rising) $(pace "$v" 3)"; fi
  [ "$h" -le 27 ] && where=", the horizon high"
  [ "$h" -ge 37 ] && where=", the horizon low"
  echo "$(a "$top") sun $move over $(a "$low") sky$where"
}
sea_caption() {  # P V TILT R G B: period P px, rolling V px/s, tilt, crest colour
  local p=$1 v=$2 tilt=$3 size="" speed="" slant=""
  [ "$p" -le 25 ] && size="short "
  [ "$p" -ge 31 ] && size="long "
  [ "$v" -le 8 ] && speed=" slowly"
  [ "$v" -ge 12 ] && speed=" fast"
  [ "$tilt" -ge 2 ] && slant=", slanting right"
  [ "$tilt" -le -2 ] && slant=", slanting left"
  echo "$size$(name "$4" "$5" "$6" "${CREST[@]}") waves rolling$speed$slant"
}
moon_caption() {  # R Y0 VX VY DR DG DB SR SG SB: radius, height, speed, disc and sky colours
  local size="" where="" col sky ax ay move
  [ "$1" -le 12 ] && size="small "
  [ "$1" -ge 18 ] && size="large "
  [ "$2" -le 26 ] && where=", high"
  [ "$2" -ge 38 ] && where=", low"
  col=$(name "$5" "$6" "$7" "${MOON[@]}") sky=$(name "$8" "$9" "${10}" "${NIGHT[@]}")
  ax=$(abs "$3") ay=$(abs "$4")
  if [ "$ax" -le 1 ] && [ "$ay" -le 1 ]; then
    echo "$(a "$size$col") moon standing still in $(a "$sky") sky$where"; return
  fi
  if [ "$ax" -ge "$ay" ]; then move=$([ "$3" -gt 0 ] && echo "to the right" || echo "to the left")
  else move=$([ "$4" -gt 0 ] && echo downward || echo upward); fi
  echo "$(a "$size$col") moon crossing $(a "$sky") sky $(pace $((ax > ay ? ax : ay)) 4) $move$where"
}

# recipes.txt: "PATH|SECONDS|R|G|B" of each file made, so a rerun keeps exactly the files
# whose draws are unchanged (an older generator drew others).
declare -A MADE=()
if [ -f "$D/recipes.txt" ]; then
  while IFS='|' read -r p rest; do MADE[$p]=$rest; done <"$D/recipes.txt"
fi
: >"$D/recipes.txt.tmp"
make() {  # make PATH SECONDS R G B: one clip from the three geq expressions (PATH in DIR)
  local recipe="$2|$3|$4|$5"
  echo "$1|$recipe" >>"$D/recipes.txt.tmp"
  [ -s "$D/$1" ] && [ "${MADE[$1]-}" = "$recipe" ] && return 0
  ffmpeg -nostdin -v error -y -f lavfi \
    -i "color=black:s=64x64:r=8:d=$2,format=rgb24,geq=r='$3':g='$4':b='$5'" \
    -c:v libx264 -crf 10 -pix_fmt yuv444p "$D/$1.tmp.mp4"
  mv "$D/$1.tmp.mp4" "$D/$1"
}
row() { echo "$1,,,\"$2\"" >>"$D/demo.csv.tmp"; }  # PATH CAPTION: the whole file

echo "path,start,end,caption" >"$D/demo.csv.tmp"
for i in $(seq 1 "$N"); do
  d=$(case $((i % 4)) in 0) echo 0.5 ;; 3) echo 1.5 ;; *) echo 1 ;; esac)
  # sunset: colour a (top) to b (bottom) across a horizon at height h moving at v px/s
  jit h 32 10; jit v 0 6; jit ar 240 15; jit ag 130 30; jit ab 40 30
  jit br 90 30; jit bg 30 20; jit bb 140 30
  f="clip(0.5+(Y-$h-$v*T)/40,0,1)"
  make "sunset/s$i.mp4" $d "$ar+($br-$ar)*$f" "$ag+($bg-$ag)*$f" "$ab+($bb-$ab)*$f"
  row "sunset/s$i.mp4" "$(sunset_caption $v $h $ar $ag $ab $br $bg $bb)"
  # sea: a wave of period p rolling down at v px/s, from colour (r0, g0, b0) in the troughs
  # to (r0 + r1, ...) on the crests
  jit p 28 6; jit v 10 4; rnd ph 628; jit tilt 0 3
  jit r0 20 15; jit r1 60 20; jit g0 60 20; jit g1 140 20; jit b0 120 20; jit b1 90 20
  w="(0.5+0.5*sin(2*PI*(Y+$tilt*X/10-$v*T)/$p+$ph/100))"
  make "sea/w$i.mp4" $d "$r0+$r1*$w" "$g0+$g1*$w" "$b0+$b1*$w"
  row "sea/w$i.mp4" "$(sea_caption $p $v $tilt $((r0 + r1)) $((g0 + g1)) $((b0 + b1)))"
  # moon: radius R at (x0, y0) moving (vx, vy) px/s, colour (mr, mg, mb) over (sr, sg, sb)
  jit x0 32 12; jit y0 32 12; jit vx 0 8; jit vy 0 8; jit R 15 4
  near mr mg mb 10 "${MOON[@]}"; near sr sg sb 8 "${NIGHT[@]}"
  in="lt(hypot(X-($x0+$vx*T),Y-($y0+$vy*T)),$R)"
  make "moon/m$i.mp4" $d "if($in,$mr,$sr)" "if($in,$mg,$sg)" "if($in,$mb,$sb)"
  row "moon/m$i.mp4" "$(moon_caption $R $y0 $vx $vy $mr $mg $mb $sr $sg $sb)"
done
mv "$D/recipes.txt.tmp" "$D/recipes.txt"
mv "$D/demo.csv.tmp" "$D/demo.csv"
for e in "${COLOURS[@]}"; do
  IFS=, read -r r g b <<<"${e#*:}"
  echo "${e%%:*} $r $g $b"
done >"$D/palette.txt"
