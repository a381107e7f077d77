#!/usr/bin/env python3
"""tools/gpu_record.py — reads what the GPU lease's calls brought back (tools/gpu_lease.py
merge; docs/gpu.md "The GPU lease"): per call folder (a run tool's files_at) its lease.json
and bundle.tar.gz, merged into one file to commit as bench/gpu/results-DATE.json, and a
report: each call's tree (commit, clean or the commit carrying its diff), steps with their
failed checks, the benchmark cases of both sides, and the profile with "x of floor" per
entry where the profile gives the entry's bandwidth floor. Names every result a step that
ran should have left and did not."""
import json
import os
import tarfile
import tempfile

BUNDLE = "bundle.tar.gz"  # with lease.json the only files a call leaves in OUT


def unpack_bundle(d, dst):
    """The call folder d's bundle unpacked into dst (refusing members that would land
    outside it); d itself when it has none (the layout before bundles: files side by side)."""
    path = os.path.join(d, BUNDLE)
    if not os.path.isfile(path):
        return d, []
    with tarfile.open(path) as tar:
        members = tar.getmembers()
        for m in members:
            if m.name.startswith("/") or ".." in m.name.split("/") or not (m.isfile() or m.isdir()):
                raise SystemExit(f"gpu_lease.py merge: {path}: member {m.name!r} is not a plain "
                                 "file inside the bundle")
        tar.extractall(dst)
    return dst, sorted(m.name for m in members if m.isfile())


def step_outputs(folder):
    """Per folder of a benchmark or script step: its results.json, prof.json (diag's
    profile), plans.txt (cuBLASLt plans by shape), cp_modes.json, and the last lines of its
    log where a benchmark was cut before it wrote results."""
    outputs = {}
    for name in sorted(os.listdir(folder)):
        sub = os.path.join(folder, name)
        if not os.path.isdir(sub):
            continue
        got = {}
        for fn, key in (("results.json", "results"), ("prof.json", "profile"),
                        ("cp_modes.json", "cp_modes")):
            if os.path.isfile(os.path.join(sub, fn)):
                with open(os.path.join(sub, fn)) as f:
                    try:
                        got[key] = json.load(f)
                    except ValueError as e:
                        got[key + "_error"] = f"{fn}: {e}"
        if os.path.isfile(os.path.join(sub, "plans.txt")):
            with open(os.path.join(sub, "plans.txt")) as f:
                got["cublaslt_plans"] = [l.strip() for l in f if l.strip()]
        if "results" not in got and os.path.isfile(os.path.join(sub, "bench.log")):
            with open(os.path.join(sub, "bench.log"), errors="replace") as f:
                got["log_tail"] = f.read().splitlines()[-12:]
        outputs[name] = got
    return outputs


# What a step that ran leaves in its folder (merge names what is missing).
EXPECTED = {"bench": ("results",), "script diag": ("profile", "cublaslt_plans"),
            "script cp_modes": ("cp_modes",)}


def missing_outputs(steps, outputs):
    missing = []
    for st in steps:
        if st.get("status") not in ("passed", "failed", "timeout", "running"):
            continue
        kind, _, name = st["step"].partition(" ")
        want = EXPECTED.get(st["step"]) or (EXPECTED[kind] if kind == "bench" else ())
        got = outputs.get(name, {})
        missing += [f"{st['step']}: {w}" for w in want if w not in got
                    and not (st["status"] != "passed" and "log_tail" in got)]
    return missing


