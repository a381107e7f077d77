#!/usr/bin/env python3
"""tools/gpu_lease.py — spends a short GPU lease on the facts that matter most (docs/gpu.md).

  python3 tools/gpu_lease.py first  [--budget S] [--out DIR]   on the GPU machine, call 1
  python3 tools/gpu_lease.py second [--budget S] [--out DIR]   call 2
  python3 tools/gpu_lease.py steps NAME[,NAME...] [...]        a rerun of chosen steps
  python3 tools/gpu_lease.py list                              the plans and their steps
  python3 tools/gpu_lease.py pack BUILD_DIR CARRY_DIR          here (tools/gpu_prepare.sh)
  python3 tools/gpu_lease.py merge OUT.json DIR [DIR...]       here: the calls' $OUT folders
                                                               as bench/gpu/results-DATE.json

A plan is a list of steps in order of value, each with a time box: machine facts, the
binaries' check, then GPU tests (run from the ctest definitions that `pack` recorded, or
from a build made there), then benchmarks. Every step's outcome is written to OUT/lease.json
the moment it ends (atomically) and its output appended to OUT/lease.log, so a call cut at
its limit still returns what ran. A step that would not fit in what is left of the budget
is recorded as not run. Exit 0 when every step that ran passed or was skipped, else 1.

`pack` copies the executables that the GPU tests name (stripped of debug sections) into
CARRY_DIR/build/ under their build-tree paths, writes CARRY_DIR/tests.json (the tests of
label gpu, paths as @BUILD@ and @SRC@) and CARRY_DIR/manifest.json (commit, a hash of the
sources, build settings). On the GPU machine `binaries` uses them when the sources there
hash the same and `ldd` finds every library; otherwise it builds there (tools/gpu_build.sh).
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CARRY = os.environ.get("TESSERA_CARRY") or os.path.join(ROOT, ".carry", "gpu")  # tests set it
PIP = os.environ.get("TESSERA_NVIDIA_PIP", "/opt/torch/.venv/lib/python3.12/site-packages/nvidia")
NATIVE_BUILD = "build-gpu"  # made there when the carried binaries cannot run
SOURCE_DIRS = ("CMakeLists.txt", "cmake", "core", "comm", "kernels", "model", "store", "ingest",
               "sched", "tools", "bench", "tests")
SOURCE_EXT = (".c", ".h", ".cu", ".cpp", ".txt", ".cmake", ".py")

# name -> time box in seconds (0: whatever is left). Steps: facts, binaries, "test NAME"
# (a ctest test of label gpu), "bench NAME" (BENCHES), "script NAME" (bench/gpu/NAME.sh).
PLANS = {
    "first": [("facts", 15), ("binaries", 240), ("test gpu_probe", 20),
              ("test gpu_cuda_semantics", 30), ("test gpu_backend_ops", 90),
              ("test gpu_backend_ops_cudnn_atomic", 60), ("test gpu_backend_ops_cudnn", 60),
              ("test gpu_backend_ops_own", 60), ("test gpu_arena", 30), ("test gpu_arena_shared", 30),
              ("test gpu_cuda_no_device", 10), ("test gpu_graphs", 60),
              ("test gpu_train", 150), ("bench tessera", 120), ("script diag", 60),
              ("bench torch", 0)],
    "second": [("facts", 15), ("binaries", 240), ("test gpu_comm", 60), ("script cp_modes", 120),
               ("test gpu_memory", 60),
               ("bench torch-1b", 100), ("test gpu_backend_ops_memcheck", 90),
               ("bench long", 0)],
}
BUDGETS = {"first": 565, "second": 200, "steps": 565}
# bench/gpu/run.sh runs: name -> environment (results.json and bench.log in OUT/NAME).
BENCHES = {
    "tessera": {"TORCH": "0", "MEM": "0", "WARMUP": "2", "STEPS": "5",
                "CASES": "b-16x4096,b-64x1024,b-mixed,1b-4x4096,1b-1x16384,b-1x65536"},
    "torch": {"MEM": "0", "WARMUP": "3", "STEPS": "10", "CASES": "b-16x4096"},
    "long": {"TORCH": "0", "WARMUP": "0", "STEPS": "2", "CASES": "1b-1x65536",
             "MEM_CASES": "16384:0,16384:2,65536:2"},
    "torch-1b": {"MEM": "0", "WARMUP": "2", "STEPS": "5", "CASES": "1b-1x16384"},
}
MIN_STEP_S = 10  # a step with less time than this left is not started


# ---- sources and binaries (both machines) ---------------------------------------------
def source_hash(root):
    """sha256 over the path and bytes of every file the build reads, so that binaries built
    from one tree are known to match another copy of it (the GPU machine has no .git)."""
    h = hashlib.sha256()
    files = []
    for top in SOURCE_DIRS:
        p = os.path.join(root, top)
        if os.path.isfile(p):
            files.append(top)
            continue
        for d, subdirs, names in os.walk(p):
            subdirs[:] = sorted(s for s in subdirs if not s.startswith((".", "build")))
            files += [os.path.relpath(os.path.join(d, n), root) for n in names
                      if n.endswith(SOURCE_EXT)]
    for rel in sorted(files):
        h.update(rel.encode() + b"\0")
        with open(os.path.join(root, rel), "rb") as f:
            h.update(f.read())
        h.update(b"\0")
    return h.hexdigest()


def ctest_tests(build):
    """The tests of label gpu as `ctest --show-only=json-v1` describes them."""
    out = subprocess.run(["ctest", "-L", "gpu", "--show-only=json-v1"], cwd=build,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)["tests"]


def pack(build, carry):
    build, carry = os.path.abspath(build), os.path.abspath(carry)
    tests = ctest_tests(build)
    text = json.dumps(tests)
    paths = sorted(set(re.findall(re.escape(build) + r"/[\w./+-]+", text)))
    exes = [p for p in paths if os.path.isfile(p) and os.access(p, os.X_OK)]
    missing = [t["name"] for t in tests if not t.get("command")]
    if missing:
        raise SystemExit(f"gpu_lease.py pack: tests without a built executable: {missing} "
                         f"(build their targets in {build} first)")
    shutil.rmtree(os.path.join(carry, "build"), ignore_errors=True)
    for p in exes:
        dst = os.path.join(carry, "build", os.path.relpath(p, build))
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        subprocess.run(["strip", "--strip-debug", "-o", dst, p], check=True)
    text = text.replace(build, "@BUILD@").replace(ROOT, "@SRC@")
    with open(os.path.join(carry, "tests.json"), "w") as f:
        json.dump(json.loads(text), f, indent=1)
    cache = {}
    with open(os.path.join(build, "CMakeCache.txt")) as f:
        for line in f:
            m = re.match(r"(TESSERA_\w+|CMAKE_BUILD_TYPE|CMAKE_CUDA_ARCHITECTURES):\w+=(.*)", line)
            if m:
                cache[m.group(1)] = m.group(2)
    git = lambda *a: subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    manifest = {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain",
                "--untracked-files=no")), "source_hash": source_hash(ROOT), "packed": now(),
                "binaries": [os.path.relpath(p, build) for p in exes], "cmake": cache}
    with open(os.path.join(carry, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    size = sum(os.path.getsize(os.path.join(carry, "build", b)) for b in manifest["binaries"])
    print(f"gpu_lease.py pack: {len(exes)} executables ({size / 2**20:.1f} MiB), "
          f"{len(tests)} tests, source hash {manifest['source_hash'][:12]} -> {carry}")


def now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# ---- the lease's record ------------------------------------------------------------------
class Lease:
    """The budget, OUT/lease.json (rewritten after every step) and OUT/lease.log."""

    def __init__(self, out, plan, budget):
        self.out, self.deadline = out, time.monotonic() + budget
        os.makedirs(out, exist_ok=True)
        self.log = open(os.path.join(out, "lease.log"), "a")
        self.rec = {"plan": plan, "started": now(), "budget_s": budget, "steps": []}
        self.build = self.tests = None
        self.env = run_env()

    def left(self):
        return self.deadline - time.monotonic()

    def save(self):
        tmp = os.path.join(self.out, "lease.json.tmp")
        with open(tmp, "w") as f:
            json.dump(self.rec, f, indent=1)
        os.replace(tmp, os.path.join(self.out, "lease.json"))

    def say(self, line):
        print(line, flush=True)
        self.log.write(line + "\n")
        self.log.flush()


def run_env():
    """The environment of every step: the pip tree's cuDNN, NCCL and CUDA libraries and the
    toolkit's on the loader's path (cuDNN opens its engines by name), the carried tools last,
    mpirun allowed as root."""
    env = dict(os.environ)
    libs = [os.path.join(PIP, s, "lib") for s in ("cudnn", "nccl", "cu13", "cublas")]
    libs += ["/usr/local/cuda/lib64", os.path.join(CARRY, "lib")]
    libs = [d for d in libs if os.path.isdir(d)]
    env["LD_LIBRARY_PATH"] = ":".join(libs + [p for p in [env.get("LD_LIBRARY_PATH")] if p])
    env["PATH"] = env.get("PATH", "/usr/bin:/bin") + ":" + os.path.join(CARRY, "bin")
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return env


def run_boxed(lease, cmd, box, env=None, cwd=ROOT, log=None):
    """Runs cmd for at most box seconds (then SIGTERM, SIGKILL 5 s later, to its process
    group). Output goes to lease.log (or log, a path) as it comes. Returns (rc or None when
    it timed out, seconds, the last 20 lines)."""
    sink = open(log, "a") if log else lease.log
    t0 = time.monotonic()
    tail = []
    try:
        p = subprocess.Popen(cmd, cwd=cwd, env=env or lease.env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, errors="replace",
                             start_new_session=True)
    except OSError as e:
        return 127, 0.0, [f"cannot run {cmd[0]}: {e.strerror}"]
    timer_fired = []

    def kill():
        timer_fired.append(1)
        for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 0)):
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                return
            try:
                p.wait(wait)
                return
            except subprocess.TimeoutExpired:
                pass

    timer = threading.Timer(box, kill)
    timer.start()
    for line in p.stdout:
        sink.write(line)
        sink.flush()
        tail = (tail + [line.rstrip("\n")])[-20:]
    p.wait()
    timer.cancel()
    if log:
        sink.close()
    return (None if timer_fired else p.returncode), time.monotonic() - t0, tail


# ---- steps -------------------------------------------------------------------------------
def sh(*cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def header_version(path, prefix):
    try:
        text = open(path).read()
    except OSError:
        return ""
    parts = [re.search(rf"#define\s+{prefix}_{k}\s+(\d+)", text) for k in ("MAJOR", "MINOR", "PATCH")]
    parts[2] = parts[2] or re.search(rf"#define\s+{prefix}_PATCHLEVEL\s+(\d+)", text)
    return ".".join(m.group(1) for m in parts if m)


def step_facts(lease, box):
    smi = sh("nvidia-smi", "--query-gpu=name,driver_version,memory.total,compute_cap",
             "--format=csv,noheader").splitlines()
    gpu = [x.strip() for x in smi[0].split(",")] if smi else []
    nvcc = re.search(r"release ([\d.]+), V([\d.]+)", sh("nvcc", "--version"))
    osr = dict(l.split("=", 1) for l in open("/etc/os-release").read().splitlines() if "=" in l) \
        if os.path.exists("/etc/os-release") else {}
    f = {"gpus": smi, "device": gpu[0] if gpu else "", "driver": gpu[1] if len(gpu) > 1 else "",
         "memory_total": gpu[2] if len(gpu) > 2 else "",
         "compute_capability": gpu[3] if len(gpu) > 3 else "",
         "cuda_nvcc": nvcc.group(2) if nvcc else "",
         "cudnn": header_version(os.path.join(PIP, "cudnn/include/cudnn_version.h"), "CUDNN") or
                  header_version("/usr/local/cuda/include/cudnn_version.h", "CUDNN"),
         "nccl": header_version(os.path.join(PIP, "nccl/include/nccl.h"), "NCCL") or
                 header_version("/usr/local/cuda/include/nccl.h", "NCCL"),
         "torch": sh("python3", "-c", "import torch; print(torch.__version__, torch.version.cuda)"),
         "os": osr.get("PRETTY_NAME", "").strip('"'), "glibc": os.confstr("CS_GNU_LIBC_VERSION"),
         "cpus": os.cpu_count(),
         "tools": {t: shutil.which(t, path=lease.env["PATH"]) for t in (
             "nvcc", "ncu", "nsys", "compute-sanitizer", "jq", "mpirun", "cmake", "ctest",
             "ninja", "gcc", "pkg-config", "strip")}}
    lease.rec["facts"] = f
    lease.say(f"facts: {f['device'] or 'no GPU'} (driver {f['driver']}, sm {f['compute_capability']}), "
              f"CUDA {f['cuda_nvcc']}, cuDNN {f['cudnn']}, NCCL {f['nccl']}, torch {f['torch']}, "
              f"{f['os']}, {f['cpus']} CPUs")
    return "passed" if smi else "failed", "; ".join(smi) or "nvidia-smi sees no GPU"


def missing_libraries(lease, binaries):
    """ldd of each binary with the steps' library path: {binary: [problems]}."""
    bad = {}
    for b in binaries:
        out = subprocess.run(["ldd", b], env=lease.env, capture_output=True, text=True).stdout
        probs = [l.strip() for l in out.splitlines() if "not found" in l]
        if probs:
            bad[os.path.relpath(b, ROOT)] = probs
    return bad


