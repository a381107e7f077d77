#!/usr/bin/env bash
# tests/layout.sh — DESIGN.md "Layout": the backend is chosen in tools/ and passed down;
# nothing below tools/ picks one. So no source of core/, ingest/, sched/ or model/ may name
# a backend constructor (kernels_cpu(), kernels_cpu_bf16(), or a later kernels_cuda()):
# it takes the backend from its model or its caller. kernels/, tools/, tests and
# benchmarks may.
set -euo pipefail
SRC=${TESSERA_SRC:?set by ctest}
hits=$(grep -rnE '\bkernels_(cpu|cpu_bf16|cuda)[[:space:]]*\(' --include='*.c' --include='*.h' \
         "$SRC/core" "$SRC/ingest" "$SRC/sched" "$SRC/model" || true)
if [ -n "$hits" ]; then
  echo "FAIL: a backend is picked below tools/ (take it from the model or the caller):" >&2
  echo "$hits" >&2
  exit 1
fi
# The check must be able to fail: a line calling kernels_cpu() is caught.
printf 'const kernels_backend *kb = kernels_cpu();\n' | grep -qE '\bkernels_(cpu|cpu_bf16|cuda)[[:space:]]*\(' ||
  { echo "FAIL: the pattern misses a kernels_cpu() call" >&2; exit 1; }
echo "layout: no backend picked in core/ ingest/ sched/ model/"
