#!/usr/bin/env bash
# tests/gpu/lease_record.sh — the GPU lease's record without a GPU (gpu_lease_record; any
# build, seconds): tools/gpu_lease.py in a scratch checkout R (its own git repository: a
# copy of the script, a CMake project whose gpu-labelled tests are a copy of /bin/true and
# a shell line that fails a check, and bench/gpu scripts that write what the real ones write,
# in their real layout: results.json cases and a --profile JSON taken from
# bench/gpu/results-2026-11-26.json, the profile's entries given bytes and floor_ms):
#   (a) the tree: a tracked change and an untracked file are refused by `pack`, naming the
#       path; the source hash ignores untracked and ignored files and follows tracked ones;
#       `pack --dirty` records the diff and a commit carrying it without moving HEAD or the
#       index;
#   (b) `pack` of a clean tree, then a call of steps (the failing test, bench torch, script
#       diag, script cp_modes): $OUT holds lease.json and bundle.tar.gz only (<= 8 files,
#       none deeper than 2 folders), bench torch ran b-16x4096, b-mixed and 1b-1x16384;
#   (c) a call killed by SIGKILL in the middle of a step (as the device tool kills a command
#       at its timeout_s): lease.json names the step as running and the bundle holds the
#       steps before it and that step's log so far;
#   (d) `merge` of both calls: every expected result is in the merged file (the three cases
#       on both sides, the profile, the cuBLASLt plans, cp_modes, the failed check's line,
#       the cut step's log), nothing is reported missing, the report prints "x of floor";
#   (e) the real bench/gpu/diag.sh fails when its program fails (and passes when it writes
#       what it must); the real plans fit the lease (`list --check`: budgets, timeout_s, the
#       device's 15 minutes) and the first call runs bench torch with the three cases.
set -uo pipefail
SRC=${TESSERA_SRC:?}
W=$(mktemp -d "${TMPDIR:-/tmp}/tessera-lease-record.XXXXXX")
KILL_PIDS=()
trap 'for p in "${KILL_PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$W"' EXIT
pass=0 failn=0
ok() { echo "ok: $*"; pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; failn=$((failn + 1)); }
jget() { python3 "$SRC/tests/json_get.py" "$@"; }
for c in git cmake strip python3; do
  command -v $c >/dev/null || { echo "skip: needs $c"; exit 77; }
done
[ -f "$SRC/bench/gpu/results-2026-11-26.json" ] || { echo "FAIL: no bench/gpu/results-2026-11-26.json"; exit 1; }

# ---- the scratch checkout ------------------------------------------------------------------
R=$W/repo
mkdir -p "$R/tools" "$R/tests" "$R/kernels" "$R/bench/gpu" "$R/fixtures"
cp "$SRC/tools/gpu_lease.py" "$SRC/tools/gpu_record.py" "$R/tools/"
cp "$SRC/tests/json_get.py" "$R/tests/"
echo 'int kernel_a(void) { return 1; }' >"$R/kernels/a.c"
printf '/build/\n/bench/gpu/out/\n/.carry/\n__pycache__/\n' >"$R/.gitignore"
cat >"$R/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.16)
project(fake NONE)
enable_testing()
file(COPY /bin/true DESTINATION ${CMAKE_BINARY_DIR}/tests)
add_test(NAME gpu_fake COMMAND ${CMAKE_BINARY_DIR}/tests/true)
add_test(NAME gpu_fails COMMAND sh -c "echo 'FAIL t.cu:9: le == want: 2048 threads: cudaErrorInvalidConfiguration, want cudaErrorInvalidValue' >&2; echo '1 passed, 1 failed'; exit 1")
set_tests_properties(gpu_fake gpu_fails PROPERTIES LABELS gpu)
EOF
# The fixtures: a real results.json case and a real profile, from the last lease's record.
python3 - "$SRC/bench/gpu/results-2026-11-26.json" "$R/fixtures" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
torch = next(c["outputs"]["torch"]["results"] for c in reversed(d["calls"]) if "torch" in c["outputs"])
diag = next(c["outputs"]["diag"] for c in reversed(d["calls"]) if "diag" in c["outputs"])
json.dump(torch, open(sys.argv[2] + "/results.json", "w"))
prof = diag["profile"]
for e in prof["profile"]["entries"]:  # what kernels/profile.c adds: bytes a step, their time
    if e["class"] == "elementwise":  # at 4.8 TB/s: three passes over a 65,536 x 768 bf16 tensor
        e["bytes"] = 3 * 65536 * 768 * 2 * e["calls"]
        e["floor_ms"] = e["bytes"] / 4.8e9