def load_tests(path, build):
    with open(path) as f:
        text = f.read().replace("@BUILD@", build).replace("@SRC@", ROOT)
    return {t["name"]: t for t in json.loads(text)}


def step_binaries(lease, box):
    here = source_hash(ROOT)
    info = {"source_hash": here}
    lease.rec["binaries"] = info
    man = {}
    try:
        with open(os.path.join(CARRY, "manifest.json")) as f:
            man = json.load(f)
    except (OSError, ValueError):
        info["carried"] = "none (.carry/gpu/manifest.json missing: run tools/gpu_prepare.sh)"
    lease.rec["commit"] = man.get("commit", "")
    if man:
        build = os.path.join(CARRY, "build")
        bad = missing_libraries(lease, [os.path.join(build, b) for b in man["binaries"]])
        info.update(commit=man["commit"], dirty=man["dirty"], carried_hash=man["source_hash"],
                    missing=bad)
        if man["source_hash"] != here:
            info["carried"] = "not used: built from other sources (hash differs)"
        elif bad:
            info["carried"] = "not used: libraries missing"
        else:
            info["carried"] = "used"
            lease.build, lease.tests = build, load_tests(os.path.join(CARRY, "tests.json"), build)
            lease.say(f"binaries: the carried ones ({len(man['binaries'])}, commit "
                      f"{man['commit'][:12]}{' dirty' if man['dirty'] else ''}) run here")
            return "passed", "carried binaries used"
        lease.say(f"binaries: carried {info['carried']} {json.dumps(bad)[:400] if bad else ''}")
    return build_here(lease, box, here)


