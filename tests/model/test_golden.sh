#!/usr/bin/env bash
# tests/model/test_golden.sh — the C DiT against the PyTorch reference: golden_dump writes
# weights, batch, loss and every gradient; tools/reference/golden.py recomputes them with
# autograd in float64 and fails if any tensor's relative error exceeds 1e-4.
set -euo pipefail
# Debian's python3-torch lives in /usr/bin/python3's dist-packages; a python3 earlier on
# PATH (pyenv, venv) may not see it.
PY=
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c 'import torch' 2>/dev/null; then PY=$p; break; fi
done
if [ -z "$PY" ]; then
  echo "SKIP: python3-torch not installed (tools/setup.sh installs it)"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$GOLDEN_DUMP" "$tmp/golden.safetensors"
"$PY" "$TESSERA_SRC/tools/reference/golden.py" "$tmp/golden.safetensors"
# the model with captions: cross-attention, text embedding and null token, every gradient
"$GOLDEN_DUMP" "$tmp/text.safetensors" --text
"$PY" "$TESSERA_SRC/tools/reference/golden.py" "$tmp/text.safetensors"
# rejects_off DUMP TENSOR: golden.py fails on DUMP with TENSOR 0.1% off, naming it (the
# check must be able to fail).
rejects_off() {
  "$PY" - "$1" "$tmp/off.safetensors" "$2" <<'PYEOF'
import sys
sys.path.insert(0, __import__("os").environ["TESSERA_SRC"] + "/tools/reference")
import safetensors_io
t, meta = safetensors_io.read(sys.argv[1])
t[sys.argv[3]] = t[sys.argv[3]] * 1.001
safetensors_io.write(sys.argv[2], t, meta)
PYEOF
  if "$PY" "$TESSERA_SRC/tools/reference/golden.py" "$tmp/off.safetensors" > "$tmp/off.txt"; then
    echo "FAIL: golden.py accepted $2 0.1% off"; exit 1
  fi
  grep -q "$2 .*FAIL" "$tmp/off.txt" && echo "golden.py rejects a 0.1% error of $2: ok"
}
rejects_off "$tmp/golden.safetensors" grad.blocks.1.k_norm.weight
# ... and so must the text model's check: the null token's gradient 0.1% off
rejects_off "$tmp/text.safetensors" grad.text_null.weight
