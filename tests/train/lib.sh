# tests/train/lib.sh — shared by the trainer's shell tests (sourced).
# The store fixture (store.sh) ingests a few small clips of $TESSERA_SHARED/videos at
# 4 fps, short side 64, patch 2x16x16, cut at 4 s: 60-200 tokens a clip, with two labels.
set -euo pipefail
# T, SRC, scratch, fail, expect_fail (exit 1, /PATTERN/ on stderr, no sanitizer report),
# ok/bad/tally, refused
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
. "$SRC/tests/shared.sh"
need_shared videos
VIDEOS=$TESSERA_SHARED/videos
FIX=$PWD/train-fixture
STORE=$FIX/store
CONF=$SRC/configs/model/tiny.conf
scratch train
# Small, fast runs: 4 clips a batch, microbatches of <= 512 tokens, 40-step schedule.
SMALL=(--set train.global_batch=4 --set train.mem_tokens=512 --set train.warmup=5
       --set train.steps=40 --set train.ckpt_every=5 --set train.ckpt_keep=2
       --set train.log_every=1 --set train.lr=2e-3)

need_store() { [ -f "$STORE/index.sqlite" ] || fail "fixture store $STORE missing (run the train_store test)"; }

# losses RUN: the loss column of metrics.jsonl, one per line, as written (17 digits).
losses() { jq -r '.loss' "$1/metrics.jsonl"; }
# same_run PLAIN RUN CKPT...: RUN's losses, gradient norms and the tensors of its checkpoints
# CKPT... (names without .safetensors) are bitwise PLAIN's; the test fails naming what differs.
same_run() {
  local plain=$1 run=$2 f
  shift 2
  diff <(losses "$plain") <(losses "$run") || fail "$run: losses differ from $plain's"
  diff <(jq -r .grad_norm "$plain/metrics.jsonl") <(jq -r .grad_norm "$run/metrics.jsonl") ||
    fail "$run: gradient norms differ from $plain's"
  for f in "$@"; do
    cmp <(ckpt_tensors "$plain/$f.safetensors") <(ckpt_tensors "$run/$f.safetensors") ||
      fail "$run: $f (weights, EMA or moments) differs from $plain's"
  done
}
# train_bg RUN LINES ARGS...: `tessera train ARGS` (which write RUN) in the background, its
# pid in BG; back once RUN/metrics.jsonl holds LINES lines (30 s at the most).
train_bg() {
  local run=$1 n=$2
  shift 2
  $T train "$@" 2>/dev/null &
  BG=$!
  for _ in $(seq 600); do
    [ "$(cat "$run/metrics.jsonl" 2>/dev/null | wc -l)" -ge "$n" ] && break
    sleep 0.05
  done
}
# losses_only RUN: the training losses (lines of validation only have none)
losses_only() { jq -r 'select(.loss) | .loss' "$1/metrics.jsonl"; }