def merge(out, dirs):
    """The calls' records as one file to commit: the first call's facts, then per call its
    plan, times, binaries (commit, dirty, the commit carrying a diff, source hash), steps
    (with their failed checks), the files that came back, and per step folder of its bundle
    the benchmark's results.json (or its log's last lines when it was cut before writing
    one), a script's profile, cuBLASLt plan counts and cp_modes.json. Prints a report."""
    calls = []
    with tempfile.TemporaryDirectory() as scratch:
        for i, d in enumerate(dirs):
            with open(os.path.join(d, "lease.json")) as f:
                rec = json.load(f)
            folder, members = unpack_bundle(d, os.path.join(scratch, str(i)))
            call = {k: rec.get(k) for k in ("plan", "started", "finished", "budget_s", "commit",
                                              "binaries", "steps", "facts")}
            call["files"] = sorted(os.listdir(d))
            call["bundle_files"] = members
            call["outputs"] = step_outputs(folder)
            call["missing"] = missing_outputs(call["steps"] or [], call["outputs"])
            calls.append(call)
    facts = next((c["facts"] for c in calls if c.get("facts")), None)
    for c in calls:
        c.pop("facts")
    doc = {"facts": facts, "calls": calls}
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, out)
    for line in report(doc):
        print(line)
    print(f"gpu_lease.py merge: {len(calls)} calls -> {out}")
    return 1 if any(c["missing"] for c in calls) else 0


def report(doc):
    """The merged record as lines: per call its tree, steps, failed checks, benchmark cases
    and the profile with each entry's bandwidth floor where the profile gives one."""
    f = doc.get("facts") or {}
    yield f"device: {f.get('device', '?')}, driver {f.get('driver', '?')}, CUDA {f.get('cuda_nvcc', '?')}, " \
          f"cuDNN {f.get('cudnn', '?')}, torch {f.get('torch', '?')}"
    for i, c in enumerate(doc["calls"], 1):
        b = c.get("binaries") or {}
        tree = "clean" if not b.get("dirty") else f"dirty, diff carried by {str(b.get('tree_commit'))[:12]}"
        counts = {}
        for st in c.get("steps") or []:
            counts[st.get("status")] = counts.get(st.get("status"), 0) + 1
        yield f"call {i} ({c.get('plan')}, commit {str(c.get('commit'))[:12]}, {tree}; " \
              f"{len(c['files'])} files back): " + ", ".join(f"{n} {k}" for k, n in counts.items())
        for st in c.get("steps") or []:
            yield f"  {st['step']}: {st.get('status')} {st.get('seconds', '-')} s: {st.get('summary', '')}"[:300]
            for line in st.get("failures", []):
                yield f"      {line}"
        for name, got in c["outputs"].items():
            for case, r in ((got.get("results") or {}).get("cases") or {}).items():
                yield "  " + case_line(name, case, r)
            if got.get("profile"):
                yield from profile_lines(name, got["profile"])
        for m in c["missing"]:
            yield f"  MISSING {m}"


def case_line(step, case, r):
    t, p = r.get("tessera") or {}, r.get("pytorch") or {}
    side = lambda s: (f"{s['median_s'] * 1e3:.1f} ms" + (f", MFU {s['mfu']:.2f}" if s.get("mfu") else "")
                      if s.get("median_s") else "-")
    ratio = r.get("ratio_tessera_over_pytorch")
    return f"{step} {case}: tessera {side(t)}; PyTorch {side(p)}" + (f"; ratio {ratio:.2f}" if ratio else "")


def profile_lines(step, res):
    """bench_train_step's --json with a profile: the classes, then each entry a step, with
    'x of floor' where the entry carries floor_ms (the time its bytes take at the device's
    bandwidth, in the entry's own unit, ms a step) and its bytes."""
    prof = res.get("profile") or {}
    yield f"  {step} profile ({res.get('config', '?')}, {res.get('clips_spec', '?')}): step " \
          f"{prof.get('step_ms', 0):.1f} ms, " + ", ".join(
              f"{k} {v.get('ms', 0):.1f}" for k, v in (prof.get("classes") or {}).items())
    for e in sorted(prof.get("entries") or [], key=lambda e: -e.get("ms", 0)):
        line = f"    {e.get('name', '?'):32s} {e.get('class', ''):11s} {e.get('ms', 0):8.2f} ms " \
               f"{e.get('calls', 0):6.0f} calls"
        if isinstance(e.get("floor_ms"), (int, float)) and e["floor_ms"] > 0:
            line += f"  floor {e['floor_ms']:.2f} ms, {e.get('ms', 0) / e['floor_ms']:.1f}x of floor"
        if isinstance(e.get("bytes"), (int, float)):
            line += f" ({e['bytes'] / 1e6:.1f} MB)"
        yield line
