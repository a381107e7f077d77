# tests/train/lib.sh — shared by the trainer's shell tests (sourced).
# The store fixture (store.sh) ingests a few small clips of $TESSERA_SHARED/videos at
# 4 fps, short side 64, patch 2x16x16, cut at 4 s: 60-200 tokens a clip, with two labels.
set -euo pipefail
T=${TESSERA_BIN:?}
SRC=${TESSERA_SRC:?}
. "$SRC/tests/shared.sh"
need_shared videos
VIDEOS=$TESSERA_SHARED/videos
FIX=$PWD/train-fixture
STORE=$FIX/store
CONF=$SRC/configs/model/tiny.conf
W=$(mktemp -d "${TMPDIR:-/tmp}/tessera-train.XXXXXX")
trap 'rm -rf "$W"' EXIT
# Small, fast runs: 4 clips a batch, microbatches of <= 512 tokens, 40-step schedule.
SMALL=(--set train.global_batch=4 --set train.mem_tokens=512 --set train.warmup=5
       --set train.steps=40 --set train.ckpt_every=5 --set train.ckpt_keep=2
       --set train.log_every=1 --set train.lr=2e-3)

fail() { echo "FAIL: $*" >&2; exit 1; }
need_store() { [ -f "$STORE/index.sqlite" ] || fail "fixture store $STORE missing (run the train_store test)"; }

# expect_fail PATTERN CMD...: CMD must exit 1 with PATTERN (grep -E) on stderr.
expect_fail() {
  local pat=$1; shift
  local rc=0
  "$@" >"$W/out" 2>"$W/err" || rc=$?
  [ $rc -eq 1 ] || { cat "$W/err" >&2; fail "expected exit 1, got $rc: $*"; }
  grep -Eq -- "$pat" "$W/err" || { cat "$W/err" >&2; fail "stderr lacks /$pat/: $*"; }
  # Under the sanitizer build a leak on the error path also exits 1 (ASan's exit code).
  ! grep -q 'Sanitizer' "$W/err" || { cat "$W/err" >&2; fail "sanitizer report: $*"; }
  echo "ok: refused ($(head -c 160 "$W/err" | tr '\n' ' '))"
}

# losses RUN: the loss column of metrics.jsonl, one per line, as written (17 digits).
losses() { jq -r '.loss' "$1/metrics.jsonl"; }
# losses_only RUN: the training losses (lines of validation only have none)
losses_only() { jq -r 'select(.loss) | .loss' "$1/metrics.jsonl"; }
# ckpt_tensors FILE: the tensor bytes of a safetensors file, without its header (whose
# metadata holds the config text, which differs between runs of other cadences)
ckpt_tensors() {
  local n
  n=$(od -An -t u8 -N 8 "$1" | tr -d ' ')
  tail -c +$((9 + n)) "$1"
}