def build_here(lease, box, here):
    build = os.path.join(ROOT, NATIVE_BUILD)
    stamp = os.path.join(build, "tessera-source-hash")
    if not (os.path.exists(stamp) and open(stamp).read().strip() == here):
        lease.say(f"binaries: building {NATIVE_BUILD} here (log: build.log)")
        rc, secs, tail = run_boxed(lease, ["bash", "tools/gpu_build.sh", NATIVE_BUILD], box,
                                   log=os.path.join(lease.out, "build.log"))
        lease.rec["binaries"]["build_s"] = round(secs, 1)
        if rc != 0:
            return ("timeout" if rc is None else "failed"), "build: " + " | ".join(tail[-5:])
        with open(stamp, "w") as f:
            f.write(here)
    lease.build = build
    lease.tests = {t["name"]: t for t in ctest_tests(build)}
    return "passed", f"built here in {NATIVE_BUILD}"


def step_test(lease, name, box):
    if lease.tests is None:
        return "not run", "no binaries (the binaries step failed)"
    t = lease.tests.get(name)
    if not t or not t.get("command"):
        return "not run", f"no test {name} in this build"
    props = {p["name"]: p["value"] for p in t.get("properties", [])}
    env = dict(lease.env)
    env.update(kv.split("=", 1) for kv in props.get("ENVIRONMENT", []))
    cwd = props.get("WORKING_DIRECTORY", lease.build)
    os.makedirs(cwd, exist_ok=True)
    rc, secs, tail = run_boxed(lease, t["command"], box, env=env, cwd=cwd)
    skip = int(props.get("SKIP_RETURN_CODE", 77))
    status = "timeout" if rc is None else "passed" if rc == 0 else "skipped" if rc == skip else "failed"
    return status, summary_line(tail, rc)


