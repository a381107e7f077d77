#!/usr/bin/env bash
# tests/pywarm_ctl.sh start|stop SOCKET — the pywarm fixture of ctest (tests/CMakeLists.txt):
# start runs the warm server of tests/pywarm.py in the background with the venv's python
# (TESSERA_PYTHON, else $TESSERA_VENV/bin/python, else /opt/tessera/venv/bin/python) and
# returns once its socket is up (the imports done: 10-30 s); stop ends it. Without the venv
# there is nothing to start: skipped (77; the tests that need it skip too). A server that
# does not come up fails, with its log.
set -euo pipefail
what=$1 sock=$2
PY=${TESSERA_PYTHON:-${TESSERA_VENV:-/opt/tessera/venv}/bin/python}
stop() {
  if [ -f "$sock.pid" ]; then kill "$(cat "$sock.pid")" 2>/dev/null || true; fi
  rm -f "$sock" "$sock.pid"
}
case $what in
  stop) stop; echo "pywarm: stopped"; exit 0 ;;
  start) ;;
  *) echo "usage: pywarm_ctl.sh start|stop SOCKET" >&2; exit 1 ;;
esac
stop
if ! [ -x "$PY" ] || ! "$PY" -c 'import importlib.util as u, sys; sys.exit(u.find_spec("torch") is None)' 2>/dev/null; then
  echo "SKIP: no venv python with torch at $PY: no warm python to start (tools/setup_venv.sh" \
    "creates the venv)"
  exit 77
fi
setsid "$PY" "$(dirname "$0")/pywarm.py" serve "$sock" </dev/null >"$sock.log" 2>&1 &
echo $! >"$sock.pid"
for _ in $(seq 600); do
  [ -S "$sock" ] && { echo "pywarm: up at $sock (pid $(cat "$sock.pid"))"; exit 0; }
  kill -0 "$(cat "$sock.pid")" 2>/dev/null || break
  sleep 0.5
done
echo "FAIL: pywarm: the server did not come up:"
cat "$sock.log"
stop
exit 1
