#!/usr/bin/env bash
# tests/gpu/lora.sh — LoRA training on the CUDA backend against cpu-bf16 (issue 28): the
# adapters that share an input run grouped (one down-projection for the self-attention's
# q, k, v and the cross-attention's k, v; their columns through gemm_strided, model/lora.c),
# so this runs the CUDA gemm_strided (cuBLASLt layouts with leading dimensions, fp32 dB/dA)
# inside the model. A tiny Wan base (wan-tiny, captions) is trained 20 steps on the CPU,
# then rank-4 adapters on q, k, v (both attentions) and ffn.net.2 train 6 steps with
# train.precision = bf16 on the CPU and on cuda: every step's loss within 5e-3 relative and
# gradient norm within 2e-2 (the gradient norm at step 1 is dB's alone, B being zero: a wrong
# column of u or du changes it by far more). Measured on the emulated device
# (build-emu, `ctest -L emu`): loss 6e-5, gradient norm 1.5e-3. ~5 s.
set -euo pipefail
. "$(dirname "$0")/../model/colour_store.sh"  # tests/lib.sh, colour_begin
colour_begin gpulora 4  # 4 colours x 4 captioned latent clips, CFG of global batch 8
"$T" train "${CFG[@]}" --backend cpu --out "$W/base" --steps 20 --set train.steps=20 \
  --set train.lr=2e-3 2>"$W/base.log" || { tail -3 "$W/base.log"; fail "the base's training"; }
# shellcheck disable=SC2054  # lora.targets is a comma-separated list, one element
L=(--init "$W/base/ckpt-20.safetensors" --steps 6 --set train.steps=6 --set train.lr=5e-3
   --set train.precision=bf16 --set lora.rank=4 --set lora.alpha=4
   --set lora.targets=to_q,to_k,to_v,attn2.to_k,attn2.to_v,ffn.net.2)
for dev in cpu cuda; do
  "$T" train "${CFG[@]}" "${L[@]}" --backend $dev --out "$W/$dev" 2>"$W/$dev.log" ||
    { tail -3 "$W/$dev.log"; fail "LoRA on $dev"; }
done
for key in loss grad_norm; do
  tol=5e-3; [ $key = grad_norm ] && tol=2e-2
  paste <(jq -r .$key "$W/cpu/metrics.jsonl") <(jq -r .$key "$W/cuda/metrics.jsonl") |
    awk -v k=$key -v tol=$tol '{ d = ($2 - $1) / $1; if (d < 0) d = -d; if (d > m) m = d; n++ }
      END { printf "%s: %d steps, worst relative difference cuda vs cpu-bf16 %.3g (<= %s)\n",
                   k, n, m, tol; exit !(n == 6 && m <= tol) }' ||
    fail "LoRA $key on cuda differs from cpu-bf16"
done
echo "ok: LoRA with grouped adapters on cuda = cpu-bf16"
