"""Where a coupled generation's time goes on Qwen2.5-Coder-0.5B / humaneval-chat, measured (issue 36).

Each arm is a real ``evolve run`` (its own process, its own lineage DB under runs/loop_throughput/), one
after another in the same benchmark run so their ratios share the machine's load:

- ``today``: configs/qwen-humaneval.toml as shipped (HF backend, 2 tasks x 4 samples a generation, a
  4 x 2 held-out check every generation);
- ``powered_hf``: the same at the powered shape (``--tasks`` x ``--samples``, default 8 x 8);
- ``powered_vllm``: configs/ablation-qwen-humaneval-powered.toml (vLLM's CPU build, from .venv-vllm) at the
  powered shape as shipped (held-out check every generation; its final 41 x 8 figure off: it is the
  ablation's, not the loop's throughput);
- ``fast``: ``powered_vllm`` with what issue 36 changed (its overrides are in ARMS).

Every arm reflects with the offline reflector (``--reflection-lm offline``), so no 1.5B reflection server
is needed; the 1.5B's own cost is measured in docs/reflector-lm.md. max_new_tokens is the specs' (384).

Reported per arm, from the lineage (every generation records ``timings``): seconds per generation by
phase, learning rollouts an hour (train rollouts / the learning generations' wall seconds), sampled
completion tokens an hour, peak resident memory of the run's process (``wait4``'s ru_maxrss), and the
update's model FLOP/s (LoRA: 4 N per input token, as benchmarks/generate.py) as a share of the matmul peak
of the dtype in use, measured in this process (generate.py's ``matmul_peak``). The bound: learning
rollouts an hour if the update ran at that peak and sampling at the best batched rate measured in this
run, verification as measured.

    nice -n 10 .venv/bin/python benchmarks/loop_throughput.py [--arms today,powered_vllm] [--generations 2]

Writes benchmarks/results/loop_throughput.json (after every arm, so a killed run keeps what it measured).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).parent))
from results_io import machine_facts, print_figures, write_results  # noqa: E402

VENV = Path(os.environ.get("EVOLVE_VENV", "/work/main/.venv"))
VLLM_VENV = Path(os.environ.get("EVOLVE_VLLM_VENV", "/work/main/.venv-vllm"))
PHASES = ("select", "rollout", "verify", "update", "reflect", "select_prompt", "heldout", "heldout_full", "commit")
BASE_PARAMS = 494_032_768  # Qwen2.5-0.5B's parameters (tied head counted once), as generate.py counts them
POWERED_OFF = ["--loop.max_rollouts", "none", "--loop.heldout_final_tasks", "none"]
# name -> (venv, config, overrides beyond the shape); the shape (--loop.tasks_per_generation, samples) is added
ARMS: dict[str, tuple[Path, str, list[str]]] = {
    "today": (VENV, "configs/qwen-humaneval.toml", []),
    "powered_hf": (VENV, "configs/qwen-humaneval.toml", []),
    "powered_vllm": (VLLM_VENV, "configs/ablation-qwen-humaneval-powered.toml", POWERED_OFF),
    # issue 36's changes: one engine request for both prompt arms; no per-generation held-out check (a 4 x 2
    # figure at the end instead, timed as heldout_full and left out of the learning seconds like the others')
    "fast": (VLLM_VENV, "configs/ablation-qwen-humaneval-powered.toml",
             ["--loop.max_rollouts", "none", "--loop.one_request", "true", "--loop.heldout_each_generation", "false",
              "--loop.heldout_final_tasks", "4", "--loop.heldout_final_samples", "2",
              "--loop.heldout_full_at_start", "false"]),
}
# The loop as it was when issue 36 was filed (the commit before its first change): the ``today`` arm's config run
# from that commit's own code, checked out as a worktree, so "today's loop" excludes the speed changes made since
FILED_COMMIT = "95f7370^"
ARMS["filed"] = (VENV, "configs/qwen-humaneval.toml", [])


def code_root(name: str) -> Path:
    """Where an arm's code runs from: this checkout, or for ``filed`` a worktree at FILED_COMMIT."""
    if name != "filed":
        return REPO
    root = REPO / "runs" / "loop_throughput" / "filed-src"
    if not (root / "evolve").is_dir():
        subprocess.run(["git", "worktree", "add", "--detach", str(root), FILED_COMMIT], cwd=REPO, check=True,
                       capture_output=True)
    return root


