#!/usr/bin/env bash
# tests/layout.sh — DESIGN.md "Layout", checked on the sources:
#
# 1. The backends are chosen in tools/ and passed down; nothing below tools/ picks one. So
#    no source of core/, comm/, ingest/, sched/ or model/ may name a compute backend
#    constructor (kernels_cpu(), kernels_cpu_bf16(), kernels_cuda()): it takes the backend
#    from its model or its caller. kernels/, tools/, tests and benchmarks may. Likewise no
#    source of core/, kernels/, ingest/, sched/ or model/ opens a communication backend
#    (comm_open(), comm_mpi()): model/ gets it from its caller; comm/ itself defines them.
# 2. Dependencies run one way. Each folder (one library each, model/CMakeLists.txt) may
#    include the project headers of the folders listed for it below, and no other:
#      core                      nothing of the project
#      kernels, sched            core (and themselves)
#      comm                      core, kernels (the compute stream it orders on arrives
#                                as a plain pointer, so today it includes core only)
#      ingest                    core, comm (the world control plane: a multi-process
#                                ingest splits its sources by rank and broadcasts its run)
#      model (the DiT)           core, kernels, sched (limits of the train config)
#      model/io (file formats)   core, kernels, ingest, model
#      model/dist                core, kernels, comm, sched, model
#      model/train               core, kernels, comm, sched, ingest, model, model/io,
#                                model/dist, model/sample (samples during training)
#      model/sample              core, kernels, ingest, model, model/io
#    ("model" alone means the headers directly in model/, not its subfolders.) tools/, tests
#    and benchmarks may include anything.
set -euo pipefail
SRC=${TESSERA_SRC:?set by ctest}
fail=0

KB_PICK='\bkernels_(cpu|cpu_bf16|cuda)[[:space:]]*\('
hits=$(grep -rnE "$KB_PICK" --include='*.c' --include='*.h' \
         "$SRC/core" "$SRC/comm" "$SRC/ingest" "$SRC/sched" "$SRC/model" || true)
if [ -n "$hits" ]; then
  echo "FAIL: a backend is picked below tools/ (take it from the model or the caller):" >&2
  echo "$hits" >&2
  fail=1
fi
CB_PICK='\bcomm_(open|mpi)[[:space:]]*\('
hits=$(grep -rnE "$CB_PICK" --include='*.c' --include='*.h' --include='*.cu' \
         "$SRC/core" "$SRC/kernels" "$SRC/ingest" "$SRC/sched" "$SRC/model" || true)
if [ -n "$hits" ]; then
  echo "FAIL: a communication backend is opened below tools/ (take it from the caller):" >&2
  echo "$hits" >&2
  fail=1
fi
# The checks must be able to fail: lines calling kernels_cpu() and comm_open() are caught.
printf 'const kernels_backend *kb = kernels_cpu();\n' | grep -qE "$KB_PICK" ||
  { echo "FAIL: the pattern misses a kernels_cpu() call" >&2; fail=1; }
printf 'st = comm_open("auto", COMM_MEM_HOST, NULL, &cb);\n' | grep -qE "$CB_PICK" ||
  { echo "FAIL: the pattern misses a comm_open() call" >&2; fail=1; }

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
    comm) echo "core kernels comm" ;;
    ingest) echo "core comm ingest" ;;
    sched) echo "core sched" ;;
    model) echo "core kernels sched model" ;;
    model/io) echo "core kernels ingest model model/io" ;;
    model/dist) echo "core kernels comm sched model model/dist" ;;
    model/train) echo "core kernels comm sched ingest model model/io model/dist model/sample model/train" ;;
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
for folder in core comm kernels ingest sched model model/io model/dist model/train model/sample; do
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
# ... and core/ including comm/ (the layer above it) is refused.
printf '#include "comm/comm.h"\n' >"$probe"; fail=0
check_file "$probe" core 2>/dev/null
[ $fail = 1 ] || { echo "FAIL: the include check misses core/ -> comm/" >&2; saved=1; }
fail=$saved; rm -f "$probe"

[ $fail = 0 ] || exit 1
echo "layout: no compute or communication backend picked below tools/; $nfiles files include only what their folder may"
