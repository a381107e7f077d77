#!/usr/bin/env bash
# tests/model/wan_solvers.sh — Wan 2.2's two experts (`tessera sample --ckpt2 --boundary
# --cfg2`) and UniPC (`--solver unipc`) against diffusers' WanPipeline (tests/model/
# wan_solvers.py: tiny random WanTransformer3DModels converted, the same noise and
# embeddings; final latents within 1e-4 relative; the experts swapped and Euler in place of
# UniPC shown to fail the comparison). Needs the venv of tools/setup_venv.sh (TESSERA_PYTHON,
# default /opt/tessera/venv): without it the test is skipped (exit 77).
set -euo pipefail
. "$(dirname "$0")/../venv.sh"
need_venv torch diffusers safetensors
venv_check wan_solvers "$TESSERA_BIN"
