#!/usr/bin/env python3
"""tools/gpu_lease.py — spends a short GPU lease on the facts that matter most (docs/gpu.md).

  python3 tools/gpu_lease.py first  [--budget S] [--out DIR]   on the GPU machine, call 1
  python3 tools/gpu_lease.py second [--budget S] [--out DIR]   call 2
  python3 tools/gpu_lease.py steps NAME[,NAME...] [...]        a rerun of chosen steps
  python3 tools/gpu_lease.py list                              the plans, boxes, expected times
  python3 tools/gpu_lease.py tree [--dirty]                    here: is the tree clean (exit 1 if not)
  python3 tools/gpu_lease.py pack BUILD_DIR CARRY_DIR [--dirty] here (tools/gpu_prepare.sh)
  python3 tools/gpu_lease.py merge OUT.json DIR [DIR...]       here: the calls' $OUT folders
                                                               as bench/gpu/results-DATE.json

A plan is a list of steps in order of value, each with a time box: machine facts, the
binaries' check, then GPU tests (run from the ctest definitions that `pack` recorded, or
from a build made there), then benchmarks. The device tool brings back at most 8 files a
call, so the steps write into a work folder outside OUT and OUT holds two files only:
lease.json (the record) and bundle.tar.gz (the work folder: lease.log, build.log, each
benchmark's and script's folder), both rewritten atomically after every step and every
AUTOSAVE_S seconds inside one, so a call cut at its limit still returns what ran. A step
that would not fit in what is left of the budget is recorded as not run. Exit 0 when every
step that ran passed or was skipped, else 1.

`pack` refuses a tree with uncommitted changes (figures count only with the clean commit they
ran on); with --dirty it records the diff and a commit that carries it (refs/lease/...). It
copies the executables that the GPU tests name (stripped of debug sections) into
CARRY_DIR/build/ under their build-tree paths, writes CARRY_DIR/tests.json (the tests of
label gpu, paths as @BUILD@ and @SRC@) and CARRY_DIR/manifest.json (commit, the tracked
source files and their hash, build settings). On the GPU machine `binaries` uses them when
those files there hash the same and `ldd` finds every library; otherwise it builds there
(tools/gpu_build.sh).
"""
import argparse
import hashlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the tree whose cleanliness pack checks
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_record import BUNDLE, merge  # noqa: E402  (the record's reading: here, after a lease)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CARRY = os.environ.get("TESSERA_CARRY") or os.path.join(ROOT, ".carry", "gpu")  # tests set it
PIP = os.environ.get("TESSERA_NVIDIA_PIP", "/opt/torch/.venv/lib/python3.12/site-packages/nvidia")
NATIVE_BUILD = "build-gpu"  # made there when the carried binaries cannot run
SOURCE_DIRS = ("CMakeLists.txt", "cmake", "core", "comm", "kernels", "model", "store", "ingest",
               "sched", "tools", "bench", "tests")
SOURCE_EXT = (".c", ".h", ".cu", ".cpp", ".txt", ".cmake", ".py")
FILE_LIMIT = 15 << 20     # a bundle stays under the tool's 16 MiB a file
LOG_CAP = 4 << 20         # a larger file goes into the bundle as its last LOG_CAP bytes
AUTOSAVE_S = float(os.environ.get("TESSERA_LEASE_AUTOSAVE", 20))  # rewrites inside a step, s