def summary_line(tail, rc):
    counts = [l for l in tail if re.search(r"\d+ passed, \d+ failed", l)]
    return (counts[-1] if counts else (tail[-1] if tail else "")) + (
        "" if rc is not None else " (cut at its time box)")


def step_bench(lease, name, box):
    if lease.build is None:
        return "not run", "no binaries (the binaries step failed)"
    env = dict(lease.env)
    env.update(BENCHES[name], OUT=os.path.join(lease.out, name), BUILD_DIR=lease.build,
               CASE_TIMEOUT=str(max(30, int(box))))
    rc, secs, tail = run_boxed(lease, ["bash", "bench/gpu/run.sh"], box, env=env)
    status = "timeout" if rc is None else "passed" if rc == 0 else "skipped" if rc == 3 else "failed"
    cases = [l for l in tail if re.match(r"[\w-]+: tessera ", l)]
    return status, " | ".join(cases) or summary_line(tail, rc)


def step_script(lease, name, box):
    """bench/gpu/NAME.sh with BUILD_DIR and OUT=OUT/NAME: a diagnosis whose output is data."""
    if lease.build is None:
        return "not run", "no binaries (the binaries step failed)"
    path = os.path.join("bench", "gpu", name + ".sh")
    if not re.fullmatch(r"[\w-]+", name) or not os.path.isfile(os.path.join(ROOT, path)):
        return "not run", f"no script {path}"
    env = dict(lease.env)
    env.update(OUT=os.path.join(lease.out, name), BUILD_DIR=lease.build)
    rc, secs, tail = run_boxed(lease, ["bash", path], box, env=env)
    status = "timeout" if rc is None else "passed" if rc == 0 else "failed"
    return status, summary_line(tail, rc)


