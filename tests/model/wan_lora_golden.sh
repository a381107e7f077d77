#!/usr/bin/env bash
# tests/model/wan_lora_golden.sh — LoRA adapters against PEFT and diffusers
# (tests/model/wan_lora_golden.py: a tiny random Wan model with random PEFT adapters; forward,
# dL/dx, adapter and base gradients within 1e-4 relative; tessera's adapter file loads into
# diffusers with its rank and alpha). Needs the venv of tools/setup_venv.sh with peft
# (TESSERA_PYTHON, default /opt/tessera/venv): without it the test is skipped (exit 77).
set -euo pipefail
PY=${TESSERA_PYTHON:-${TESSERA_VENV:-/opt/tessera/venv}/bin/python}
FIND="import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in ('torch', 'diffusers', 'safetensors', 'peft')))"
if ! [ -x "$PY" ] || ! "$PY" -c "$FIND" 2>/dev/null; then
  echo "SKIP: no Python venv with torch, diffusers, safetensors and peft at $PY" \
    "(tools/setup_venv.sh creates it; TESSERA_PYTHON names its python)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} "$PY" "$TESSERA_SRC/tests/model/wan_lora_golden.py" "$work" \
  "$TESSERA_BIN" "$WAN_GOLDEN_RUN"
