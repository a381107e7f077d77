#!/usr/bin/env bash
# tests/model/wan_lora_golden.sh — LoRA adapters against PEFT and diffusers
# (tests/model/wan_lora_golden.py: a tiny random Wan model with random PEFT adapters; forward,
# dL/dx, adapter and base gradients within 1e-4 relative; tessera's adapter file loads into
# diffusers with its rank and alpha). Needs the venv of tools/setup_venv.sh with peft
# (TESSERA_PYTHON, default /opt/tessera/venv): without it the test is skipped (exit 77).
set -euo pipefail
. "$(dirname "$0")/../venv.sh"
need_venv torch diffusers safetensors peft
venv_check wan_lora_golden "$TESSERA_BIN" "$WAN_GOLDEN_RUN"