json.dump(prof, open(sys.argv[2] + "/prof.json", "w"))
open(sys.argv[2] + "/plans.txt", "w").write("\n".join(diag["cublaslt_plans"]) + "\n")
PY
# bench/gpu/run.sh: results.json with one case per name in CASES (the real case's fields),
# bench.log, the summary lines; CASES=1b-1x65536 logs a step and then hangs (cut there).
cat >"$R/bench/gpu/run.sh" <<'EOF'
#!/usr/bin/env bash
set -u
cd "$(dirname "$0")/../.."
mkdir -p "$OUT"
echo "bench/gpu/run.sh: cases $CASES" >"$OUT/bench.log"
if [ "$CASES" = 1b-1x65536 ]; then
  echo $$ >"$OUT/../hang.pid"
  echo "bench_train_step: timed step 1: 9.5 s, loss 1.3" >>"$OUT/bench.log"
  sleep 60
fi
python3 - "$CASES" "$OUT" <<'PY'
import json, sys
r = json.load(open("fixtures/results.json"))
case = next(iter(r["cases"].values()))
r["cases"] = {c: case for c in sys.argv[1].split(",")}
json.dump(r, open(sys.argv[2] + "/results.json", "w"))
for c in r["cases"]:
    print(f"{c}: tessera 222 ms; PyTorch 193 ms")
PY
EOF
cat >"$R/bench/gpu/diag.sh" <<'EOF'
#!/usr/bin/env bash
mkdir -p "$OUT" && cp fixtures/prof.json fixtures/plans.txt "$OUT"/ && echo "diag: profile: rc 0"
EOF
cat >"$R/bench/gpu/cp_modes.sh" <<'EOF'
#!/usr/bin/env bash
mkdir -p "$OUT"
echo '[{"ranks": 2, "mode": "ulysses", "rc": 0, "steps": 10, "mean_rel_loss_diff": 1.3e-06}]' >"$OUT/cp_modes.json"
echo "cp_modes: 2 ranks, ulysses: rc 0"
EOF
G=(git -C "$R" -c user.name=t -c user.email=t@t)
"${G[@]}" init -q && "${G[@]}" add -A && "${G[@]}" commit -qm fixture || { echo "FAIL: git init"; exit 1; }
cmake -S "$R" -B "$R/build" >"$W/cmake.log" 2>&1 || { echo "FAIL: cmake: $(tail -5 "$W/cmake.log")"; exit 1; }
L=(python3 "$R/tools/gpu_lease.py")
hash_of() { python3 -c "import sys; sys.path.insert(0, '$R/tools'); import gpu_lease as g; print(g.source_hash('$R', g.source_files('$R')))"; }

# ---- (a) the tree --------------------------------------------------------------------------
h0=$(hash_of)
mkdir -p "$R/bench/gpu/out" && echo "an ignored note" >"$R/bench/gpu/out/notes.txt"
echo 'int untracked(void);' >"$R/kernels/new.c"
[ "$(hash_of)" = "$h0" ] && ok "(a) untracked kernels/new.c and ignored bench/gpu/out/notes.txt leave the hash" ||
  bad "(a) the hash followed an untracked or ignored file"
