#!/usr/bin/env bash
# tests/layout.sh — HACKING.md "Layout", checked on the sources:
#
# 1. The backends are chosen in tools/ and passed down; nothing below tools/ picks one. So
#    no source of core/, comm/, store/, ingest/, sched/ or model/ may name a compute backend
#    constructor (kernels_cpu(), kernels_cpu_bf16(), kernels_cuda()): it takes the backend
#    from its model or its caller. kernels/, tools/, tests and benchmarks may. Likewise no
#    source of core/, kernels/, store/, ingest/, sched/ or model/ opens a communication backend
#    (comm_open(), comm_mpi()): model/ gets it from its caller; comm/ itself defines them.
# 2. Dependencies run one way. Each folder (one library each, model/CMakeLists.txt) may
#    include the project headers of the folders listed for it below, and no other:
#      core                      nothing of the project
#      kernels, sched            core (and themselves)
#      comm                      core, kernels (the compute stream it orders on arrives
#                                as a plain pointer, so today it includes core only)
#      store (the token store)   core
#      ingest                    core, store, comm (the world control plane: a
#                                multi-process ingest splits its sources by rank and
#                                broadcasts its run)
#      model (the DiT)           core, kernels, sched (limits of the train config)
#      model/io (file formats)   core, kernels, store, model
#      model/dist                core, kernels, comm, sched, model
#      model/train               core, kernels, comm, sched, store, model, model/io,
#                                model/dist, model/sample (samples during training)
#      model/sample              core, kernels, store, model, model/io
#    So the trainer reads the store without the ingester, and the store knows nothing of
#    how it is written to or read.
#    ("model" alone means the headers directly in model/, not its subfolders.) tools/, tests
#    and benchmarks may include anything.
set -euo pipefail
SRC=${TESSERA_SRC:?set by ctest}
fail=0

KB_PICK='\bkernels_(cpu|cpu_bf16|cuda)[[:space:]]*\('
hits=$(grep -rnE "$KB_PICK" --include='*.c' --include='*.h' \
         "$SRC/core" "$SRC/comm" "$SRC/store" "$SRC/ingest" "$SRC/sched" "$SRC/model" || true)
if [ -n "$hits" ]; then
  echo "FAIL: a backend is picked below tools/ (take it from the model or the caller):" >&2
  echo "$hits" >&2
  fail=1
fi
CB_PICK='\bcomm_(open|mpi)[[:space:]]*\('
hits=$(grep -rnE "$CB_PICK" --include='*.c' --include='*.h' --include='*.cu' \
         "$SRC/core" "$SRC/kernels" "$SRC/store" "$SRC/ingest" "$SRC/sched" "$SRC/model" || true)
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

# folder of a project header: "model/io/checkpoint.h" -> model/io, "model/dit.h" -> model
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
    store) echo "core store" ;;
    ingest) echo "core store comm ingest" ;;
    sched) echo "core sched" ;;
    model) echo "core kernels sched model" ;;
    model/io) echo "core kernels store model model/io" ;;
    model/dist) echo "core kernels comm sched model model/dist" ;;
    model/train) echo "core kernels comm sched store model model/io model/dist model/sample model/train" ;;
    model/sample) echo "core kernels store model model/io model/sample" ;;
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
      echo "FAIL: ${f#"$SRC"/} ($folder) includes \"$inc\" ($hf): not allowed by HACKING.md's dependencies" >&2
      fail=1
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
}
nfiles=0
for folder in core comm kernels store ingest sched model model/io model/dist model/train model/sample; do
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
# ... and the store including the ingester, and the trainer including it.
printf '#include "ingest/ingest.h"\n' >"$probe"; fail=0
check_file "$probe" store 2>/dev/null
[ $fail = 1 ] || { echo "FAIL: the include check misses store/ -> ingest/" >&2; saved=1; }
fail=0; check_file "$probe" model/train 2>/dev/null
[ $fail = 1 ] || { echo "FAIL: the include check misses model/train/ -> ingest/" >&2; saved=1; }
fail=$saved; rm -f "$probe"

