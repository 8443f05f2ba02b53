"""Chat-model generation helpers: the code-block stop and the resumable sample cache."""

from __future__ import annotations

import json

import torch

from evolve.policy.backends.hf import StopRuleCriteria
from evolve.policy.sample_cache import generate_cached, read_cache
from evolve.policy.stop_rule import CODE_BLOCK


def test_code_block_stop_records_where_each_row_closed_its_block(smollm2_spec):
    from evolve.policy.model_io import load_tokenizer, resolve_model_path

    tok = load_tokenizer(resolve_model_path(smollm2_spec))
    prompt = tok("Q:", add_special_tokens=False)["input_ids"]
    closed = tok("Sure.\n```python\ndef f(xs):\n    return xs\n```\nIt returns xs.", add_special_tokens=False)["input_ids"]
    open_only = tok("```python\ndef f(xs):\n" + "    xs = [x for x in xs]  # still writing\n" * 8,
                    add_special_tokens=False)["input_ids"]
    n = min(len(closed), len(open_only))
    assert n == len(closed)
    stop = StopRuleCriteria(tok, CODE_BLOCK, len(prompt), rows=2)
    done = None
    for t in range(1, n + 1):  # as generate calls it: after every new token, on the whole sequences
        ids = torch.tensor([prompt + closed[:t], prompt + open_only[:t]])
        done = stop(ids, None)
    assert stop.stop_at[1] is None and not bool(done[1])
    assert stop.stop_at[0] is not None and bool(done[0])
    cut = tok.decode(closed[:stop.stop_at[0]])
    assert cut.count("```") == 2 and cut.rstrip().endswith("```") and "It returns" not in cut
    # the vLLM backend cuts its rows after generation with the same rule
    assert CODE_BLOCK.end(tok, closed) == stop.stop_at[0]
    assert CODE_BLOCK.end(tok, open_only) is None


def test_sample_cache_resumes_and_survives_a_torn_line(random_model_dir, tmp_path, gym_tasks):
    from evolve.policy import PolicySpec, load_policy

    spec = PolicySpec.from_dict({"model": str(random_model_dir), "sampling": {"max_new_tokens": 4}})
    policy = load_policy(spec)
    out = tmp_path / "cache.jsonl"
    tasks = gym_tasks[:3]
    rows = generate_cached(policy, tasks[:2], {"system": "s"}, 2, out, batch_tasks=1, say=lambda m: None)
    assert [r["task_id"] for r in rows] == [tasks[0].task_id] * 2 + [tasks[1].task_id] * 2
    with open(out, "a") as f:
        f.write('{"task_id": "torn')  # a kill in the middle of a write
    assert len(read_cache(out)) == 4
    calls = policy.generate_calls
    again = generate_cached(policy, tasks, {"system": "s"}, 2, out, batch_tasks=1, say=lambda m: None)
    assert policy.generate_calls == calls + 1  # only the missing task was generated
    assert [r["task_id"] for r in again][-2:] == [tasks[2].task_id] * 2
    assert all(json.loads(x)["sample"] in (0, 1) for x in out.read_text().splitlines()[:4])