if out=$("${L[@]}" pack "$R/build" "$W/carry-u" 2>&1); then bad "(a) pack took a tree with an untracked file"
elif grep -q "kernels/new.c" <<<"$out" && [ ! -f "$W/carry-u/manifest.json" ]; then
  ok "(a) an untracked file: pack refused, naming it"
else bad "(a) untracked: $out"; fi
rm "$R/kernels/new.c"
echo '// changed' >>"$R/kernels/a.c"
if out=$("${L[@]}" pack "$R/build" "$W/carry-d" 2>&1); then bad "(a) pack took a modified tree"
elif grep -q "kernels/a.c" <<<"$out" && grep -q "uncommitted" <<<"$out"; then
  ok "(a) a tracked change: pack refused, naming it"
else bad "(a) modified: $out"; fi
head=$("${G[@]}" rev-parse HEAD)
if "${L[@]}" pack "$R/build" "$W/carry-d" --dirty >/dev/null 2>&1; then
  tc=$(jget "$W/carry-d/manifest.json" tree_commit)
  if [ "$(jget "$W/carry-d/manifest.json" dirty)" = true ] && [ "$tc" != "$head" ] &&
     [ "$("${G[@]}" rev-parse HEAD)" = "$head" ] && [ -z "$("${G[@]}" diff --cached --name-only)" ] &&
     "${G[@]}" show "$tc:kernels/a.c" | grep -q changed && grep -q '^+// changed' "$W/carry-d/diff.patch" &&
     [ "$("${G[@]}" rev-parse "refs/lease/$tc")" = "$tc" ] &&
     [ "$(jget "$W/carry-d/manifest.json" source_hash)" != "$h0" ]; then
    ok "(a) pack --dirty: the diff and commit ${tc:0:12} recorded (HEAD and index unmoved, hash changed)"
  else bad "(a) --dirty manifest: $(head -c 400 "$W/carry-d/manifest.json")"; fi
else bad "(a) pack --dirty failed"; fi
"${G[@]}" checkout -q kernels/a.c
[ "$(hash_of)" = "$h0" ] && ok "(a) the tree restored: the hash is the clean one again" || bad "(a) hash after restore"

# ---- (b) a call ----------------------------------------------------------------------------
export TESSERA_CARRY=$W/carry
if out=$("${L[@]}" pack "$R/build" "$W/carry" 2>&1) && [ "$(jget "$W/carry/manifest.json" dirty)" = false ]; then
  ok "(b) pack of the clean tree: $out"
else bad "(b) pack: $out"; fi
"${L[@]}" steps 'test gpu_fake,test gpu_fails,bench torch,script diag,script cp_modes' \
  --out "$W/out1" --budget 60 >"$W/call1.log" 2>&1
rc=$?
files=$(cd "$W/out1" && find . -type f | sort | tr '\n' ' ')
deep=$(cd "$W/out1" && find . -mindepth 4 | wc -l)
if [ "$files" = "./bundle.tar.gz ./lease.json " ] && [ "$deep" -eq 0 ]; then
  ok "(b) OUT holds $files(<= 8 files, none deeper than 2 folders)"
else bad "(b) OUT holds: $files($deep too deep)"; fi
st() { jget "$W/out1/lease.json" "steps.$1.status" ""; }
if [ "$(jget "$W/out1/lease.json" binaries.carried "")" = used ] && [ "$(st 1)" = passed ] &&
   [ "$(st 2)" = failed ] && [ "$(st 3)" = passed ] && [ "$(st 4)" = passed ] && [ "$(st 5)" = passed ] && [ $rc -eq 1 ]; then
  ok "(b) the carried binaries used; gpu_fake passed, gpu_fails failed, the benchmark and scripts passed; exit 1"
