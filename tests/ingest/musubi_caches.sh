#!/usr/bin/env bash
# tests/ingest/musubi_caches.sh — `tessera ingest --latents` of musubi-tuner's Wan caches as
# they are on disk (store/latent_file.h; the layout of musubi_tuner/dataset/cache_io.py):
# NAME_WxH_wan.safetensors (latents_FxHxW_bf16 (C, F, H, W), metadata architecture = wan)
# and NAME_wan_te.safetensors (varlen_t5_bf16 (N, D), metadata caption1), a video segment's
# NAME_POS-COUNT_WxH_wan.safetensors, an f32 cache, one without a text-encoder cache.
# Written here (python3's stdlib) together with the same values as tessera latent files
# ((T, H, W, C), fps 16, vae_stride 4x8x8, text_emb and caption): both stores hold the same
# clips (token checksums), captions (text, tokens, width, block checksum) and settings.
# Refused by name: another architecture, a channel count no Wan VAE gives. No media needed.
INGEST_NO_MEDIA=1
source "$(dirname "$0")/lib.sh"
M=$WORK/musubi T=$WORK/tessera
mkdir -p "$M" "$T" "$WORK/bad"
python3 - "$M" "$T" "$WORK/bad" <<'PYEOF'
import json, struct, sys
mdir, tdir, bad = sys.argv[1:4]

def save(path, tensors, meta):
    """tensors: name -> (dtype, shape, flat values)"""
    header, blobs, off = {"__metadata__": meta}, [], 0
    for name, (dt, shape, vals) in tensors.items():
        if dt == "BF16":
            b = b"".join(struct.pack("<H", struct.unpack("<I", struct.pack("<f", v))[0] >> 16) for v in vals)
        else:
            b = struct.pack(f"<{len(vals)}f", *vals)
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(b)]}
        blobs.append(b); off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))

def value(seed, i):  # exact in bf16: k / 8 for small k
    return ((seed * 131 + i * 7) % 41 - 20) / 8.0

def clip(name, mname, F, H, W, dt, caption, seed, C=16):
    # (C, F, H, W) for musubi, (F, H, W, C) for tessera: the same value at (c, f, y, x)
    v = lambda c, f, y, x: value(seed, ((c * F + f) * H + y) * W + x)
    cfhw = [v(c, f, y, x) for c in range(C) for f in range(F) for y in range(H) for x in range(W)]
    fhwc = [v(c, f, y, x) for f in range(F) for y in range(H) for x in range(W) for c in range(C)]
    save(f"{mdir}/{mname}", {f"latents_{F}x{H}x{W}_{dt.lower()}": (dt, [C, F, H, W], cfhw)},
         {"architecture": "wan", "width": "512", "height": "320", "format_version": "1.0.1"})
    tmeta = {"format": "tessera-latents", "fps": "16", "vae_stride": "4x8x8"}
    tt = {"latents": (dt, [F, H, W, C], fhwc)}
    if caption:
        N, D = 5, 32
        emb = [value(seed + 1, i) for i in range(N * D)]
        save(f"{mdir}/{name}_wan_te.safetensors", {"varlen_t5_bf16": ("BF16", [N, D], emb)},
             {"architecture": "wan", "caption1": caption, "format_version": "1.0.1"})
        tt["text_emb"] = ("BF16", [N, D], emb)
        tmeta["caption"] = caption
    save(f"{tdir}/{name}.safetensors", tt, tmeta)

clip("fox", "fox_0512x0320_wan.safetensors", 3, 4, 6, "BF16", "a red fox, running", 1)
clip("walk", "walk_00000-009_0512x0320_wan.safetensors", 2, 4, 6, "F32", "a walk in the park", 2)
clip("still", "still_0256x0256_wan.safetensors", 1, 4, 4, "BF16", None, 3)
save(f"{bad}/hv_0256x0256_hv.safetensors", {"latents_1x4x4_bf16": ("BF16", [16, 1, 4, 4], [0.0] * 256)},
     {"architecture": "hunyuan_video"})
save(f"{bad}/odd_0256x0256_wan.safetensors", {"latents_1x4x4_bf16": ("BF16", [20, 1, 4, 4], [0.0] * 320)},
     {"architecture": "wan"})
PYEOF
A=(--patch 1x2x2 --quiet)
tsr_ok "$WORK/m.log" "ingest --latents of the musubi-tuner caches" ingest --latents "$M" --out "$WORK/sm" "${A[@]}"
tsr_ok "$WORK/t.log" "ingest --latents of the same values as tessera latent files" ingest --latents "$T" --out "$WORK/st" "${A[@]}"
expect_eq "$(sql "$WORK/sm" "SELECT count(*) FROM sources")" 3 "3 sources: the text-encoder caches are no sources"
Q="SELECT c.T, c.H, c.W, c.frames, c.checksum, coalesce(c.caption, '-'), c.caption_tokens, c.caption_dim, c.caption_checksum FROM clips c ORDER BY c.checksum"
expect_eq "$(sql "$WORK/sm" "$Q" | md5sum)" "$(sql "$WORK/st" "$Q" | md5sum)" "the same clips and captions as the tessera files"
expect_eq "$(sql "$WORK/sm" "SELECT count(*) FROM clips WHERE caption IS NOT NULL")" 2 "two cached captions"
check "caption1 is the text" test "$(sql "$WORK/sm" "SELECT count(*) FROM clips WHERE caption = 'a red fox, running'")" -ge 1
S="SELECT key, value FROM settings WHERE key != 'created_at' ORDER BY key"
expect_eq "$(sql "$WORK/sm" "$S" | md5sum)" "$(sql "$WORK/st" "$S" | md5sum)" "the same settings (16 fps, stride 4x8x8, 16 channels)"
verify_ok "$WORK/sm" "index verify clean"
tsr "$WORK/b1.log" ingest --latents "$WORK/bad/hv_0256x0256_hv.safetensors" --out "$WORK/sb1" --quiet
check "another architecture refused, named" grep -q "architecture 'hunyuan_video': only Wan's" "$WORK/b1.log"
tsr "$WORK/b2.log" ingest --latents "$WORK/bad/odd_0256x0256_wan.safetensors" --out "$WORK/sb2" --quiet
check "20 channels refused, named" grep -q "20 channels: Wan's VAEs give 16" "$WORK/b2.log"
finish
