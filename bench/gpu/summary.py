#!/usr/bin/env python3
"""bench/gpu/summary.py TMP OUT_JSON --cases A,B,... --mem-cases 16384:0,... [--meta K=V ...]

The results of bench/gpu/run.sh: reads what its runs left in TMP and writes results.json.

  TMP/peak.json          tools/reference/bench_gpu.py --peak (bf16 GEMM TFLOP/s, versions)
  TMP/CASE.t.json        bench_train_step --json (tessera side of a case)
  TMP/CASE.p.json        tools/reference/bench_gpu.py --json (PyTorch side)
  TMP/CASE.smi_{t,p}     nvidia-smi memory.used samples (MiB), TMP/CASE.base_{t,p} before
  TMP/mem-N-R.json/.log  the memory runs: dit-1b, one N-token clip, model.recompute = R

Per case: both sides' tokens/s, model TFLOP/s and MFU (model FLOPs of the batch, issue 13:
6 x token-wise linear weights per token + 12 x n^2 x D per layer per clip, over the bf16
GEMM peak measured in the same run), the ratio tessera / PyTorch, the step-1 loss
difference. Then the targets of issue 13, each with its value, threshold and whether it
held; and the memory report: per (tokens, recompute) the backend's peak and the bytes per
token beyond weights, their bf16 copy, gradients and Adam state (18 bytes a parameter), the value of
train.act_bytes_token for the planner (model/train/memory.h).

Prints one line per case, per target and per memory run; the process's exit status is 0
(whether targets held is data, not an error). The functions are tested without a GPU by
tests/gpu/bench_summary.sh."""
import argparse
import json
import os
import re
import subprocess
import sys
import time

# Issue 13's targets: (name, case(s), threshold)
RATIO_MIN = 1.2
MFU_TARGETS = {"1b-1x16384": 0.60, "b-16x4096": 0.50}
SHORT_CLIP_MIN = 0.8  # model TFLOP/s of b-64x1024 over b-16x4096
# Bytes a parameter holds on the device during a bf16 bench_train_step, none of them per
# token: fp32 master weights, gradients, Adam m and v, the bf16 working copy.
STATE_BYTES_PER_PARAM = 18


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def smi_peak(tmp, case, side):
    """Peak nvidia-smi memory.used over the side's process less the value before, bytes."""
    try:
        with open(os.path.join(tmp, f"{case}.smi_{side}")) as f:
            vals = [int(l) for l in f if l.strip().isdigit()]
        with open(os.path.join(tmp, f"{case}.base_{side}")) as f:
            base = int(f.read())
    except (OSError, ValueError):
        return None
    return (max(vals) - base) * 2**20 if vals else None


def side_figures(s, flops, peak_tflops):
    """Adds model_tflops and mfu to side s (a dict with median_s) in place."""
    if s and flops and s.get("median_s"):
        s["model_tflops"] = flops / s["median_s"] / 1e12
        s["mfu"] = s["model_tflops"] / peak_tflops if peak_tflops else None


def case_entry(t, p, peak_tflops):
    """One case of results.json from the two sides' JSON (either may be None)."""
    e = {"tessera": None, "pytorch": None}
    flops = p.get("model_flops_per_step") if p else None
    if t:
        e["tessera"] = {k: t.get(k) for k in (
            "backend", "precision", "recompute", "params", "tokens", "clips", "clips_spec",
            "median_s", "mean_s", "min_s", "step_s", "tokens_per_s", "losses",
            "activation_bytes", "backend_peak_bytes", "backend_capacity_bytes", "paths")}
    if p:
        e["pytorch"] = {k: p.get(k) for k in (
            "torch", "tokens", "clips", "median_s", "mean_s", "min_s", "step_s", "tokens_per_s",
            "losses", "attention_backends", "attention_runs", "compile", "recompute",
            "recompute_level", "fused_adamw", "max_memory_allocated", "max_memory_reserved")}
    e["model_flops_per_step"] = flops
    for side in ("tessera", "pytorch"):
        side_figures(e[side], flops, peak_tflops)
    if t and p and p.get("tokens_per_s"):
        e["ratio_tessera_over_pytorch"] = t["tokens_per_s"] / p["tokens_per_s"]
        l0, l1 = t["losses"][0], p["losses"][0]
        e["step1_loss_rel_diff"] = abs(l0 - l1) / abs(l1) if l1 else None
    return e


def target(name, value, threshold, what):
    """held: True/False, or None when the value was not measured (its case was not in this
    run, or a side failed)."""
    held = None if value is None else value >= threshold
    return {"target": name, "value": value, "threshold": threshold, "held": held, "what": what}


