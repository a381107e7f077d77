# seeds_safetensors.sh OUT ART — seeds for fuzz_safetensors (sourced by tools/fuzz.sh):
# a real checkpoint of a very small model trained for one step on ART/store with the
# release binary (every tensor, metadata and checksum real; small enough to be loaded by
# the target), and the first 64 KiB of the 2-step run's checkpoint (ART/run: the tiny
# model's, ~5 MB whole; cut: its header and first tensors, a truncated file).
mini=$OUT/.mini-run
rm -rf "$mini"
"$SRC/build/tools/tessera" train --data "$ART/store" --config "$SRC/configs/model/tiny.conf" \
  --out "$mini" --set model.pt=1 --set model.ph=4 --set model.pw=4 --set model.hidden=12 \
  --set model.heads=1 --set model.depth=1 --set model.mlp_ratio=1 --set model.freq_dim=8 \
  --set train.steps=1 --set train.warmup=1 --set train.global_batch=1 \
  --set train.mem_tokens=1024 >"$OUT/.mini.log" 2>&1 \
  || { tail -5 "$OUT/.mini.log" >&2; echo "seeds_safetensors: the mini training run failed" >&2; }
cp "$mini"/ckpt-1.safetensors "$OUT/ckpt-mini" 2>/dev/null || true
ck=$(ls "$ART"/run/ckpt-*.safetensors 2>/dev/null | head -1)
[ -n "$ck" ] && head -c 65536 "$ck" >"$OUT/ckpt-tiny-head"
rm -rf "$mini" "$OUT/.mini.log"