else bad "(b) statuses '$(st 0)' '$(st 1)' '$(st 2)' '$(st 3)' '$(st 4)' '$(st 5)', exit $rc: $(tail -5 "$W/call1.log")"; fi
jget "$W/out1/lease.json" steps.2.failures.0 "" | grep -q "cudaErrorInvalidConfiguration, want cudaErrorInvalidValue" &&
  ok "(b) the failed check's own line is in lease.json" || bad "(b) no failure line: $(jget "$W/out1/lease.json" steps.2 "")"

# ---- (c) a call killed in a step -----------------------------------------------------------
TESSERA_LEASE_AUTOSAVE=0.5 "${L[@]}" steps 'test gpu_fake,bench long' --out "$W/out2" \
  --work "$W/work2" --budget 100 >"$W/call2.log" 2>&1 &
lp=$!
KILL_PIDS+=("$lp")
for _ in $(seq 600); do
  [ -f "$W/work2/hang.pid" ] && break
  sleep 0.1
done
# the kill lands after the step's log is in an autosaved bundle (waited for: a loaded
# machine delays the autosaves of 0.5 s), during the autosaves that follow
for _ in $(seq 600); do
  tar -xzOf "$W/out2/bundle.tar.gz" long/bench.log 2>/dev/null | grep -q "timed step 1" && break
  sleep 0.1
done
sleep 1.5  # > 2 more autosaves inside the hanging step
kill -9 "$lp" 2>/dev/null
[ -f "$W/work2/hang.pid" ] && { KILL_PIDS+=("$(cat "$W/work2/hang.pid")"); kill -9 "$(cat "$W/work2/hang.pid")" 2>/dev/null; }
wait "$lp" 2>/dev/null
if [ "$(jget "$W/out2/lease.json" steps.2.step "")" = "bench long" ] &&
   [ "$(jget "$W/out2/lease.json" steps.2.status "")" = running ] &&
   [ "$(jget "$W/out2/lease.json" steps.1.status "")" = passed ] &&
   tar -xzOf "$W/out2/bundle.tar.gz" long/bench.log 2>/dev/null | grep -q "timed step 1"; then
  ok "(c) killed in bench long: lease.json says running, the bundle has its log so far"
else bad "(c) killed call: $(cat "$W/out2/lease.json" 2>/dev/null | head -c 600)"; fi

# ---- (d) merge -----------------------------------------------------------------------------
"${L[@]}" merge "$W/m.json" "$W/out1" "$W/out2" >"$W/merge.log" 2>&1
rc=$?
# One python for the merged file's checks (each a line: ok or what is wrong).
python3 - "$W/m.json" >"$W/mcheck.txt" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
c0, c1 = d["calls"]
cases = c0["outputs"]["torch"]["results"]["cases"]
want = ["b-16x4096", "b-mixed", "1b-1x16384"]
print("cases ok" if all(cases.get(c, {}).get(s, {}).get("median_s") for c in want
                        for s in ("tessera", "pytorch")) else f"cases {sorted(cases)}")
checks = {
    "profile": bool(c0["outputs"]["diag"].get("profile", {}).get("profile", {}).get("step_ms")),
    "plans": bool(c0["outputs"]["diag"].get("cublaslt_plans")),
    "cp_modes": (c0["outputs"].get("cp_modes", {}).get("cp_modes") or [{}])[0].get("mode") == "ulysses",
    "failure": "want cudaErrorInvalidValue" in " ".join(c0["steps"][2].get("failures", [])),
    "cut log": "timed step 1" in " ".join(c1["outputs"].get("long", {}).get("log_tail", [])),
    "files": c0["files"] == ["bundle.tar.gz", "lease.json"],
    "missing": c0["missing"] == [] and c1["missing"] == [],
}
print("rest ok" if all(checks.values()) else "wrong: " + ", ".join(k for k, v in checks.items() if not v))
PY
grep -qx "cases ok" "$W/mcheck.txt" && ok "(d) bench torch: b-16x4096, b-mixed and 1b-1x16384, tessera and PyTorch" ||
  bad "(d) torch cases: $(cat "$W/mcheck.txt")"