def targets(cases):
    """Issue 13's targets over the cases of this run (cases: name -> case_entry)."""
    out = []
    for c, e in cases.items():
        out.append(target(f"ratio {c}", e.get("ratio_tessera_over_pytorch"), RATIO_MIN,
                          "tessera / PyTorch tokens per second"))
    for c, th in MFU_TARGETS.items():
        t = (cases.get(c) or {}).get("tessera") or {}
        out.append(target(f"mfu {c}", t.get("mfu"), th, "tessera model FLOPs / bf16 GEMM peak"))
    long_ = (cases.get("b-16x4096") or {}).get("tessera") or {}
    short = (cases.get("b-64x1024") or {}).get("tessera") or {}
    r = (short["model_tflops"] / long_["model_tflops"]
         if short.get("model_tflops") and long_.get("model_tflops") else None)
    out.append(target("short clips b-64x1024 / b-16x4096", r, SHORT_CLIP_MIN,
                      "tessera model TFLOP/s of 64 x 1,024 over 16 x 4,096"))
    if "1b-1x65536" in cases:
        t = cases["1b-1x65536"].get("tessera") or {}
        losses = t.get("losses") or []
        ok = bool(losses) and all(isinstance(x, (int, float)) and abs(x) < float("inf")
                                  for x in losses)
        v = 1.0 if ok else 0.0
    else:
        v = None
    out.append(target("1b-1x65536 trains", v, 1.0,
                      "tessera ran dit-1b on one 65,536-token clip with finite losses"))
    return out


def last_error(log_text):
    """The last line of a failed run that says what went wrong."""
    lines = [l.strip() for l in log_text.splitlines() if l.strip()]
    for l in reversed(lines):
        if "error" in l.lower() or "ENOMEM" in l or "does not fit" in l:
            return l
    return lines[-1] if lines else ""


def memory_entry(j, log_text):
    """One memory run: the backend's peak and the bytes per token beyond the parameter
    state, or the reason it did not run."""
    if not j or not j.get("backend_peak_bytes"):
        return {"ran": False, "error": last_error(log_text or "")}
    tokens, params, peak = j["tokens"], j["params"], j["backend_peak_bytes"]
    state = STATE_BYTES_PER_PARAM * params
    return {"ran": True, "tokens": tokens, "recompute": j.get("recompute"),
            "backend_peak_bytes": peak, "backend_capacity_bytes": j.get("backend_capacity_bytes"),
            "activation_bytes_layout": j.get("activation_bytes"),
            "parameter_state_bytes": state,
            "bytes_per_token": (peak - state) / tokens if tokens else None,
            "layout_bytes_per_token": ((j["activation_bytes"] - 2 * params) / tokens
                                       if tokens and j.get("activation_bytes") else None),
            "step_s": j.get("median_s")}


def config_depth(path):
    """model.depth of a config file (the memory runs' dit-1b), or None."""
    try:
        with open(path) as f:
            for line in f:
                m = re.match(r"\s*depth\s*=\s*(\d+)", line)
                if m:
                    return int(m.group(1))
    except OSError:
        pass
    return None


def memory_report(tmp, mem_cases, depth=None):
    out = []
    for mc in mem_cases:
        tok, rec = mc.split(":")
        base = os.path.join(tmp, f"mem-{tok}-{rec}")
        log = ""
        try:
            with open(base + ".log") as f:
                log = f.read()
        except OSError:
            pass
        e = memory_entry(load(base + ".json"), log)
        e.update({"config": "dit-1b", "tokens": int(tok), "recompute": int(rec)})
        if e["ran"] and depth:  # every per-token byte spread over the blocks: an upper
            e["bytes_per_token_per_block"] = e["bytes_per_token"] / depth  # bound of a block's
        out.append(e)
    return out


def fmt_side(s):
    if not s:
        return "failed"
    m = s.get("nvidia_smi_peak_bytes")
    paths = s.get("paths") or {}
    plain = (f", GEMMs on the plain kernel {paths['gemm_plain']} of "
             f"{paths['gemm_plain'] + paths['gemm_library']}, attention on the own kernels "
             f"{paths['attention_own']} of {paths['attention_own'] + paths['attention_library']}"
             if paths else "")
    return (f"{s['median_s'] * 1e3:.0f} ms, {s['tokens_per_s'] / 1e3:.1f}k tok/s, "
            f"{s.get('model_tflops') or 0:.0f} TFLOP/s, MFU {s.get('mfu') or 0:.2f}, "
            + (f"{m / 2**30:.1f} GiB" if m else "? GiB") + plain)


