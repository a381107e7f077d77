#!/usr/bin/env bash
# bench/fuzz/run.sh — the long fuzzing run: every libFuzzer target of tests/fuzz/ for
# RUNS executions (default 200000) from its real seed corpus, continuing the corpus that
# earlier runs grew in build-fuzz/corpus/. Prints one line per target (executions,
# coverage, findings) and writes bench/fuzz/results.json. Findings (crash-*, leak-*,
# timeout-*) are kept in build-fuzz/findings/NAME/ to be turned into regression tests.
#   bench/fuzz/run.sh [RUNS] [--only a,b]
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${1:-200000}
shift || true
tools/setup.sh >/dev/null
exec tools/fuzz.sh --runs "$RUNS" --json bench/fuzz/results.json "$@"
