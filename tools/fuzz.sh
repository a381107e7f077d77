#!/usr/bin/env bash
# tools/fuzz.sh — builds the libFuzzer targets (tests/fuzz/) with clang, ASan and UBSan in
# build-fuzz/, makes each target's seed corpus from real files, and runs every target for
# a fixed number of executions. Prints one line per target and a closing
# "fuzz: N passed, N failed" line; exits 1 if any target found a crash, a leak or UB.
#
#   tools/fuzz.sh                      short run (2000 executions a target): the test suite's
#   tools/fuzz.sh --runs 200000        a long run (bench/fuzz/run.sh drives this)
#   tools/fuzz.sh --only shard,config  some targets
#   tools/fuzz.sh --json FILE          also write the figures as JSON
#
# Real files for the seeds: a small store ingested from $TESSERA_SHARED/videos (or
# ../shared/videos; without that folder, a plain clone, three clips the ffmpeg CLI makes)
# and a 2-step tiny training run from it, made once in build-fuzz/art/
# with the release binary (build/tools/tessera; tools/setup.sh builds it). Each target's
# seeds_NAME.sh is sourced with OUT (its seed folder), ART (those files), SRC (the
# repository) and SHARED set. Findings are written to build-fuzz/findings/NAME/.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$PWD
RUNS=2000
ONLY=""
JSON=""
while [ $# -gt 0 ]; do
  case $1 in
    --runs) RUNS=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    --json) JSON=$2; shift 2 ;;
    -h|--help) sed -n 2,16p "$0"; exit 0 ;;
    *) echo "fuzz.sh: unknown argument '$1' (see --help)" >&2; exit 1 ;;
  esac
done
SHARED=${TESSERA_SHARED:-$(cd .. && pwd)/shared}
TESSERA=$SRC/build/tools/tessera
[ -x "$TESSERA" ] || { echo "fuzz.sh: $TESSERA missing: run tools/setup.sh first" >&2; exit 1; }
command -v clang >/dev/null || { echo "fuzz.sh: clang missing: run tools/setup.sh" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

B=$SRC/build-fuzz
CC=clang cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_FUZZ=ON \
  -DTESSERA_NATIVE=OFF -DTESSERA_CUDA=OFF -DBUILD_TESTING=OFF >/dev/null
cmake --build "$B" -j"$(nproc)" --target fuzz_all >"$B/build.log" 2>&1 \
  || { tail -40 "$B/build.log" >&2; echo "fuzz.sh: build failed ($B/build.log)" >&2; exit 1; }

# Real files, made once: a store of three short real clips and a 2-step training run.
ART=$B/art
# (made again whenever the release binary is newer than them: formats change)
if [ ! -f "$ART/done" ] || [ "$TESSERA" -nt "$ART/done" ]; then
  rm -rf "$ART"; mkdir -p "$ART"
  if [ -d "$SHARED/videos" ]; then
    mapfile -t vids < <(find "$SHARED/videos" -maxdepth 1 -type f \( -name '*.mp4' -o -name '*.webm' -o -name '*.mkv' \) | sort | head -3)
  else
    echo "fuzz.sh: no real clips in $SHARED/videos: seeds from clips of the ffmpeg CLI's test sources"
    vids=()
    for src in testsrc2 mandelbrot smptebars; do
      ffmpeg -nostdin -v error -y -f lavfi -i "$src=size=160x120:rate=12" -t 3 -c:v libx264 \
        -preset ultrafast -pix_fmt yuv420p "$ART/$src.mp4"
      vids+=("$ART/$src.mp4")
    done
  fi
  "$TESSERA" ingest "${vids[@]}" --out "$ART/store" --fps 4 --short-side 32 --patch 1x4x4 \
    --max-seconds 2 --workers 1 >"$ART/ingest.log" 2>&1 || [ $? -eq 2 ]
  "$TESSERA" train --data "$ART/store" --config "$SRC/configs/model/tiny.conf" --out "$ART/run" \
    --set train.steps=2 --set train.global_batch=2 --set train.mem_tokens=1024 \
    --set train.ckpt_every=1 --set train.warmup=1 \
    --set model.pt=1 --set model.ph=4 --set model.pw=4 >"$ART/train.log" 2>&1 \
    || { tail -20 "$ART/train.log" >&2; echo "fuzz.sh: the seed training run failed" >&2; exit 1; }
  touch "$ART/done"
fi

# The targets write their input to a scratch file and some parsers fsync: on a disk that
# costs milliseconds per execution, so scratch files go to memory when it is there.
if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then export TMPDIR=/dev/shm; fi
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
passed=0; failed=0; rows=()
for exe in "$B"/tests/fuzz/fuzz_*; do
  [ -x "$exe" ] || continue
  name=${exe##*/fuzz_}
  if [ -n "$ONLY" ] && [[ ",$ONLY," != *",$name,"* ]]; then continue; fi
  seeds=$B/seeds/$name corpus=$B/corpus/$name findings=$B/findings/$name
  rm -rf "$seeds" "$findings"; mkdir -p "$seeds" "$corpus" "$findings"
  if [ -f "$SRC/tests/fuzz/seeds_$name.sh" ]; then
    (OUT=$seeds ART=$ART SRC=$SRC SHARED=$SHARED; . "$SRC/tests/fuzz/seeds_$name.sh")
  fi
  nseeds=$(find "$seeds" -type f | wc -l)
  log=$B/findings/$name.log
  rc=0
  (cd "$findings" && "$exe" -runs="$RUNS" -seed=1 -max_len=262144 -timeout=20 -rss_limit_mb=4096 \
    -artifact_prefix="$findings/" "$corpus" "$seeds" >"$log" 2>&1) || rc=$?
  # a target that crashed prints no "Done" line: count it as a finding, keep going
  execs=$(grep -o 'Done [0-9]* runs' "$log" | awk '{print $2}' | tail -1 || true)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | awk '{print $2}' || true)
  nfind=$(find "$findings" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
  if [ $rc -ne 0 ] && [ "$nfind" -eq 0 ]; then nfind=1; fi  # died without an artifact
  if [ $rc -ne 0 ] || [ "$nfind" -gt 0 ]; then
    failed=$((failed + 1)); status=FAIL
    grep -E 'ERROR|SUMMARY|runtime error' "$log" | head -5 >&2 || true
  else
    passed=$((passed + 1)); status=ok
  fi
  printf 'fuzz %-12s %s: %s executions, %s seeds, coverage %s, findings %s (%s)\n' \
    "$name" "$status" "${execs:-0}" "$nseeds" "${cov:-0}" "$nfind" "$log"
  rows+=("{\"target\":\"$name\",\"runs\":$RUNS,\"executions\":${execs:-0},\"seeds\":$nseeds,\"coverage\":${cov:-0},\"findings\":$nfind,\"exit\":$rc}")
done
if [ -n "$JSON" ]; then
  (IFS=,; echo "{\"commit\":\"$(git rev-parse HEAD 2>/dev/null || echo unknown)\",\"targets\":[${rows[*]}]}") | jq . >"$JSON"
fi
echo "fuzz: $passed passed, $failed failed"
[ $failed -eq 0 ]
