#!/usr/bin/env bash
# tests/layout.sh — DESIGN.md "Layout", checked on the sources:
#
# 1. The backend is chosen in tools/ and passed down; nothing below tools/ picks one. So no
#    source of core/, ingest/, sched/ or model/ may name a backend constructor
#    (kernels_cpu(), kernels_cpu_bf16(), or a later kernels_cuda()): it takes the backend
#    from its model or its caller. kernels/, tools/, tests and benchmarks may.
# 2. Dependencies run one way. Each folder (one library each, model/CMakeLists.txt) may
#    include the project headers of the folders listed for it below, and no other:
#      core                      nothing of the project
#      kernels, ingest, sched    core (and themselves)
#      model (the DiT)           core, kernels, sched (limits of the train config)
#      model/io (file formats)   core, kernels, ingest, model
#      model/dist                core, kernels, sched, model
#      model/train               core, kernels, sched, ingest, model, model/io, model/dist,
#                                model/sample (samples during training)
#      model/sample              core, kernels, ingest, model, model/io
#    ("model" alone means the headers directly in model/, not its subfolders.)
set -euo pipefail
SRC=${TESSERA_SRC:?set by ctest}
fail=0

hits=$(grep -rnE '\bkernels_(cpu|cpu_bf16|cuda)[[:space:]]*\(' --include='*.c' --include='*.h' \
         "$SRC/core" "$SRC/ingest" "$SRC/sched" "$SRC/model" || true)
if [ -n "$hits" ]; then
  echo "FAIL: a backend is picked below tools/ (take it from the model or the caller):" >&2
  echo "$hits" >&2
  fail=1
fi
# The check must be able to fail: a line calling kernels_cpu() is caught.
printf 'const kernels_backend *kb = kernels_cpu();\n' | grep -qE '\bkernels_(cpu|cpu_bf16|cuda)[[:space:]]*\(' ||
  { echo "FAIL: the pattern misses a kernels_cpu() call" >&2; fail=1; }

# folder of a project header: "model/io/x.h" -> model/io, "model/dit.h" -> model
header_folder() {
  case $1 in
    model/*/*) echo "${1%/*}" ;;
    */*) echo "${1%%/*}" ;;
    *) echo "?" ;;
  esac
}
allowed() {  # allowed FOLDER: the folders it may include
  case $1 in
    core) echo "core" ;;
    kernels) echo "core kernels" ;;
    ingest) echo "core ingest" ;;
    sched) echo "core sched" ;;
    model) echo "core kernels sched model" ;;
    model/io) echo "core kernels ingest model model/io" ;;
    model/dist) echo "core kernels sched model model/dist" ;;
    model/train) echo "core kernels sched ingest model model/io model/dist model/sample model/train" ;;
    model/sample) echo "core kernels ingest model model/io model/sample" ;;
    *) echo "" ;;
  esac
}
# check_file FILE FOLDER: every #include "a/b.h" of FILE is in FOLDER's allowed list
check_file() {
  local f=$1 folder=$2 inc hf ok
  while IFS= read -r inc; do
    [[ $inc == */* ]] || continue          # a sibling header by bare name: same folder
    hf=$(header_folder "$inc")
    ok=0
    for a in $(allowed "$folder"); do [ "$a" = "$hf" ] && ok=1; done
    if [ $ok = 0 ]; then
      echo "FAIL: ${f#"$SRC"/} ($folder) includes \"$inc\" ($hf): not allowed by DESIGN.md's dependencies" >&2
      fail=1
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
}
nfiles=0
for folder in core kernels ingest sched model model/io model/dist model/train model/sample; do
  for f in "$SRC/$folder"/*.c "$SRC/$folder"/*.h "$SRC/$folder"/*/*.c "$SRC/$folder"/*/*.h; do
    [ -f "$f" ] || continue
    rel=${f#"$SRC"/}
    # files of a model subfolder are checked with that subfolder's rules
    case $folder:$rel in model:model/*/*) continue ;; esac
    [ "${rel%/*}" = "$folder" ] || [ "$folder" = kernels ] || continue
    check_file "$f" "$folder"
    nfiles=$((nfiles + 1))
  done
done
# The include check must be able to fail: model/ including model/train/ is refused.
probe=$(mktemp); printf '#include "model/train/train.h"\n' >"$probe"
saved=$fail; fail=0
check_file "$probe" model 2>/dev/null
[ $fail = 1 ] || { echo "FAIL: the include check misses model/ -> model/train/" >&2; saved=1; }
fail=$saved; rm -f "$probe"

[ $fail = 0 ] || exit 1
echo "layout: no backend picked below tools/; $nfiles files include only what their folder may"