# 3. Words that name the repository's own files stay true. A comment that names a path
#    under a top-level folder (a file such as docs/model.md, or a folder such as kernels/cpu/)
#    names one that exists, and a source file that opens with a path
#    (`// model/train/train.h — ...`) gives its own. Placeholders are not paths: a name
#    with <, *, {, $ or %, or a segment in CAPITALS (FILE.safetensors, ckpt-STEP), is
#    skipped; so is a path inside a longer one (build/tests/..., $SRC/core/...). Only
#    comments are read: // and /* */ lines of C, CUDA and C++, # lines of shell, Python
#    and CMake (a Python file's opening docstring too, for its first-line path).
TOP='core|comm|kernels|store|model|ingest|sched|tools|bench|tests|docs|configs|cmake'
# comment_paths FILE...: "path<TAB>file:line" for each path a comment names, and
# "@first<TAB>path<TAB>file" for a first-line path that is not the file's own.
comment_paths() {
  awk -v top="$TOP" -v src="$SRC/" '
    function scan(text, where,   t, pre, tok, seg, n, i, bad) {
      while (match(text, "(^|[[:space:](`\x27\"])(" top ")/[A-Za-z0-9_./<>*{}$%+-]*")) {
        pre = substr(text, RSTART, 1)
        tok = substr(text, RSTART, RLENGTH)
        if (pre ~ /[[:space:](`\x27"]/) tok = substr(tok, 2)
        text = substr(text, RSTART + RLENGTH)
        if (tok ~ /[<>*{}$%]/ || substr(text, 1, 1) ~ /[<*{$%\[]/) continue
        sub(/[.,:;-]+$/, "", tok)              # sentence punctuation, "tests/..."
        n = split(tok, seg, "/"); bad = 0
        for (i = 1; i <= n; i++) {
          t = seg[i]; gsub(/CMakeLists/, "", t)
          if (t ~ /[A-Z][A-Z]/) bad = 1         # a CAPITALS placeholder: FILE, STEP, RUN
        }
        if (bad) continue
        if (tok ~ /\/$/ || seg[n] ~ /\.[A-Za-z0-9]+$/) print tok "\t" where
      }
    }
    FNR == 1 { rel = substr(FILENAME, length(src) + 1); c = (rel ~ /\.(c|h|cu|cpp)$/) }
    {
      line = $0; com = ""
      if (c) {
        if (match(line, /^[[:space:]]*(\/\/|\/\*|\*)/)) com = line
        else if (match(line, /[^:]\/\/ /)) com = substr(line, RSTART + 1)
      } else if (line ~ /^[[:space:]]*#/ && !(FNR == 1 && line ~ /^#!/)) com = line
      if (com != "") scan(com, rel ":" FNR)
    }
    # the first line that is not a shebang: its path, if it opens with one
    (FNR == 1 && $0 !~ /^#!/) || (FNR == 2 && first_shebang) {
      p = $0
      if (sub(/^(\/\/|#|\/\*|""")[[:space:]]*/, "", p) && sub(/([[:space:]]|:).*$/, "", p) >= 0 &&
          p ~ /^[A-Za-z0-9_.-]+\/[A-Za-z0-9_.\/-]+\.(c|h|cu|cpp|py|sh)$/ && p != rel)
        print "@first\t" p "\t" rel
    }
    FNR == 1 { first_shebang = ($0 ~ /^#!/) }
  ' "$@"
}
mapfile -t srcs < <(find "$SRC" \( -name '.git' -o -name 'build*' -o -name '.carry' \) -prune -o \
                     -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cpp' \
                     -o -name '*.py' -o -name '*.sh' -o -name 'CMakeLists.txt' \
                     -o -name '*.cmake' \) -print)
# check_paths: reads comment_paths' lines and says what is wrong (fail=1); npaths: how many
# paths were named. The probe below runs it in a subshell, so its fail=1 stays there.
check_paths() {
  local tok where rest
  npaths=0
  while IFS=$'\t' read -r tok where rest; do
    if [ "$tok" = @first ]; then
      echo "FAIL: $rest opens with the path $where, not its own" >&2; fail=1; continue
    fi
    npaths=$((npaths + 1))
    [ -e "$SRC/$tok" ] || { echo "FAIL: $where names $tok, which does not exist" >&2; fail=1; }
  done
}
check_paths < <(comment_paths "${srcs[@]}")
n_named=$npaths
# The path checks must be able to fail: a stale first line and a missing file are caught,
# and placeholders are not taken for paths.
pdir=$(mktemp -d); mkdir -p "$pdir/model/train"
printf '// model/train.h — moved\n// docs/nowhere.md tests/<module>/x.sh docs/FILE.md docs/*.md\n' \
  >"$pdir/model/train/train.h"
probe_err=$(SRC=$pdir; check_paths < <(comment_paths "$pdir/model/train/train.h") 2>&1)
case $probe_err in
  *"opens with the path model/train.h"*"names docs/nowhere.md"*) ;;
  *) echo "FAIL: the path check misses a stale first line or a missing file: $probe_err" >&2
     fail=1 ;;
esac
case $probe_err in
  *module*|*FILE*|*'*'*) echo "FAIL: the path check takes a placeholder for a path: $probe_err" >&2
                         fail=1 ;;
esac
rm -rf "$pdir"

# 4. No circle in the include graph of file groups (a source and its header): two groups
#    that include each other can be neither understood nor changed alone
#    (tests/include_cycles.py, which checks on a made-up tree that it finds a circle).
python3 "$SRC/tests/include_cycles.py" --probe >/dev/null ||
  { echo "FAIL: tests/include_cycles.py misses a circle" >&2; fail=1; }
cycles=$(python3 "$SRC/tests/include_cycles.py" "$SRC" core comm kernels store ingest sched model \
           tools bench) || { echo "FAIL: include circles between file groups:" >&2
                             echo "$cycles" >&2; fail=1; }

# 5. The lists that headers keep match the code where a script can tell
#    (tests/header_lists.py, which checks on made-up files that it finds a mismatch): the
#    rows of kernels/entries.h against the backends' tables, the profiler's classes and
#    docs/kernels.md's entry table; kernels/check.h's shared argument checks against the
#    rows they are named for and the backends' entries that must call them; model/dit.h's
#    parameter tensors against model/params.c.
python3 "$SRC/tests/header_lists.py" --probe >/dev/null ||
  { echo "FAIL: tests/header_lists.py misses a mismatch" >&2; fail=1; }
lists=$(python3 "$SRC/tests/header_lists.py" "$SRC") ||
  { echo "FAIL: a header's list does not match the code:" >&2; echo "$lists" >&2; fail=1; }

[ $fail = 0 ] || exit 1
echo "layout: no compute or communication backend picked below tools/; $nfiles files include" \
     "only what their folder may; the $n_named repo paths that comments name exist; no" \
     "include circle between file groups; the entry and tensor lists match the code"
