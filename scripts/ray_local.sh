#!/usr/bin/env bash
# A local Ray cluster on loopback for `evolve run --config configs/ray-local.toml`:
#   scripts/ray_local.sh start [DIR]    head + one worker node, 1 CPU each, 127.0.0.1 only; prints the address
#   scripts/ray_local.sh status [DIR]
#   scripts/ray_local.sh stop [DIR]     stops exactly the processes it started (pids in DIR/cluster.json)
# DIR defaults to runs/ray-local (the config's address "local:runs/ray-local" reads it). Never `ray stop`:
# that would stop every Ray cluster on the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
action=${1:-status}
dir=${2:-runs/ray-local}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec .venv/bin/python -m evolve.cluster.local "$action" --dir "$dir" --nodes "${RAY_LOCAL_NODES:-2}" --cpus "${RAY_LOCAL_CPUS:-1}"
