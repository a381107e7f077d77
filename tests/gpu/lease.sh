#!/usr/bin/env bash
# tests/gpu/lease.sh BUILD_DIR — tools/gpu_lease.py on the emulated device (label emu; CI):
#   (a) `pack` of this build: the GPU tests' executables, tests.json with @BUILD@/@SRC@,
#       a manifest whose source hash is this tree's;
#   (b) a plan of steps against the packed binaries: `binaries` uses them (same hash, ldd
#       finds everything), gpu_probe and gpu_arena pass on the emulated device from their
#       packed copies, an unknown test is recorded as not run, lease.json lists every step
#       and the bundle's lease.log holds the tests' own output;
#   (c) a step longer than what is left of the budget is cut at its box (status timeout,
#       in about the box's time) and the record is still written; a budget below the
#       smallest step runs nothing and says so;
#   (d) `merge` of the calls' folders of (b) and (c): one file with the facts and each
#       call's plan and steps in order; a `script` step with no such script is not run.
# `pack` refuses a tree with uncommitted changes: on such a tree the test is skipped (77)
# and says so (tests/gpu/lease_record.sh checks the refusal on a scratch repository).
set -uo pipefail
B=${1:?usage: lease.sh BUILD_DIR}
SRC=${TESSERA_SRC:?}
W=$(mktemp -d "${TMPDIR:-/tmp}/tessera-lease.XXXXXX")
trap 'rm -rf "$W"' EXIT
pass=0 failn=0
ok() { echo "ok: $*"; pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; failn=$((failn + 1)); }
jget() { python3 "$SRC/tests/json_get.py" "$@"; }
export TESSERA_CARRY=$W/carry
L=(python3 "$SRC/tools/gpu_lease.py")
if ! tree=$("${L[@]}" tree 2>&1); then
  echo "skip: the tree has uncommitted changes, which pack refuses; commit them: $tree"
  exit 77
fi

# (a)
if out=$("${L[@]}" pack "$B" "$W/carry" 2>&1); then
  n=$(jget "$W/carry/manifest.json" binaries | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
  if [ -x "$W/carry/build/tests/gpu_probe" ] && grep -q '@BUILD@/tests/gpu_probe' "$W/carry/tests.json" &&
     ! grep -q "$B" "$W/carry/tests.json" && [ "$n" -ge 5 ]; then
    ok "(a) pack: $out"
  else bad "(a) pack left $n binaries; tests.json: $(head -c 300 "$W/carry/tests.json")"; fi
else bad "(a) pack failed: $out"; fi
hash=$(python3 -c "import sys; sys.path.insert(0, '$SRC/tools'); import gpu_lease as g; print(g.source_hash('$SRC', g.source_files('$SRC')))")
[ "$(jget "$W/carry/manifest.json" source_hash)" = "$hash" ] && ok "(a) the manifest's source hash is this tree's" ||
  bad "(a) manifest hash $(jget "$W/carry/manifest.json" source_hash) != $hash"

# (b)
"${L[@]}" steps 'test gpu_probe,test gpu_arena,test no_such_test' --out "$W/b" --budget 120 >"$W/b.out" 2>&1
rc=$?
st() { jget "$W/b/lease.json" "steps.$1.status" ""; }
if [ "$(jget "$W/b/lease.json" binaries.carried "")" = used ] && [ "$(st 0)" = passed ] &&
   [ "$(st 1)" = passed ] && [ "$(st 2)" = passed ] && [ "$(st 3)" = "not run" ] && [ $rc -eq 1 ]; then
  ok "(b) binaries, gpu_probe, gpu_arena passed from the packed copies; the unknown test not run; exit 1"
else bad "(b) statuses '$(st 0)' '$(st 1)' '$(st 2)' '$(st 3)', exit $rc: $(tail -5 "$W/b.out")"; fi
log=$(tar -xzOf "$W/b/bundle.tar.gz" lease.log 2>&1)
grep -q "== test gpu_arena" <<<"$log" && [ "$(wc -l <<<"$log")" -gt 8 ] &&
  ok "(b) the bundle's lease.log has the steps' output ($(wc -l <<<"$log") lines)" || bad "(b) lease.log: $log"

# (c)
python3 - "$W/carry/tests.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
t.append({"name": "sleepy", "command": ["sleep", "60"], "properties": []})
json.dump(t, open(sys.argv[1], "w"))
PY
s=$SECONDS
"${L[@]}" steps 'test sleepy' --out "$W/c" --budget 14 >"$W/c.out" 2>&1
t=$((SECONDS - s))
if [ "$(jget "$W/c/lease.json" steps.1.status "")" = timeout ] && [ $t -le 25 ]; then
  ok "(c) a 60 s step in a 14 s budget: timeout after ${t} s, recorded"
else bad "(c) sleepy: '$(jget "$W/c/lease.json" steps.1.status "")' after $t s: $(tail -3 "$W/c.out")"; fi
"${L[@]}" steps 'test gpu_probe' --out "$W/d" --budget 5 >/dev/null 2>&1
if [ "$(jget "$W/d/lease.json" steps.0.status "")" = "not run" ] &&
   jget "$W/d/lease.json" steps.1.summary "" | grep -q "out of time"; then
  ok "(c) a 5 s budget: nothing run, 'out of time' recorded"
else bad "(c) 5 s budget: $(cat "$W/d/lease.json")"; fi

# (d)
"${L[@]}" steps 'script no_such_script' --out "$W/e" --budget 30 >/dev/null 2>&1
[ "$(jget "$W/e/lease.json" steps.1.status "")" = "not run" ] &&
  ok "(d) an unknown script: not run" || bad "(d) unknown script: $(cat "$W/e/lease.json")"
if "${L[@]}" merge "$W/m.json" "$W/b" "$W/c" >/dev/null 2>&1 &&
   [ "$(jget "$W/m.json" calls.0.plan "")" = steps ] &&
   [ "$(jget "$W/m.json" calls.0.steps.1.step "")" = "test gpu_probe" ] &&
   [ "$(jget "$W/m.json" calls.1.steps.1.status "")" = timeout ] &&
   [ "$(jget "$W/m.json" calls.0.binaries.carried "")" = used ]; then
  ok "(d) merge: both calls, their steps in order"
else bad "(d) merge: $(head -c 400 "$W/m.json" 2>/dev/null)"; fi

echo "$pass passed, $failn failed"
[ $failn -eq 0 ]
