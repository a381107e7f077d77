#!/usr/bin/env bash
# tools/lora_demo.sh [STORE] — LoRA on the demo's data (issue 28's figure): a base trained
# without the captions, then adapters trained with them; the adapters' validation loss
# (held-out clips, fixed noise: docs/train.md "Validation") must fall below the base's.
#
#   tools/run.sh                       (makes out/demo/text-store: clips with MiniLM captions)
#   tools/lora_demo.sh                 (or tools/lora_demo.sh STORE; OUT=out/lora-demo)
#   BASE_STEPS=600 LORA_STEPS=300 RANK=8 tools/lora_demo.sh
#
# 1. The base: the demo's model (tiny, 1x4x4 patches, cross-attention over 384-wide caption
#    rows) trained BASE_STEPS steps with train.caption_dropout = 1: it never sees a caption.
# 2. The adapters: lora.rank = RANK on every block linear (the cross-attention's keys and
#    values of the captions included), LORA_STEPS steps with the captions
#    (dropout 0.1, the demo's), --init the base. Validation every 50 steps; its step 0 is
#    the base itself (B = 0), on the same held-out clips and noise.
# 3. The control: the same adapters and steps with caption dropout 1 (no captions), so that
#    what the captions bring is told apart from what more training brings.
# Output: OUT/base, OUT/lora, OUT/control (runs), OUT/lora_demo.json (the validation curves,
# the verdicts) and one summary line. Exit 1 when the adapters' last validation loss is not
# below the base's; whether it is below the control's is reported.
set -euo pipefail
cd "$(dirname "$0")/.."
T=${TESSERA_BIN:-build/tools/tessera}
STORE=${1:-out/demo/text-store}
OUT=${OUT:-out/lora-demo}
BASE_STEPS=${BASE_STEPS:-600}
LORA_STEPS=${LORA_STEPS:-300}
RANK=${RANK:-8}
[ -f "$STORE/index.sqlite" ] || { echo "lora_demo: no store $STORE (run tools/run.sh first)" >&2; exit 2; }
DB="$STORE/index.sqlite"
tlen=$(sqlite3 "$DB" "select max(caption_tokens) from clips")
[ "${tlen:-0}" -gt 0 ] || { echo "lora_demo: $STORE has no captions (tools/run.sh's text mode)" >&2; exit 2; }
nclips=$(sqlite3 "$DB" "select count(*) from clips")
nval=$((nclips >= 40 ? 12 : nclips / 4))
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
mkdir -p "$OUT"
M=(--config configs/model/tiny.conf --data "$STORE" --set model.pt=1 --set model.ph=4
   --set model.pw=4 --set model.heads=2 --set model.rope_theta=100 --set model.text_dim=384
   --set model.text_len="$tlen" --set train.global_batch=16 --set train.mem_tokens=4096
   --set train.t_shift_tokens=64 --set train.log_every=10 --set train.val_clips="$nval")
base_ckpt="$OUT/base/ckpt-$BASE_STEPS.safetensors"
if [ ! -f "$base_ckpt" ]; then
  echo "lora_demo: the base, $BASE_STEPS steps without captions -> $OUT/base"
  "$T" train "${M[@]}" --out "$OUT/base" --steps "$BASE_STEPS" --set train.steps="$BASE_STEPS" \
    --set train.warmup=50 --set train.lr=3e-3 --set train.min_lr=3e-4 \
    --set train.caption_dropout=1 --set train.val_every="$BASE_STEPS" \
    --set train.ckpt_every="$BASE_STEPS" 2>&1 | tail -2
fi
T1=attn1.to_q,attn1.to_k,attn1.to_v,attn1.to_out.0,attn2.to_q,attn2.to_k,attn2.to_v,attn2.to_out.0
T1+=,ffn.net.0.proj,ffn.net.2
lora_run() {  # lora_run NAME CAPTION_DROPOUT: adapters trained LORA_STEPS steps on the base
  echo "lora_demo: adapters (rank $RANK), caption dropout $2, $LORA_STEPS steps -> $OUT/$1"
  rm -rf "${OUT:?}/$1"
  "$T" train "${M[@]}" --init "$base_ckpt" --out "$OUT/$1" --steps "$LORA_STEPS" \
    --set train.steps="$LORA_STEPS" --set train.warmup=20 --set train.lr=3e-3 \
    --set train.min_lr=3e-4 --set train.caption_dropout="$2" --set train.val_every=50 \
    --set train.ckpt_every="$LORA_STEPS" --set lora.rank="$RANK" --set lora.alpha="$RANK" \
    --set lora.targets="$T1" 2>&1 | tail -1
}
lora_run lora 0.1       # with the captions (the demo's dropout)
lora_run control 1      # the same adapters and steps without them: what training alone gives
val() { jq -c 'select(.val_loss) | [.step, .val_loss]' "$1/metrics.jsonl" | paste -sd, | sed 's/^/[/; s/$/]/'; }
jq -n --argjson base "$(val "$OUT/base")" --argjson lora "$(val "$OUT/lora")" \
  --argjson control "$(val "$OUT/control")" --arg store "$STORE" --argjson rank "$RANK" \
  --arg targets "$T1" '{
    store: $store, lora_rank: $rank, lora_targets: $targets,
    base_val: $base, lora_val: $lora, control_val: $control,
    base_loss_with_captions: $lora[0][1], lora_last: $lora[-1][1], control_last: $control[-1][1],
    below_base: ($lora[-1][1] < $lora[0][1]), below_control: ($lora[-1][1] < $control[-1][1])}' \
  >"$OUT/lora_demo.json"
jq -r '"lora_demo: validation loss of the base (trained without captions) \(.base_loss_with_captions * 10000 | round / 10000) on the captioned held-out clips; adapters with the captions \(.lora_val | map("\(.[1] * 10000 | round / 10000) at \(.[0])") | join(" -> ")) (\(if .below_base then "below" else "NOT below" end) the base); the same adapters without captions \(.control_last * 10000 | round / 10000) (\(if .below_control then "the captions help" else "the captions do NOT help" end))"' "$OUT/lora_demo.json"
jq -e .below_base "$OUT/lora_demo.json" >/dev/null
