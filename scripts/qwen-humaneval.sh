#!/bin/sh
# The coupled loop on HumanEval with Qwen2.5-Coder-1.5B as the reflection LM (configs/qwen-humaneval.toml):
# serves the 1.5B on 127.0.0.1 (bf16 where the CPU supports it), waits until it answers, runs the loop
# against it, and always stops the server. Extra arguments go to `evolve run`, e.g. --generations 4.
#   scripts/qwen-humaneval.sh --name qwen-he
# On a shared machine run it under the big-model lock: flock /tmp/evolve-bigmodel.lock scripts/qwen-humaneval.sh
set -eu
PORT="${EVOLVE_REFLECTOR_PORT:-8011}"
EVOLVE="${EVOLVE:-evolve}"
$EVOLVE serve --policy policies/qwen2.5-coder-1.5b-instruct.toml --port "$PORT" --max-tokens 128 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true' EXIT INT TERM
until curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1; do
  kill -0 "$SERVER" 2>/dev/null || { echo "qwen-humaneval: the reflector server did not start" >&2; exit 1; }
  sleep 2
done
$EVOLVE run --config configs/qwen-humaneval.toml --reflection-api-base "http://127.0.0.1:$PORT/v1" "$@"