if grep -qx "rest ok" "$W/mcheck.txt" && [ $rc -eq 0 ]; then
  ok "(d) merge: the profile, plans, cp_modes, the failed check, the cut step's log; nothing missing"
else bad "(d) merge (exit $rc): $(cat "$W/mcheck.txt"; tail -5 "$W/merge.log")"; fi
n=$(grep -c "x of floor" "$W/merge.log")
grep -q "layernorm_modulate_backward.*x of floor" "$W/merge.log" && [ "$n" -ge 5 ] &&
  ok "(d) the report prints x of floor for the $n entries that carry floor_ms" ||
  bad "(d) report: $(grep -m3 profile -A3 "$W/merge.log")"
rm "$W/out1/bundle.tar.gz"
"${L[@]}" merge "$W/m2.json" "$W/out1" >"$W/merge2.log" 2>&1 && bad "(d) merge without the bundle passed" ||
  { grep -q "MISSING bench torch: results" "$W/merge2.log" && ok "(d) a lost bundle: merge names what is missing, exit 1" ||
    bad "(d) lost bundle: $(tail -3 "$W/merge2.log")"; }

# ---- (e) the real diag.sh and plans --------------------------------------------------------
F=$W/fakebuild
mkdir -p "$F/bench"
printf '#!/bin/sh\necho "bench_train_step: no device" >&2\nexit 3\n' >"$F/bench/bench_train_step"
chmod +x "$F/bench/bench_train_step"
out=$(BUILD_DIR=$F OUT=$W/diag1 bash "$SRC/bench/gpu/diag.sh" 2>&1)
rc=$?
[ $rc -ne 0 ] && grep -q "^FAIL diag: the plan-logging step exited 3" <<<"$out" && grep -q "^FAIL diag: the profiled run exited 3" <<<"$out" &&
  ok "(e) diag.sh: a failing program fails the script (exit $rc), both runs named" || bad "(e) diag.sh exit $rc: $out"
cat >"$F/bench/bench_train_step" <<EOF
#!/bin/sh
case "\$*" in
  *--profile*) cp "$R/fixtures/prof.json" "\$(echo "\$*" | sed 's/.*--json \([^ ]*\).*/\1/')" ;;
  *) echo "cuBLASLt plan 1 for linear_forward: m 65536 n 768 k 768: cuBLASLt algorithm" ;;
esac
EOF
out=$(BUILD_DIR=$F OUT=$W/diag2 bash "$SRC/bench/gpu/diag.sh" 2>&1)
rc=$?
[ $rc -eq 0 ] && [ -s "$W/diag2/plans.txt" ] && [ -s "$W/diag2/prof.json" ] &&
  ok "(e) diag.sh: a program that writes its plans and profile passes" || bad "(e) diag.sh good run exit $rc: $out"
if out=$(python3 "$SRC/tools/gpu_lease.py" list --check 2>&1); then
  ok "(e) the plans fit: $(grep -o '^first (budget[^)]*)' <<<"$out"); $(grep -o '^second (budget[^)]*)' <<<"$out")"
else bad "(e) list --check: $(grep 'does not fit' <<<"$out")"; fi
python3 - "$SRC/tools" <<'PY' && ok "(e) the first call runs bench torch with b-16x4096, b-mixed, 1b-1x16384 (both sides)" || bad "(e) bench torch is not in the first call with its cases"
import sys
sys.path.insert(0, sys.argv[1])
import gpu_lease as g
first = [s for s, _, _ in g.PLANS["first"]]
b = g.BENCHES["torch"]
sys.exit(not ("bench torch" in first and b.get("TORCH", "1") == "1" and
              set(b["CASES"].split(",")) >= {"b-16x4096", "b-mixed", "1b-1x16384"}))
PY

echo "$pass passed, $failn failed"
[ $failn -eq 0 ]
