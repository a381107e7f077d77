# tests/lib.sh — sourced by the shell tests that run tessera: their scratch folder, their
# tally of checks and their refusal checks, which each test had written for itself.
# (tests/ingest/lib.sh is the ingest tests' own, whose fail counts instead of stopping.)
# Sets T, the tessera binary, and SRC, the source tree (ctest sets both for every shell test).
T=${TESSERA_BIN:?set by ctest}
SRC=${TESSERA_SRC:?set by ctest}

# scratch NAME: W = a new folder ${TMPDIR:-/tmp}/tessera-NAME.XXXXXX, removed at exit (the
# EXIT trap: a test that sets its own removes "$W" in it).
scratch() {
  W=$(mktemp -d "${TMPDIR:-/tmp}/tessera-$1.XXXXXX")
  trap 'rm -rf "$W"' EXIT
}
# fail MSG: the test stops there, failed.
fail() { echo "FAIL: $*" >&2; exit 1; }

# ok MSG, bad MSG: one check passed or failed, counted in passed and failed; tally NAME (the
# test's last line) prints the counts and is false if any check failed.
passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok: $*"; }
bad() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }
tally() { echo "$1: $passed passed, $failed failed"; [ "$failed" -eq 0 ]; }
# same NAME GOT WANT: a check that GOT is WANT, to the letter.
same() { if [ "$2" = "$3" ]; then ok "$1"; else bad "$1: got '$2', want '$3'"; fi; }

# expect_fail PATTERN CMD...: CMD must exit 1 with PATTERN (grep -E) on stderr and no
# sanitizer report (under the sanitizer build a leak on the error path also exits 1); the
# test stops (fail) otherwise. Its output is left in $W/out and $W/err.
expect_fail() {
  local pat=$1 rc=0
  shift
  "$@" >"$W/out" 2>"$W/err" || rc=$?
  [ $rc -eq 1 ] || { cat "$W/err" >&2; fail "expected exit 1, got $rc: $*"; }
  grep -Eq -- "$pat" "$W/err" || { cat "$W/err" >&2; fail "stderr lacks /$pat/: $*"; }
  ! grep -q 'Sanitizer' "$W/err" || { cat "$W/err" >&2; fail "sanitizer report: $*"; }
  echo "ok: refused ($(head -c 300 "$W/err" | tr '\n' ' '))"
}

# refused WHAT PATTERN CMD...: a check (ok/bad) that CMD, its stdin /dev/null, ends within
# REFUSE_WAIT seconds (60; a hang fails as exit 124 instead of stopping the suite) with exit 1
# (with REFUSE_ANY_EXIT=1 any exit but 0 and 124), PATTERN on stderr (grep -F, or the grep
# flag in REFUSE_MATCH: -E) and no sanitizer report.
refused() {
  local what=$1 pat=$2 rc=0 exited=0
  shift 2
  timeout "${REFUSE_WAIT:-60}" "$@" >"$W/out" 2>"$W/err" </dev/null || rc=$?
  if [ "${REFUSE_ANY_EXIT:-0}" = 1 ]; then
    [ $rc -ne 0 ] && [ $rc -ne 124 ] && exited=1
  else
    [ $rc -eq 1 ] && exited=1
  fi
  if [ $exited = 1 ] && grep "${REFUSE_MATCH:--F}" -q -- "$pat" "$W/err" &&
     ! grep -q Sanitizer "$W/err"; then
    ok "$what: refused ($(head -c 160 "$W/err" | tr '\n' ' '))"
  else
    bad "$what: exit $rc ($([ $rc -eq 124 ] && echo hung || head -c 300 "$W/err" | tr '\n' ' '))"
  fi
}

# ckpt_tensors FILE: the tensor bytes of a safetensors file, without its header (whose
# metadata holds the config text and names the data, which differ between runs that must agree)
ckpt_tensors() {
  local n
  n=$(od -An -t u8 -N 8 "$1" | tr -d ' ')
  tail -c +$((9 + n)) "$1"
}