# Plans: (step, time box s, expected s). Steps: facts, binaries, "test NAME" (a ctest test
# of label gpu), "bench NAME" (BENCHES), "script NAME" (bench/gpu/NAME.sh). A box of 0 is
# whatever is left. The expected seconds are what the step took in the lease of 2026-11-26
# (bench/gpu/results-2026-11-26.json), or an estimate where it did not run so: the plan must
# fit its budget on them (tests/gpu/lease_record.sh checks it), the boxes stop a hang.
# The binaries box is the build there, needed only when the carried binaries cannot run.
PLANS = {
    "first": [("facts", 15, 5), ("binaries", 150, 1), ("test gpu_probe", 15, 1),
              ("test gpu_cuda_semantics", 15, 1), ("test gpu_backend_ops", 30, 5),
              # estimate: b-16x4096 alone took 68 s (PyTorch's compile most of it); dit-1b's
              # PyTorch side was still compiling after 50 s (second call of 2026-11-26)
              ("bench torch", 240, 220),
              ("test gpu_backend_ops_cudnn_atomic", 20, 3), ("test gpu_backend_ops_cudnn", 20, 5),
              ("test gpu_backend_ops_own", 20, 2), ("test gpu_arena", 10, 1),
              ("test gpu_arena_shared", 10, 1), ("test gpu_cuda_no_device", 10, 1),
              ("test gpu_graphs", 20, 3), ("script diag", 45, 31)],
    "second": [("facts", 15, 3), ("binaries", 150, 1), ("test gpu_memory", 20, 5),
               ("test gpu_comm", 20, 6), ("test gpu_backend_ops_memcheck", 30, 5),
               ("test gpu_mask", 15, 5), ("test gpu_mask_cudnn", 15, 5),  # estimates: never ran
               ("test gpu_train", 90, 68), ("bench torch-64", 70, 55),  # estimate
               ("bench long", 60, 40),  # estimate: 43.5 s a step before the bias fix
               ("script cp_modes", 0, 40)],  # estimate: never ran
}
# Budgets sit 30 s under the calls' timeout_s (docs/gpu.md, TIMEOUTS): python's start, the
# last bundle and the kill of a step cut at its box fit in that.
BUDGETS = {"first": 330, "second": 240, "steps": 90}
TIMEOUTS = {"first": 360, "second": 270, "steps": 120}
# bench/gpu/run.sh runs: name -> environment (results.json and bench.log in WORK/NAME).
BENCHES = {
    "torch": {"MEM": "0", "WARMUP": "2", "STEPS": "6", "CASE_TIMEOUT": "110",
              "CASES": "b-16x4096,b-mixed,1b-1x16384"},
    "torch-64": {"MEM": "0", "WARMUP": "2", "STEPS": "6", "CASE_TIMEOUT": "60", "CASES": "b-64x1024"},
    "tessera": {"TORCH": "0", "MEM": "0", "WARMUP": "2", "STEPS": "5",
                "CASES": "b-16x4096,b-64x1024,b-mixed,1b-4x4096,1b-1x16384,b-1x65536"},
    "long": {"TORCH": "0", "MEM": "0", "WARMUP": "0", "STEPS": "2", "CASES": "1b-1x65536",
             "RECOMPUTE_1B_LONG": "2"},
    "memory": {"TORCH": "0", "CASES": "none", "MEM_CASES": "16384:0,16384:2,65536:2"},
}
MIN_STEP_S = 10  # a step with less time than this left is not started
FAIL_LINE = re.compile(r"^\s*(FAIL|FAILED)\b")  # a failed check (tests/check.h, the .sh tests)


# ---- sources and binaries (both machines) ---------------------------------------------
def git(root, *args, env=None):
    r = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, env=env)
    if r.returncode:
        raise RuntimeError(f"git {' '.join(args)}: {r.stderr.strip()}")
    return r.stdout


def is_source(rel):
    return rel in SOURCE_DIRS or (rel.split("/", 1)[0] in SOURCE_DIRS and rel.endswith(SOURCE_EXT))


def source_files(root, commit="HEAD"):
    """The files of commit that the build reads (SOURCE_DIRS, SOURCE_EXT), sorted: tracked
    files only, so that an ignored or untracked file (bench/gpu/out/*.txt) changes nothing."""
    names = git(root, "ls-tree", "-r", "--name-only", "-z", commit, "--", *SOURCE_DIRS)
    return sorted(n for n in names.split("\0") if n and is_source(n))


def source_hash(root, files):
    """sha256 over the path and bytes of each of files (relative to root), so that binaries
    built from one tree are known to match another copy of it (the GPU machine has no .git:
    pack records the list). A missing file hashes as such, so the hashes differ."""
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(rel.encode() + b"\0")
        try:
            with open(os.path.join(root, rel), "rb") as f:
                h.update(f.read())
        except OSError:
            h.update(b"\1missing")
        h.update(b"\0")
    return h.hexdigest()


