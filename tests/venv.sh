# tests/venv.sh — sourced by the tests that need the Python venv of tools/setup_venv.sh.
# need_venv MODULE...: PY = the venv's python (TESSERA_PYTHON, else $TESSERA_VENV/bin/python,
# else /opt/tessera/venv/bin/python; see venv_python); exits 77 (skipped), naming what is missing, unless
# every module can be imported there. The modules are found with importlib's find_spec,
# without importing them (the imports alone take seconds of CPU).
need_venv() {
  venv_python
  local mods="" m
  for m in "$@"; do mods+="'$m', "; done
  if ! [ -x "$PYWARM_PYTHON" ] || ! "$PY" -c "import importlib.util as u, sys
sys.exit(any(u.find_spec(m) is None for m in ($mods)))" 2>/dev/null; then
    echo "SKIP: no Python venv with $* at $PYWARM_PYTHON (tools/setup_venv.sh creates it;" \
      "TESSERA_PYTHON names its python)"
    exit 77
  fi
}
# venv_python: PY = the venv's python, as need_venv finds it (PYWARM_PYTHON: that file). Where
# the pywarm fixture's server is up (PYWARM_SOCKET, tests/pywarm.py: torch imported once for
# the suite), PY and the TESSERA_PYTHON that tessera's scripts get are tests/pywarm, which
# runs the same script as a fork of that server; without it PY is the venv's python.
venv_python() {
  PY=${TESSERA_PYTHON:-${TESSERA_VENV:-/opt/tessera/venv}/bin/python}
  case $PY in */tests/pywarm) return ;; esac   # set already, PYWARM_PYTHON exported
  export PYWARM_PYTHON=$PY
  if [ -n "${PYWARM_SOCKET:-}" ] && [ -S "$PYWARM_SOCKET" ] && [ -x "$PY" ]; then
    PY=${TESSERA_SRC:?set by ctest}/tests/pywarm
    export TESSERA_PYTHON=$PY
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
