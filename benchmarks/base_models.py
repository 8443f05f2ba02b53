"""Base pass@1 and pass@8 of both shipped Qwen models on humaneval-chat's 41 held-out problems x 8 samples.

The policy (Qwen2.5-Coder-0.5B-Instruct) and the reflector (Qwen2.5-Coder-1.5B-Instruct) are evaluated the
same way, so the two figures compare: the 0.5B's vLLM policy spec as shipped
(policies/qwen2.5-coder-0.5b-vllm-cpu.toml: temperature 0.7, top-p 0.95, 384 new tokens, code-block stop),
and that spec with only the model swapped for the 1.5B's chunk packages (its KV cache sized by
``--kv-gib``, since the 1.5B's rows take ~28 KB a token against the 0.5B's ~12 KB). The seed prompt is the
ablation's (prompts/humaneval.toml). Each model runs through ``evolve eval --json`` in its own process (one
vLLM engine per process) under the big-model lock. The 0.5B is the baseline measured in the same run.

    .venv-vllm/bin/python benchmarks/base_models.py [--samples 8] [--seed 0] [--tasks N]

Prints name=value figures last and writes benchmarks/results/base_humaneval.json.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import re
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
from results_io import print_figures, write_results  # noqa: E402

POLICY = REPO / "policies" / "qwen2.5-coder-0.5b-vllm-cpu.toml"
REFLECTOR = REPO / "policies" / "qwen2.5-coder-1.5b-instruct.toml"
LOCK = Path(tempfile.gettempdir()) / "evolve-bigmodel.lock"


def spec_with_model(source: Path, kv_gib: float) -> str:
    """The 0.5B's policy spec (its TOML text, comments kept) with the 1.5B's model, checksum and KV cache:
    the same sampling, stop and backend."""
    model = tomllib.loads(source.read_text())
    text = POLICY.read_text()
    for key, value in (("model", model["model"]), ("model_sha256", model["model_sha256"]), ("cpu_kv_cache_gib", kv_gib)):
        text, n = re.subn(rf"(?m)^{key} = [^#\n]*", f"{key} = {json.dumps(value)} ", text)
        if n != 1:
            sys.exit(f"base_models: {POLICY.name} has {n} '{key} =' lines, expected 1")
    return text


def evaluate(spec_path: Path, args) -> dict:
    cmd = [sys.executable, "-m", "evolve", "eval", "--policy", str(spec_path), "--suite", "humaneval-chat",
           "--split", "heldout", "--samples", str(args.samples), "--k", f"1,{args.samples}",
           "--prompt", "prompts/humaneval.toml", "--seed", str(args.seed), "--jobs", "1", "--json"]
    if args.tasks:
        cmd += ["--tasks", str(args.tasks)]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"base_models: {spec_path.name} failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
    # --json writes one indented document last; engine logs may come before it on stdout.
    start = done.stdout.rfind("\n{\n") + 1 if not done.stdout.startswith("{\n") else 0
    report = json.loads(done.stdout[start:])
    report["wall_seconds"] = round(time.perf_counter() - t0, 1)
    return report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=8, help="samples per problem (pass@k for k=1 and k=samples)")
    ap.add_argument("--seed", type=int, default=0, help="sampling seed")
    ap.add_argument("--tasks", type=int, default=None, help="only the first N held-out problems (a smoke run)")
    ap.add_argument("--kv-gib", type=float, default=8.0, help="the 1.5B's vLLM KV cache (GiB)")
    args = ap.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="evolve-base-") as tmp, LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one big model at a time on this machine (the ablation holds it too)
        big = Path(tmp) / "qwen2.5-coder-1.5b-as-policy.toml"
        big.write_text(spec_with_model(REFLECTOR, args.kv_gib))
        for name, path in (("qwen0.5b", POLICY), ("qwen1.5b", big)):
            results[name] = evaluate(path, args)
            print(f"{name}: pass@1 {results[name]['overall']['pass@1']:.3f} "
                  f"({results[name]['wall_seconds']:.0f} s)", flush=True)
    n = args.samples
    figures = {f"{m}_pass{k}": round(results[m]["overall"][f"pass@{k}"], 4) for m in results for k in (1, n)}
    small = results["qwen0.5b"]["overall"]["pass@1"]
    figures["pass1_1.5b_minus_0.5b_points"] = round(100 * (results["qwen1.5b"]["overall"]["pass@1"] - small), 1)
    write_results("base_humaneval", args=vars(args), results=results, figures=figures)
    print_figures(figures)


if __name__ == "__main__":
    main()