def cpu_facts() -> dict:
    flags: set[str] = set()
    model = ""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name") and not model:
            model = line.split(":", 1)[1].strip()
        if line.startswith("flags"):
            flags |= set(line.split(":", 1)[1].split())
    keep = sorted(f for f in flags if f.startswith(("avx", "amx", "fma")))
    return {"cpu_model": model, "cpu_flags": keep, "bf16_kernels": bool({"amx_bf16", "avx512_bf16"} & flags)}


def run_arm(name: str, args, out_dir: Path) -> dict:
    """One ``evolve run`` in a child process (it inherits this process's nice level); its wall time and
    peak RSS (that process, wait4)."""
    venv, config, extra = ARMS[name]
    tasks, samples = (2, 4) if name in ("today", "filed") else (args.tasks, args.samples)
    root = code_root(name)
    db = out_dir / f"{name}.db"
    db.unlink(missing_ok=True)
    cmd = [str(venv / "bin" / "python"), "-m", "evolve", "run", "--config", config,
           "--name", name, "--db", f"sqlite:///{db}", "--reflection-lm", "offline",
           "--loop.generations", str(args.generations), "--loop.tasks_per_generation", str(tasks),
           "--loop.samples_per_task", str(samples), *extra]
    env = {**os.environ, "PYTHONPATH": str(root), "EVOLVE_MODELS_DIR": str(REPO / "runs" / "models")}
    log = open(out_dir / f"{name}.log", "w")  # noqa: SIM115 - closed below, after the child
    load0, t0 = os.getloadavg(), time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    log.close()
    rc = os.waitstatus_to_exitcode(status)
    out = {"command": " ".join(cmd), "rc": rc, "wall_s": round(wall, 1), "peak_rss_gb": round(usage.ru_maxrss / 2**20, 3),
           "load_before": load0, "load_after": os.getloadavg(), "tasks": tasks, "samples": samples,
           "code": _git_head(root)}
    if rc != 0:
        out["error"] = (out_dir / f"{name}.log").read_text()[-1500:]
        return out
    out.update(read_lineage(f"sqlite:///{db}", name))
    return out


def _git_head(root: Path) -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()


def adopt_arm(name: str, out_dir: Path) -> dict:
    """An arm started by an earlier invocation and stopped by its operator after a committed generation (the
    machine was too loaded to run every arm's generations in the session): its committed generations only."""
    peak_kb = int((out_dir / f"{name}.vmhwm_kb").read_text().split()[0])
    out = {"adopted": True, "rc": 0, "peak_rss_gb": round(peak_kb / 2**20, 3),
           "note": (out_dir / f"{name}.stopped").read_text().strip() if (out_dir / f"{name}.stopped").exists() else ""}
    out.update(read_lineage(f"sqlite:///{out_dir / name}.db", name))
    out["generations"] = [g for g in out["generations"] if g["status"] == "committed"]
    return out


def token_counter():
    from transformers import AutoTokenizer

    from evolve.policy import PolicySpec
    from evolve.policy.sources import chunked_model_dir

    spec = PolicySpec.from_toml(REPO / "policies" / "qwen2.5-coder-0.5b-instruct.toml")
    tok = AutoTokenizer.from_pretrained(chunked_model_dir(spec.model, spec.model_sha256, progress=False))
    return lambda text: len(tok(text, add_special_tokens=False)["input_ids"])


