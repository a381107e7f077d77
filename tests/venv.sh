# tests/venv.sh — sourced by the tests that need the Python venv of tools/setup_venv.sh.
# need_venv MODULE...: PY = the venv's python (TESSERA_PYTHON, else $TESSERA_VENV/bin/python,
# else /opt/tessera/venv/bin/python); exits 77 (skipped), naming what is missing, unless
# every module can be imported there. The modules are found with importlib's find_spec,
# without importing them (the imports alone take seconds of CPU).
need_venv() {
  PY=${TESSERA_PYTHON:-${TESSERA_VENV:-/opt/tessera/venv}/bin/python}
  local mods="" m
  for m in "$@"; do mods+="'$m', "; done
  if ! [ -x "$PY" ] || ! "$PY" -c "import importlib.util as u, sys
sys.exit(any(u.find_spec(m) is None for m in ($mods)))" 2>/dev/null; then
    echo "SKIP: no Python venv with $* at $PY (tools/setup_venv.sh creates it; TESSERA_PYTHON" \
      "names its python)"
    exit 77
  fi
}
# venv_check NAME ARGS...: runs tests/model/NAME.py, the check against the reference in the
# venv, on a scratch folder (removed at exit) and ARGS, two threads unless OMP_NUM_THREADS
# says otherwise; its exit status is the test's.
venv_check() {
  local name=$1 work
  shift
  work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-${name//_/}.XXXXXX")
  # shellcheck disable=SC2064  # work is expanded now, on purpose
  trap "rm -rf '$work'" EXIT
  OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} "$PY" "$TESSERA_SRC/tests/model/$name.py" "$work" "$@"
}