def tree_state(root):
    """What git says is not committed: modified, staged, deleted and untracked-not-ignored
    paths (`git status --porcelain`), one line each; empty for a clean tree."""
    return [l for l in git(root, "status", "--porcelain").splitlines() if l.strip()]


def commit_of_tree(root):
    """A commit holding the working tree as it is (tracked changes and untracked files that
    git does not ignore) on top of HEAD, made through a scratch index so that neither the
    branch nor the index moves, and kept by a ref refs/lease/<sha> (git gc keeps it)."""
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, GIT_INDEX_FILE=os.path.join(d, "index"))
        git(root, "read-tree", "HEAD", env=env)
        git(root, "add", "-A", env=env)
        tree = git(root, "write-tree", env=env).strip()
    c = git(root, "commit-tree", tree, "-p", "HEAD", "-m",
            "GPU lease: the uncommitted tree its binaries were built from").strip()
    git(root, "update-ref", f"refs/lease/{c}", c)
    return c


def check_tree(root, dirty_ok):
    """(commit, tree_commit, dirty lines, diff): refuses (SystemExit) a tree with uncommitted
    changes unless dirty_ok; then the diff against HEAD and a commit carrying it."""
    head = git(root, "rev-parse", "HEAD").strip()
    dirty = tree_state(root)
    if not dirty:
        return head, head, [], ""
    if not dirty_ok:
        raise SystemExit("gpu_lease.py: the tree has uncommitted changes, and figures count only "
                         "with the clean commit they ran on: commit them (or pass --dirty to "
                         "record the diff and a commit carrying it):\n  " + "\n  ".join(dirty[:20]))
    tree_commit = commit_of_tree(root)
    return head, tree_commit, dirty, git(root, "diff", "--binary", "HEAD", tree_commit)


def ctest_tests(build):
    """The tests of label gpu as `ctest --show-only=json-v1` describes them."""
    out = subprocess.run(["ctest", "-L", "gpu", "--show-only=json-v1"], cwd=build,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)["tests"]


