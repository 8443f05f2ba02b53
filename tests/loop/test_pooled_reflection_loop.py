"""The pooled reflective view and demonstration challengers in the real loop (issue 37 items 4 and 5):
the default tiny-coder model (it solves about half the gym's tasks, so there are verified successes),
the offline reflector, the real sandbox, real SQLite, the real CLI in a subprocess. The reflection of a
later generation reads failures of an earlier one, grouped by class; demonstrations are training tasks'
solutions only; and every generation replays hash-equal from the record."""

from __future__ import annotations

import json
import re

import pytest
from loop_helpers import CI_CONFIG
from sqlalchemy import create_engine, text

OPTIONS = ("--loop.prompt.reflection_view", "pooled", "--loop.prompt.failure_window", "3",
           "--loop.prompt.demo_challengers", "true", "--loop.prompt.max_demos", "1")


def _rows(url: str, sql: str) -> list[tuple]:
    engine = create_engine(url)
    with engine.connect() as conn:
        rows = [tuple(json.loads(v) if isinstance(v, str) and v[:1] in "[{" else v for v in row)
                for row in conn.execute(text(sql))]
    engine.dispose()
    return rows


@pytest.mark.slow  # ~90 s on 2 loaded cores: a 3-generation run and 3 replays
@pytest.mark.parametrize("loop_db", ["sqlite"], indirect=True)  # the loop's subject, not the store's
def test_pooled_reflection_and_demos_in_the_loop_replay_hash_equal(loop_db, default_tiny_model):
    loop_db.evolve("run", "--config", CI_CONFIG, "--mode", "prompt", "--name", "pool", "--generations", "3",
                   "--loop.policy", "policies/tiny-coder.toml", "--loop.heldout_tasks", "4", *OPTIONS)
    requests = _rows(loop_db.url, "select g.\"index\", c.request from lm_call c join generation g "
                                  "on g.id = c.generation_id where c.role = 'reflection' order by g.\"index\"")
    assert len(requests) >= 2, requests
    index, last = requests[-1][0], requests[-1][1]["dataset"]
    assert last["generations"][-1] == index and len(last["generations"]) >= 2
    failures = [r for r in last["records"] if not r["passed"]]
    assert any(r["generation"] < index for r in failures)  # an earlier generation's failure, pooled
    classes = [c["class"] for c in last["classes"]]
    assert classes and {r["class"] for r in failures} <= set(classes)
    assert sum(c["count"] for c in last["classes"]) == last["n_failures"]
    # Demonstrations: training tasks' solutions, never a held-out task's (the tasks a demo set names, and
    # the solutions it shows: each is a passed training rollout's completion).
    tasks = {p: {t for (t,) in _rows(loop_db.url, f"select task_id from rollout where purpose = '{p}'")}
             for p in ("train", "heldout")}
    solved = {c.strip() for (c,) in _rows(loop_db.url, "select completion from rollout where passed and purpose = 'train'")}
    sets = [(c["demos"], m["rationale"]) for (c, m) in _rows(loop_db.url, "select components, meta from prompt_version")
            if c.get("demos")]
    assert sets
    for demos, why in sets:
        named = set(re.search(r"verified successes on (?:training tasks )?(.+)$", why).group(1).split(", "))
        assert named <= tasks["train"] and not named & tasks["heldout"], (named, tasks)
        shown = [block.split("\nSolution:\n", 1)[1].strip() for block in demos.split("\n\nExample task:\n")]
        assert all(s in solved for s in shown)
    for ref in ("pool:1", "pool:2", "pool:3"):
        rep = loop_db.evolve("replay", ref, "--json", check=False)
        assert rep.stdout.strip(), rep.stderr  # a replay that cannot serve a request says so in one line
        report = json.loads(rep.stdout)
        assert rep.returncode == 0 and report["ok"], (report, rep.stderr)