def run_step(lease, step, box):
    if step == "facts":
        return step_facts(lease, box)
    if step == "binaries":
        return step_binaries(lease, box)
    kind, _, name = step.partition(" ")
    if kind == "test":
        return step_test(lease, name, box)
    if kind == "bench" and name in BENCHES:
        return step_bench(lease, name, box)
    if kind == "script":
        return step_script(lease, name, box)
    return "not run", f"unknown step '{step}' (python3 tools/gpu_lease.py list)"


def run_plan(lease, steps):
    ok = True
    for step, box in steps:
        left = lease.left()
        entry = {"step": step, "box_s": box}
        lease.rec["steps"].append(entry)
        if left < MIN_STEP_S:
            entry.update(status="not run", summary=f"out of time ({left:.0f} s left)")
            lease.say(f"== {step}: not run, out of time")
            lease.save()
            continue
        b = min(box or left, left)
        lease.say(f"== {step} (at most {b:.0f} s; {left:.0f} s left) {now()}")
        t0 = time.monotonic()
        try:
            status, summary = run_step(lease, step, b)
        except Exception as e:  # a bug of this script must not lose the record so far
            status, summary = "failed", f"{type(e).__name__}: {e}"
        entry.update(status=status, seconds=round(time.monotonic() - t0, 1), summary=summary)
        ok = ok and status in ("passed", "skipped")
        lease.say(f"== {step}: {status} in {entry['seconds']} s: {summary}")
        lease.save()
    lease.rec["finished"] = now()
    lease.save()
    return ok