def read_lineage(db: str, run: str) -> dict:
    """Per generation: phase seconds, rollouts by purpose, completion tokens, the update's input tokens
    (prompt + completion of this generation's train rollouts with a non-zero advantage: the rows the
    update trains, re-tokenised from the lineage's text; carried rollouts are not counted)."""
    from evolve.lineage import LineageStore

    count = token_counter()
    store = LineageStore.open(db, create=False, auto_upgrade=False)
    gens = []
    try:
        for g in store.lineage(run):
            gen = store.get_generation(g["id"])
            rolls = store.rollouts(g["id"])
            train = [r for r in rolls if r.purpose != "heldout"]
            trained = [r for r in train if r.advantage]
            gens.append({"index": g["index"], "status": g["status"], "timings": dict(gen.timings or {}),
                         "learning_rollouts": len(train), "heldout_rollouts": len(rolls) - len(train),
                         "train_completion_tokens": sum(count(r.completion) for r in train),
                         "heldout_completion_tokens": sum(count(r.completion) for r in rolls if r.purpose == "heldout"),
                         "update_input_tokens": sum(count(r.prompt) + count(r.completion) for r in trained),
                         "update_rows": len(trained), "update": (g["metrics"] or {}).get("update"),
                         "train_pass_rate": (g["metrics"] or {}).get("train_pass_rate")})
    finally:
        store.close()
    return {"generations": gens}


def _learning_s(g: dict) -> float:
    """A generation's wall seconds less the run's end figure (heldout_full: once a run, not per generation)."""
    return g["timings"].get("total", 0.0) - g["timings"].get("heldout_full", 0.0)


def summarise(arm: dict, peak_flops: float, base_params: int) -> dict:
    learn = [g for g in arm["generations"] if g["index"] > 0 and g["status"] == "committed"]
    secs = sum(_learning_s(g) for g in learn)
    rolls = sum(g["learning_rollouts"] for g in learn)
    phases = {p: round(sum(g["timings"].get(p, 0.0) for g in learn) / len(learn), 1) for p in PHASES}
    phases["reflect"] = round(sum(g["timings"].get("reflect", 0.0) + g["timings"].get("select_prompt", 0.0)
                                  for g in learn) / len(learn), 1)
    phases.pop("select_prompt")
    phases["total_less_heldout_full"] = round(secs / len(learn), 1)
    up_s = sum(g["timings"].get("update", 0.0) for g in learn)
    up_flops = 4 * base_params * sum(g["update_input_tokens"] for g in learn)
    sample_s = sum(g["timings"].get("rollout", 0.0) + g["timings"].get("heldout", 0.0) for g in learn)
    sample_tok = sum(g["train_completion_tokens"] + g["heldout_completion_tokens"] for g in learn)
    return {"learning_rollouts_per_hour": round(rolls / secs * 3600, 1), "seconds_per_generation": phases,
            # None when no group had mixed rewards: the update trained nothing, its speed was not measured
            "update_model_tflops": round(up_flops / up_s / 1e12, 4) if up_flops else None,
            "update_share_of_peak": round(up_flops / up_s / peak_flops, 3) if up_flops else None,
            "sampling_tokens_per_s": round(sample_tok / sample_s, 1) if sample_s else None,
            "learning_rollouts": rolls, "learning_seconds": round(secs, 1), "update_flops": up_flops,
            "peak_rss_gb": arm["peak_rss_gb"]}