def pack(build, carry, dirty_ok=False):
    build, carry = os.path.abspath(build), os.path.abspath(carry)
    commit, tree_commit, dirty, diff = check_tree(ROOT, dirty_ok)
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
    files = source_files(ROOT, tree_commit)
    patch = os.path.join(carry, "diff.patch")
    if diff:
        with open(patch, "w") as f:
            f.write(diff)
    elif os.path.exists(patch):
        os.remove(patch)
    manifest = {"commit": commit, "dirty": bool(dirty), "tree_commit": tree_commit,
                "dirty_paths": dirty, "diff_sha256": hashlib.sha256(diff.encode()).hexdigest()
                if diff else "", "source_hash": source_hash(ROOT, files), "files": files,
                "packed": now(), "binaries": [os.path.relpath(p, build) for p in exes],
                "cmake": cache}
    with open(os.path.join(carry, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    size = sum(os.path.getsize(os.path.join(carry, "build", b)) for b in manifest["binaries"])
    print(f"gpu_lease.py pack: {len(exes)} executables ({size / 2**20:.1f} MiB), "
          f"{len(tests)} tests, {len(files)} source files hashed {manifest['source_hash'][:12]}, "
          f"commit {commit[:12]}" + (f" + diff of {len(dirty)} paths (commit {tree_commit[:12]})"
                                     if dirty else " (clean)") + f" -> {carry}")


def now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# ---- the lease's record ------------------------------------------------------------------
class Lease:
    """The budget, the work folder (lease.log, build.log, NAME/ of each benchmark and
    script) and OUT, which holds only lease.json and the work folder's bundle."""

    def __init__(self, out, plan, budget, work=None):
        self.out, self.deadline = out, time.monotonic() + budget
        os.makedirs(out, exist_ok=True)
        self.work = work or tempfile.mkdtemp(prefix=f"tessera-lease-{plan}-")
        os.makedirs(self.work, exist_ok=True)
        self.log = open(os.path.join(self.work, "lease.log"), "a")
        self.rec = {"plan": plan, "started": now(), "budget_s": budget, "bundle": BUNDLE,
                    "steps": []}
        self.build = self.tests = None
        self.env = run_env()
        self.lock = threading.Lock()
        self.stop = threading.Event()
        threading.Thread(target=self.autosave, daemon=True).start()

    def left(self):
        return self.deadline - time.monotonic()

    def save(self):
        """lease.json into OUT and the work folder, then the bundle: each written to a
        temporary name and renamed, so OUT always holds a whole record."""
        with self.lock:
            self.log.flush()
            text = json.dumps(self.rec, indent=1)
            for d in (self.work, self.out):
                tmp = os.path.join(d, "lease.json.tmp")
                with open(tmp, "w") as f:
                    f.write(text)
                os.replace(tmp, os.path.join(d, "lease.json"))
            write_bundle(self.work, os.path.join(self.out, BUNDLE))

    def autosave(self):
        while not self.stop.wait(AUTOSAVE_S):
            try:
                self.save()
            except OSError:
                pass  # the next save or the step's end tries again

    def say(self, line):
        print(line, flush=True)
        self.log.write(line + "\n")
        self.log.flush()


def write_bundle(work, path):
    """work/ as a gzipped tar at path (each file larger than LOG_CAP as its last LOG_CAP
    bytes, marked); a bundle over FILE_LIMIT is written again with a tenth of the cap."""
    cap = LOG_CAP
    while True:
        tmp = path + ".tmp"
        with tarfile.open(tmp, "w:gz") as tar:
            for d, subdirs, names in os.walk(work):
                subdirs.sort()
                for n in sorted(names):
                    full = os.path.join(d, n)
                    rel = os.path.relpath(full, work)
                    if n.endswith(".tmp") or not os.path.isfile(full):
                        continue
                    size = os.path.getsize(full)
                    if size <= cap:
                        tar.add(full, arcname=rel, recursive=False)
                        continue
                    with open(full, "rb") as f:
                        f.seek(size - cap)
                        data = f"[the first {size - cap} bytes of {rel} left out]\n".encode() + f.read()
                    info = tarfile.TarInfo(rel)
                    info.size, info.mtime = len(data), int(time.time())
                    tar.addfile(info, io.BytesIO(data))
        if os.path.getsize(tmp) <= FILE_LIMIT or cap < 4096:
            os.replace(tmp, path)
            return
        cap //= 10


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
    it timed out, seconds, the last 20 lines, the first 20 lines of failed checks)."""
    sink = open(log, "a") if log else lease.log
    t0 = time.monotonic()
    tail, fails = [], []
    try:
        p = subprocess.Popen(cmd, cwd=cwd, env=env or lease.env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, errors="replace",
                             start_new_session=True)
    except OSError as e:
        return 127, 0.0, [f"cannot run {cmd[0]}: {e.strerror}"], []
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
        if len(fails) < 20 and FAIL_LINE.match(line):
            fails.append(line.strip()[:300])
    p.wait()
    timer.cancel()
    if log:
        sink.close()
    return (None if timer_fired else p.returncode), time.monotonic() - t0, tail, fails


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


def walked_sources(root):
    """Without git and without a manifest (a build there from nothing): the files under
    SOURCE_DIRS that the build reads, skipping hidden, build and output folders."""
    files = []
    for top in SOURCE_DIRS:
        p = os.path.join(root, top)
        if os.path.isfile(p):
            files.append(top)
        for d, subdirs, names in os.walk(p):
            subdirs[:] = sorted(s for s in subdirs if not s.startswith((".", "build", "out")))
            files += [os.path.relpath(os.path.join(d, n), root) for n in names if n.endswith(SOURCE_EXT)]
    return files


def step_binaries(lease, box):
    man = {}
    info = {}
    lease.rec["binaries"] = info
    try:
        with open(os.path.join(CARRY, "manifest.json")) as f:
            man = json.load(f)
    except (OSError, ValueError):
        info["carried"] = "none (.carry/gpu/manifest.json missing: run tools/gpu_prepare.sh)"
    files = man.get("files") or walked_sources(ROOT)
    here = source_hash(ROOT, files)
    info["source_hash"] = here
    lease.rec["commit"] = man.get("commit", "")
    if man:
        build = os.path.join(CARRY, "build")
        bad = missing_libraries(lease, [os.path.join(build, b) for b in man["binaries"]])
        info.update({k: man.get(k) for k in ("commit", "dirty", "tree_commit", "dirty_paths",
                                             "diff_sha256")},
                    carried_hash=man["source_hash"], missing=bad,
                    missing_files=[f for f in files if not os.path.isfile(os.path.join(ROOT, f))][:20])
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
        lease.say(f"binaries: building {NATIVE_BUILD} here (log: build.log in the bundle)")
        rc, secs, tail, _ = run_boxed(lease, ["bash", "tools/gpu_build.sh", NATIVE_BUILD], box,
                                      log=os.path.join(lease.work, "build.log"))
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
    rc, secs, tail, fails = run_boxed(lease, t["command"], box, env=env, cwd=cwd)
    skip = int(props.get("SKIP_RETURN_CODE", 77))
    status = "timeout" if rc is None else "passed" if rc == 0 else "skipped" if rc == skip else "failed"
    return status, summary_line(tail, rc), fails


def summary_line(tail, rc):
    counts = [l for l in tail if re.search(r"\d+ passed, \d+ failed", l)]
    return (counts[-1] if counts else (tail[-1] if tail else "")) + (
        "" if rc is not None else " (cut at its time box)")


def step_bench(lease, name, box):
    if lease.build is None:
        return "not run", "no binaries (the binaries step failed)"
    env = dict(lease.env)
    env.update({"CASE_TIMEOUT": str(max(30, int(box)))}, **BENCHES[name])
    env.update(OUT=os.path.join(lease.work, name), BUILD_DIR=lease.build,
               TESSERA_COMMIT=lease.rec.get("commit") or "unknown",
               TESSERA_DIRTY={True: "true", False: "false"}.get(
                   (lease.rec.get("binaries") or {}).get("dirty"), "unknown"))
    rc, secs, tail, fails = run_boxed(lease, ["bash", "bench/gpu/run.sh"], box, env=env)
    status = "timeout" if rc is None else "passed" if rc == 0 else "skipped" if rc == 3 else "failed"
    cases = [l for l in tail if re.match(r"[\w-]+: tessera ", l)]
    return status, " | ".join(cases) or summary_line(tail, rc), fails


def step_script(lease, name, box):
    """bench/gpu/NAME.sh with BUILD_DIR and OUT=WORK/NAME: a diagnosis whose output is data;
    its exit status is the step's (the script's own commands' statuses, not a pipe's)."""
    if lease.build is None:
        return "not run", "no binaries (the binaries step failed)"
    path = os.path.join("bench", "gpu", name + ".sh")
    if not re.fullmatch(r"[\w-]+", name) or not os.path.isfile(os.path.join(ROOT, path)):
        return "not run", f"no script {path}"
    env = dict(lease.env)
    env.update(OUT=os.path.join(lease.work, name), BUILD_DIR=lease.build)
    rc, secs, tail, fails = run_boxed(lease, ["bash", path], box, env=env)
    status = "timeout" if rc is None else "passed" if rc == 0 else "failed"
    return status, summary_line(tail, rc), fails


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
    """steps: [(name, box s)]. Each entry is recorded as running before it starts, so a call
    cut by the device tool shows which step it was in."""
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
        entry.update(status="running", started=now())
        lease.save()
        t0 = time.monotonic()
        try:
            status, summary, *more = run_step(lease, step, b)
        except Exception as e:  # a bug of this script must not lose the record so far
            status, summary, more = "failed", f"{type(e).__name__}: {e}", []
        entry.update(status=status, seconds=round(time.monotonic() - t0, 1), summary=summary)
        if more and more[0]:
            entry["failures"] = more[0]
        ok = ok and status in ("passed", "skipped")
        lease.say(f"== {step}: {status} in {entry['seconds']} s: {summary}")
        for line in entry.get("failures", []):
            lease.say(f"   {line}")
        lease.save()
    lease.rec["finished"] = now()
    lease.stop.set()
    lease.save()
    return ok


def plan_steps(args):
    if args.plan == "steps":
        known = {s: b for p in PLANS.values() for s, b, _ in p}
        names = [n.strip() for n in args.names.split(",") if n.strip()]
        steps = [(n, known.get(n, 0)) for n in names]
        if "binaries" not in names:
            steps = [("binaries", known["binaries"])] + steps  # every test and bench needs them
        return steps
    return [(s, b) for s, b, _ in PLANS[args.plan]]


# The device's 15 minutes (docs/gpu.md, "The GPU lease"): the machine's start, the first
# call, the warm window before the second, the second, the window, one rerun.
DEVICE_S, START_S, WARM_S = 900, 90, 30
CALL_LIMITS = {"first": 360, "second": 300, "steps": 120}  # issue 38: 6, 5 and 2 minutes


def plan_problems():
    """Why the plans would not fit the lease (empty when they do): each call's expected
    seconds within its budget, the budget 30 s under its timeout_s, each timeout_s within
    its limit, and start + calls + warm windows within the device time."""
    bad = []
    for name, steps in PLANS.items():
        exp = sum(e for _, _, e in steps)
        if exp > BUDGETS[name]:
            bad.append(f"{name}: expected {exp} s over its budget {BUDGETS[name]} s")
    for name, t in TIMEOUTS.items():
        if BUDGETS[name] + 30 > t:
            bad.append(f"{name}: budget {BUDGETS[name]} s leaves under 30 s of its timeout_s {t}")
        if t > CALL_LIMITS[name]:
            bad.append(f"{name}: timeout_s {t} over its limit {CALL_LIMITS[name]} s")
    total = START_S + sum(TIMEOUTS.values()) + 2 * WARM_S
    if total > DEVICE_S:
        bad.append(f"start {START_S} + calls {sum(TIMEOUTS.values())} + windows {2 * WARM_S} = "
                   f"{total} s over the device's {DEVICE_S} s")
    return bad


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="plan", required=True)
    for p in ("first", "second", "steps"):
        s = sub.add_parser(p)
        if p == "steps":
            s.add_argument("names", help="comma-separated, e.g. 'binaries,test gpu_graphs'")
        s.add_argument("--budget", type=float, default=BUDGETS[p])
        s.add_argument("--out", default=os.environ.get("OUT") or os.path.join(ROOT, "bench/gpu/out"))
        s.add_argument("--work", help="the steps' folder (default: a new one in TMPDIR)")
    ls = sub.add_parser("list")
    ls.add_argument("--check", action="store_true", help="exit 1 when the plans do not fit")
    mg = sub.add_parser("merge")
    mg.add_argument("out")
    mg.add_argument("dirs", nargs="+")
    pk = sub.add_parser("pack")
    pk.add_argument("build")
    pk.add_argument("carry")
    pk.add_argument("--dirty", action="store_true", help="record the diff instead of refusing")
    tr = sub.add_parser("tree")
    tr.add_argument("--dirty", action="store_true")
    a = ap.parse_args(argv)
    if a.plan == "list":
        for name, steps in PLANS.items():
            print(f"{name} (budget {BUDGETS[name]} s, timeout_s {TIMEOUTS[name]}, expected "
                  f"{sum(e for _, _, e in steps)} s): " +
                  ", ".join(f"{s} [{b or 'rest'}, ~{e}]" for s, b, e in steps))
        bad = plan_problems()
        for line in bad:
            print("does not fit: " + line)
        return 1 if a.check and bad else 0
    if a.plan == "merge":
        return merge(a.out, a.dirs)
    if a.plan == "pack":
        pack(a.build, a.carry, a.dirty)
        return 0
    if a.plan == "tree":
        commit, tree_commit, dirty, _ = check_tree(ROOT, a.dirty)
        print(f"gpu_lease.py tree: commit {commit[:12]}, " +
              (f"{len(dirty)} uncommitted paths, carried by {tree_commit[:12]}" if dirty else "clean"))
        return 0
    lease = Lease(a.out, a.plan, a.budget, a.work)
    ok = run_plan(lease, plan_steps(a))
    if not a.work:  # a folder of our own: the bundle in OUT holds all of it
        shutil.rmtree(lease.work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