def plan_steps(args):
    if args.plan == "steps":
        known = {s: b for p in PLANS.values() for s, b in p}
        names = [n.strip() for n in args.names.split(",") if n.strip()]
        return [(n, known.get(n, 0)) for n in names]
    return PLANS[args.plan]


def merge(out, dirs):
    """The calls' records as one file to commit: the first call's facts, then per call its
    plan, times, binaries (commit, dirty, source hash), steps, and per step directory the
    benchmark's results.json (or its log's last lines when it was cut before writing one)
    and a script's profile and cuBLASLt plan counts."""
    calls = []
    for d in dirs:
        with open(os.path.join(d, "lease.json")) as f:
            rec = json.load(f)
        call = {k: rec.get(k) for k in ("plan", "started", "finished", "budget_s", "commit",
                                          "binaries", "steps")}
        call["outputs"] = {}
        for name in sorted(os.listdir(d)):
            sub = os.path.join(d, name)
            if not os.path.isdir(sub):
                continue
            got = {}
            for fn, key in (("results.json", "results"), ("prof.json", "profile")):
                if os.path.isfile(os.path.join(sub, fn)):
                    with open(os.path.join(sub, fn)) as f:
                        got[key] = json.load(f)
            if os.path.isfile(os.path.join(sub, "plans.txt")):
                with open(os.path.join(sub, "plans.txt")) as f:
                    got["cublaslt_plans"] = [l.strip() for l in f if l.strip()]
            if "results" not in got and os.path.isfile(os.path.join(sub, "bench.log")):
                with open(os.path.join(sub, "bench.log")) as f:
                    got["log_tail"] = f.read().splitlines()[-12:]
            call["outputs"][name] = got
        calls.append(call)
    first = json.load(open(os.path.join(dirs[0], "lease.json")))
    doc = {"facts": first.get("facts"), "calls": calls}
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, out)
    print(f"gpu_lease.py merge: {len(calls)} calls -> {out}")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="plan", required=True)
    for p in ("first", "second", "steps"):
        s = sub.add_parser(p)
        if p == "steps":
            s.add_argument("names", help="comma-separated, e.g. 'binaries,test gpu_graphs'")
        s.add_argument("--budget", type=float, default=BUDGETS[p])
        s.add_argument("--out", default=os.environ.get("OUT") or os.path.join(ROOT, "bench/gpu/out"))
    sub.add_parser("list")
    mg = sub.add_parser("merge")
    mg.add_argument("out")
    mg.add_argument("dirs", nargs="+")
    pk = sub.add_parser("pack")
    pk.add_argument("build")
    pk.add_argument("carry")
    a = ap.parse_args(argv)
    if a.plan == "list":
        for name, steps in PLANS.items():
            print(f"{name} (budget {BUDGETS[name]} s): " + ", ".join(f"{s} [{b or 'rest'}]" for s, b in steps))
        return 0
    if a.plan == "merge":
        merge(a.out, a.dirs)
        return 0
    if a.plan == "pack":
        pack(a.build, a.carry)
        return 0
    steps = plan_steps(a)
    if a.plan == "steps" and "binaries" not in [s for s, _ in steps]:
        steps = [("binaries", 240)] + steps  # every test and bench needs the binaries
    lease = Lease(a.out, a.plan, a.budget)
    return 0 if run_plan(lease, steps) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