def fmt_value(v):
    return "n/a" if v is None else f"{v:.3f}"


def run(*c):
    try:
        return subprocess.run(c, capture_output=True, text=True, timeout=60).stdout.strip()
    except Exception:
        return ""


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("tmp")
    ap.add_argument("out")
    ap.add_argument("--cases", required=True)
    ap.add_argument("--mem-cases", default="")
    ap.add_argument("--meta", action="append", default=[], help="KEY=VALUE for results.json")
    a = ap.parse_args(argv)
    meta = {}
    for kv in a.meta:
        k, v = kv.split("=", 1)
        meta[k] = v == "true" if v in ("true", "false") else int(v) if v.isdigit() else v
    smi = run("nvidia-smi", "--query-gpu=name,driver_version,memory.total",
              "--format=csv,noheader")
    f = smi.splitlines()[0].split(", ") if smi else ["", "", ""]
    nv = re.search(r"release ([\d.]+), V([\d.]+)", run("nvcc", "--version"))
    peak = load(os.path.join(a.tmp, "peak.json")) or {}
    pk = peak.get("tflops")
    res = {"benchmark": "training step: tessera CUDA backend (bf16) vs PyTorch reference "
                        "(bf16 autocast, SDPA, fused AdamW, torch.compile per block)",
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "device": f[0], "driver": f[1] if len(f) > 1 else "",
           "memory_total": f[2] if len(f) > 2 else "",
           "cuda_nvcc": nv.group(2) if nv else "", "cuda_torch": peak.get("cuda"),
           "cudnn_torch": peak.get("cudnn"), "torch": peak.get("torch"),
           "gemm_peak": peak,
           "flops": "6 x token-wise linear weights per token + 12 n^2 D per layer per clip "
                    "(fwd+bwd, recompute not counted)",
           "env": {k: v for k, v in os.environ.items() if k.startswith("TESSERA_CUDA_")},
           "cases": {}}
    res.update(meta)
    for c in [c for c in a.cases.split(",") if c and c != "none"]:
        t = load(os.path.join(a.tmp, f"{c}.t.json"))
        p = load(os.path.join(a.tmp, f"{c}.p.json"))
        e = case_entry(t, p, pk)
        if e["tessera"]:
            e["tessera"]["nvidia_smi_peak_bytes"] = smi_peak(a.tmp, c, "t")
        if e["pytorch"]:
            e["pytorch"]["nvidia_smi_peak_bytes"] = smi_peak(a.tmp, c, "p")
        res["cases"][c] = e
        extra = ""
        if p and p.get("max_memory_allocated"):
            extra += f" (alloc {p['max_memory_allocated'] / 2**30:.1f} GiB)"
        if "ratio_tessera_over_pytorch" in e:
            d = e["step1_loss_rel_diff"]
            extra += (f"; ratio {e['ratio_tessera_over_pytorch']:.2f}, step-1 loss diff "
                      + ("n/a" if d is None else f"{d:.1e}"))
        print(f"{c}: tessera {fmt_side(e['tessera'])}; PyTorch {fmt_side(e['pytorch'])}{extra}")
    res["targets"] = targets(res["cases"])
    for tg in res["targets"]:
        verdict = {True: "held", False: "NOT held", None: "not measured"}[tg["held"]]
        print(f"target {tg['target']}: {fmt_value(tg['value'])} vs >= {tg['threshold']}: "
              f"{verdict}")
    mem = [m for m in a.mem_cases.split(",") if m]
    res["memory"] = memory_report(a.tmp, mem, config_depth("configs/model/dit-1b.conf"))
    for m in res["memory"]:
        head = f"memory dit-1b {m['tokens']} tokens, recompute {m['recompute']}: "
        if m["ran"]:
            per_block = m.get("bytes_per_token_per_block")
            print(head + f"backend peak {m['backend_peak_bytes'] / 2**30:.2f} GiB, "
                  f"{m['bytes_per_token']:.0f} bytes per token beyond the parameter state "
                  + (f"({per_block:.0f} per block) " if per_block else "") +
                  f"(--set train.act_bytes_token={m['bytes_per_token']:.0f})")
        else:
            print(head + f"did not run: {m['error']}")
    with open(a.out + ".tmp", "w") as fo:  # rewritten after every case: never half a file
        json.dump(res, fo, indent=2)
    os.replace(a.out + ".tmp", a.out)
    print(f"GEMM peak {pk or 0:.0f} TFLOP/s ({res['device']}); wrote {a.out} "
          f"(commit {str(meta.get('commit', ''))[:12]})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