def bound(arm: dict, s: dict, peak_flops: float, best_rate: float) -> float:
    """Learning rollouts an hour with the update at the peak, sampling (train + held-out tokens) at the
    best batched rate of this run, verification, reflection and commit as measured."""
    learn = [g for g in arm["generations"] if g["index"] > 0 and g["status"] == "committed"]
    tokens = sum(g["train_completion_tokens"] + g["heldout_completion_tokens"] for g in learn)
    other = sum(g["timings"].get(p, 0.0) for g in learn for p in ("select", "verify", "reflect", "select_prompt"))
    seconds = tokens / best_rate + s["update_flops"] / peak_flops + other
    return round(s["learning_rollouts"] / seconds * 3600, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arms", default="today,powered_vllm,powered_hf", help=f"comma-separated, of {','.join(ARMS)}")
    ap.add_argument("--generations", type=int, default=2)
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2, help="the specs' trainer threads (the peak is measured at it)")
    ap.add_argument("--adopt", default="", help="comma-separated arms whose run this benchmark started earlier and "
                    "an operator stopped after a committed generation (runs/loop_throughput/ARM.db; its peak RSS "
                    "read from /proc VmHWM while it ran, in ARM.vmhwm_kb): read, not run again")
    ap.add_argument("--finish", action="store_true",
                    help="only the closing figures (bound, ratios) from the results file an interrupted run left")
    args = ap.parse_args()
    if args.finish:
        finish_only()
        return
    import torch
    from generate import matmul_peak

    cpu = cpu_facts()
    dtype = "bfloat16" if cpu["bf16_kernels"] else "float32"  # what the specs' auto-bf16 resolves to here
    peak = matmul_peak(args.threads, dtype)
    base_params = BASE_PARAMS
    out_dir = REPO / "runs" / "loop_throughput"
    out_dir.mkdir(parents=True, exist_ok=True)
    results: dict = {"cpu": cpu, "dtype": dtype, "matmul_peak_flops": peak, "torch_threads": torch.get_num_threads(),
                     "arms": {}, "summary": {}}
    figures: dict = {"cpu": cpu["cpu_model"], "dtype": dtype, "matmul_peak_tflops": round(peak / 1e12, 3)}
    adopted = [a for a in args.adopt.split(",") if a]
    for name in [*adopted, *args.arms.split(",")]:
        print(f"arm {name} (load {os.getloadavg()[0]:.1f})", flush=True)
        arm = adopt_arm(name, out_dir) if name in adopted else run_arm(name, args, out_dir)
        results["arms"][name] = arm
        if arm["rc"] == 0:
            s = summarise(arm, peak, base_params)
            results["summary"][name] = s
            figures[f"{name}_rollouts_per_hour"] = s["learning_rollouts_per_hour"]
            figures[f"{name}_update_share_of_peak"] = s["update_share_of_peak"]
            figures[f"{name}_peak_rss_gb"] = s["peak_rss_gb"]
            print(f"  {s}", flush=True)
        else:
            print(f"  FAILED rc {arm['rc']}: {arm['error'][-300:]}", flush=True)
        write_results("loop_throughput", args=vars(args), results=results, figures=figures,
                      machine=machine_facts(**cpu))
    finish(results, figures, peak)
    figures["matmul_peak_tflops_end"] = round(matmul_peak(args.threads, dtype) / 1e12, 3)
    write_results("loop_throughput", args=vars(args), results=results, figures=figures, machine=machine_facts(**cpu))
    print_figures(figures)


def finish(results: dict, figures: dict, peak: float) -> None:
    summ = results["summary"]
    rates = [s["sampling_tokens_per_s"] for s in summ.values() if s["sampling_tokens_per_s"]]
    if not rates:
        return
    best = max(rates)
    results["best_sampling_tokens_per_s"] = best
    figures["best_sampling_tokens_per_s"] = best
    for name, s in summ.items():
        s["bound_rollouts_per_hour"] = bound(results["arms"][name], s, peak, best)
        figures[f"{name}_bound_rollouts_per_hour"] = s["bound_rollouts_per_hour"]
        for base in ("today", "filed"):
            if base in summ and name not in ("today", "filed"):
                figures[f"{name}_vs_{base}"] = round(s["learning_rollouts_per_hour"]
                                                     / summ[base]["learning_rollouts_per_hour"], 2)


def finish_only() -> None:
    """The closing figures of a run stopped after some arms (its arms' figures were written as they ended)."""
    import json

    from results_io import RESULTS_DIR

    doc = json.loads((RESULTS_DIR / "loop_throughput.json").read_text())
    results, figures = doc["results"], doc["figures"]
    for name, arm in results["arms"].items():  # the summaries again, from the arms' raw records
        if arm["rc"] == 0:
            s = summarise(arm, results["matmul_peak_flops"], BASE_PARAMS)
            results["summary"][name] = s
            figures[f"{name}_update_share_of_peak"] = s["update_share_of_peak"]
    finish(results, figures, results["matmul_peak_flops"])
    results["stopped_after"] = list(results["arms"])  # the arms the run finished before it was stopped
    write_results("loop_throughput", args=doc["args"], results=results, figures=figures, machine=doc["machine"])
    print_figures(figures)


if __name__ == "__main__":
    main()
