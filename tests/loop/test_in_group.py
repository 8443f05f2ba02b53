"""In-group prompt selection in the real loop: the group split, routing that is enforced, the
rollout budget, the random-reward control, and (on the default model) a distractor that must not
be promoted. Real tiny models, real sandbox, real SQLite; the only wrapper is a spy that records
what ``policy.update`` was given (and still calls the real update)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evolve.gym.notes import DISTRACTORS
from evolve.lineage import LineageStore
from evolve.loop.config import LoopConfig
from evolve.loop.recording import BufferRecorder
from evolve.loop.rollouts import random_reward
from evolve.loop.runner import build_session, initial_generation, load_seed_prompt, run_generations
from evolve.policy import PolicySpec
from evolve.prompt.challengers import Challenger
from evolve.rollout import Rollout

REPO = Path(__file__).resolve().parents[2]
CI = REPO / "configs" / "ci.toml"


def start(tmp_path: Path, name: str = "r", advantage: str | None = None, config: Path = CI, **overrides):
    cfg = LoopConfig.from_toml(config).with_overrides(**overrides)
    spec = PolicySpec.from_toml(REPO / cfg.policy).model_dump(mode="json")
    if advantage:
        spec["grpo"]["advantage"] = advantage
    store = LineageStore.open("sqlite:///" + str(tmp_path / "l.db"))
    comps = load_seed_prompt(str(REPO / cfg.seed_prompt))
    session = build_session(store, name, cfg, spec, comps, None, None, BufferRecorder(), lambda s: None)
    store.create_run(name, {"loop": cfg.to_dict(), "policy_spec": spec, "seed_prompt": comps})
    calls: list[list] = []
    real = session.ctx.policy.update

    def spy(groups):
        calls.append(list(groups))
        return real(groups)

    session.ctx.policy.update = spy
    return session, calls


def seed_challenger(session, line: str) -> Challenger:
    ev = session.ctx.evolver
    inc = ev.current()
    comps = {**inc.components, "lessons": line}
    ch = Challenger(comps, [inc.id], "add-lesson", 0, inc.id)
    assert ev.pool.add(ch)
    return ch


def run(session, generations: int):
    gid, wv, metrics, state = initial_generation(session)
    outs = []
    run_generations(session, gid, wv, metrics, state, generations,
                    on_generation=lambda i, phase, out: outs.append(out) if phase == "done" else None)
    return outs


def test_in_group_split_routing_enforced_and_random_control_scores(tiny_model_dir, tmp_path):
    """Random rewards give mixed, all-fail and all-pass groups even on the CI model. The control
    randomises the prompt lever too: the CI model's verdicts are almost all "failed", so a
    verdict-scored challenger that leaked the real signal would show mean difference 0."""
    session, calls = start(tmp_path, reward="random", selection={"type": "in_group", "challenger_pool": 1},
                           distill="seed")
    ch = seed_challenger(session, DISTRACTORS[0])
    try:
        outs = run(session, 2)
    finally:
        session.close()
    out = outs[0]
    train = [r for r in out.rollouts if r.purpose == "train"]
    by_prompt = {}
    for r in train:
        by_prompt.setdefault(r.prompt_version, {}).setdefault(r.task_id, 0)
        by_prompt[r.prompt_version][r.task_id] += 1
    inc = session.ctx.evolver.seed.id
    assert set(by_prompt) == {inc, ch.id}
    assert by_prompt[inc] and set(by_prompt[inc].values()) == {2} and by_prompt[ch.id] == by_prompt[inc]
    # the update got exactly the routed groups (+ the distilled copies, reported separately), each completion
    # under the incumbent's prompt (update_prompt's default; test_update_prompt_incumbent_... below)
    routed = out.routing.weight_groups
    n_distill = out.update_stats["distill_groups"]

    def sample(r):
        return r.task_id, r.sample_index, tuple(r.completion_ids), r.reward

    assert [[sample(r) for r in g] for g in calls[0][:len(routed)]] == [[sample(r) for r in g] for g in routed]
    assert len(calls[0]) == len(routed) + n_distill
    assert all(len({r.reward for r in g}) > 1 for g in routed)  # mixed only: all-fail stay with reflection
    assert out.metrics["routing"]["all_fail"] > 0 and out.metrics["routing"]["weight_groups"] == len(routed)
    assert n_distill > 0 and all(r.prompt_version == inc for g in calls[0][len(routed):] for r in g)
    # one advantage group per task across both prompts (the task baseline)
    assert [len({r.task_id for r in g}) for g in routed] == [1] * len(routed)
    assert any(len({r.prompt_version for r in g}) == 2 for g in routed)
    # the control randomises the prompt signal too: the challenger's paired differences are not all 0
    rec = out.metrics["challengers"][0]
    assert rec["id"] == ch.id and rec["n"] == 4 and rec["mean_diff"] != 0.0
    from evolve.lineage.showing import challenger_evidence

    shown = challenger_evidence(session.store, ch.id)  # what `evolve show HASH` lists
    assert shown[0]["generation"] == "r:1" and shown[0]["n"] == 4
    rec2 = outs[1].metrics["challengers"][0]
    if rec2["id"] == ch.id:
        assert rec2["n"] == 8  # evidence accumulates across generations
    else:  # decided in generation 1, and reflection refilled the pool with a new challenger
        assert rec["decision"] != "active" and rec2["n"] == 4


def test_update_prompt_incumbent_trains_challenger_completions_under_the_incumbent(tiny_model_dir, tmp_path):
    """update_prompt = "incumbent" (issue 38, the default): the update sees every challenger completion with
    the incumbent's prompt tokens, its own completion tokens and the prompt it was sampled under (the
    updater's pi_old is taken there, tests/policy/test_policy.py); the lineage keeps the rollout as sampled."""
    session, calls = start(tmp_path, reward="random", selection={"type": "in_group", "challenger_pool": 1},
                           update_prompt="incumbent")
    ch = seed_challenger(session, DISTRACTORS[0])
    try:
        out = run(session, 1)[0]
    finally:
        session.close()
    inc = session.ctx.evolver.seed.id
    train = [r for r in out.rollouts if r.purpose == "train"]
    inc_prompt = {r.task_id: r.prompt_ids for r in train if r.prompt_version == inc}
    trained = [r for g in calls[0] for r in g]
    assert trained and all(r.prompt_version == inc for r in trained)
    moved = [r for r in train if r.prompt_version == ch.id and any(t.task_id == r.task_id for t in trained)]
    assert moved  # the challenger was sampled (recorded under its own prompt) and its groups trained
    for orig in moved:  # trained with the incumbent's prompt, its own tokens, sampling prompt and reward
        assert inc_prompt[orig.task_id] != orig.prompt_ids
        assert any(t.task_id == orig.task_id and t.prompt_ids == inc_prompt[orig.task_id]
                   and t.completion_ids == orig.completion_ids and t.sampled_prompt_ids == orig.prompt_ids
                   and t.reward == orig.reward for t in trained)
    assert all(not t.sampled_prompt_ids for t in trained if t.completion_ids not in [m.completion_ids for m in moved])
    # the environment renders the incumbent's prompt (repository tasks put their instructions there), and a
    # policy that cannot re-render a challenger's completion is an error, not the other rule in silence
    from dataclasses import replace
    from types import SimpleNamespace

    from evolve.errors import EvolveError
    from evolve.loop.recontext import recontext_groups

    incumbent = session.ctx.evolver.seed
    marked = SimpleNamespace(first_messages=lambda comps, task: [{"role": "user", "content": f"ENV {task.task_id}"}])
    got = recontext_groups(replace(session.ctx, env=marked), [moved[:1]], incumbent)[0][0]
    assert got.messages == [{"role": "user", "content": f"ENV {moved[0].task_id}"}] and got.prompt_ids != inc_prompt[
        moved[0].task_id] and got.sampled_prompt_ids == moved[0].prompt_ids
    no_tokenizer = replace(session.ctx, policy=SimpleNamespace())
    own = [r for r in train if r.prompt_version == inc][:2]
    assert recontext_groups(no_tokenizer, [own], incumbent) == [own]  # nothing to re-render: nothing needed
    with pytest.raises(EvolveError, match="needs a policy with a tokenizer"):
        recontext_groups(no_tokenizer, [moved[:1]], incumbent)


def test_all_fail_groups_reach_the_weights_only_when_set(tiny_model_dir, tmp_path):
    trained = {}
    for setting, expect in (("reflection", False), ("both", True)):
        session, calls = start(tmp_path / setting, advantage="ngrpo", all_fail_groups=setting, mode="weights")
        try:
            out = run(session, 1)[0]
        finally:
            session.close()
        all_fail = [g for g in calls[0] if all(r.reward == 0 for r in g)]
        assert out.metrics["routing"]["all_fail"] > 0  # the CI model fails almost everything
        assert bool(all_fail) is expect
        assert len(all_fail) == (out.metrics["routing"]["all_fail"] if expect else 0)
        assert out.metrics["routing"]["all_fail_to_weights"] is expect
        trained[setting] = out.update_stats["n_trained_groups"]
    # ngrpo gives an all-fail group a non-zero push, so it is trained exactly when it is routed there
    assert trained["both"] > trained["reflection"]


GATE = {"type": "gate", "minibatch_tasks": 3, "minibatch_samples": 2, "val_tasks": 4, "val_samples": 2}


@pytest.mark.parametrize("selection,budget", [("in_group", 40), ("gate", 45)])
def test_max_rollouts_is_never_overshot(tiny_model_dir, tmp_path, selection, budget):
    session, _ = start(tmp_path, selection=GATE if selection == "gate" else {"type": selection},
                       max_rollouts=budget, generations=10)
    try:
        outs = run(session, 10)
    finally:
        session.close()
    spent = [o.metrics["rollouts_spent"] for o in outs]
    if selection == "in_group":  # reflection's challengers were sampled; `evolve prompts` shows their evidence
        from rich.console import Console

        from evolve.prompt.dag import prompt_dag, render_tree

        nodes = prompt_dag(session.store, "r")
        assert any(n["evidence"] and n["evidence"]["n"] > 0 for n in nodes)
        console = Console(width=200, record=True)
        console.print(render_tree("r", nodes))
        text = console.export_text()
        assert re.search(r"evidence n=\d+ mean diff [+-][\d.]+ bounds \[.*\] p=[\d.]+/0\.0167 ", text)  # p / level
    assert spent[-1] == budget and all(s <= budget for s in spent)
    learning = [sum(1 for r in o.rollouts if r.purpose != "heldout") for o in outs]
    assert [b - a for a, b in zip([0, *spent[:-1]], spent, strict=True)] == learning  # every learning rollout is counted
    assert learning[-1] < learning[0]  # the last generation was cut to fit, not skipped or overrun


def test_random_reward_differs_between_prompts_and_is_stable():
    def roll(prompt, i):
        return Rollout(task_id="t", group=0, sample_index=i, prompt_version=prompt, weights_version="w",
                       messages=[], prompt_text="", completion="def f(): pass", purpose="train")

    a = [random_reward(7, roll("p1", i)) for i in range(200)]
    b = [random_reward(7, roll("p2", i)) for i in range(200)]
    assert a == [random_reward(7, roll("p1", i)) for i in range(200)]
    assert a != b and 0.4 < sum(a) / 200 < 0.6 and 0.4 < sum(b) / 200 < 0.6


def test_distractor_line_is_not_promoted_in_the_real_loop(tmp_path, default_tiny_model):
    """The default model on the hard tier, prompt lever only, a challenger adding a line the teacher
    ignores; the pool holds only it (cap 1), so nothing else competes. Promotion would be a false
    positive (rate <= alpha = 0.05 by the rule; the synthetic test measures the rate)."""
    session, _ = start(tmp_path, config=REPO / "configs" / "default.toml", mode="prompt",
                       selection={"type": "in_group", "challenger_pool": 1, "promote_alpha": 0.05, "evict_below": 0.0},
                       suite="tiny-coder-hard", tasks_per_generation=8, heldout_tasks=2,
                       heldout_samples=1, heldout_ks=(1,), attribution=False)
    ch = seed_challenger(session, DISTRACTORS[2])  # "Think step by step." (the old gate accepted it)
    try:
        outs = run(session, 4)
    finally:
        session.close()
    recs = [o.metrics["challengers"][0] for o in outs if o.metrics["challengers"]]
    assert recs and all(r["id"] == ch.id and r["decision"] != "promoted" for r in recs)
    assert recs[-1]["n"] == 8 * len(recs)  # evidence accumulated across generations
    assert session.ctx.evolver.current().id == session.ctx.evolver.seed.id


def test_status_line_shows_each_candidate_and_its_evidence():
    from evolve.cli.loop_cmds import status_line

    base = {"heldout": {"pass@1": 0.5}, "levers": {"weights": True, "prompt": True}, "timings": {"total": 1.0}}
    ig = {**base, "selection": "in_group", "all_fail_task_fraction": 0.25, "promoted": None, "accepted": 1,
          "pool": [{"id": "a"}, {"id": "b"}],
          "challengers": [{"id": "9c9659e6ff", "added": "Include the boundary value k.", "n": 48,
                           "mean_diff": 0.08, "lower": -0.04, "upper": 0.16, "decision": "active"}]}
    line = status_line(3, ig, None, 0.4)
    assert "9c9659e6 +'Include the boundary value k.' n=48 Δ=+0.080 [-0.04,+0.16] active" in line
    assert "all-fail tasks 0.25" in line and "pool 2, +1 new" in line
    ig["challengers"][0].update(p=0.0137, p_threshold=0.0167, decision="promoted")  # the sign-flip test
    assert "[-0.04,+0.16] p=0.0137/0.0167 promoted" in status_line(3, ig, None, 0.4)
    gate = {**base, "selection": "gate", "accepted": 1, "proposals": 2,
            "gate": [{"id": "abcdef12", "kind": "add-lesson", "added": "Use // for integer division.",
                      "minibatch": [0.25, 0.5], "val": [0.4, 0.45], "accepted": True, "skipped": None},
                     {"id": "12345678", "kind": "merge", "added": "", "minibatch": [None, None],
                      "val": [None, None], "accepted": False, "skipped": "budget"}]}
    line = status_line(3, gate, None, 0.4)
    assert "abcdef12 +'Use // for integer division.' mb 0.25->0.50 val 0.40->0.45 accepted" in line
    gate["gate"][0]["test"] = {"rule": "signflip", "n": 16, "mean_diff": 0.05, "p": 0.31, "promoted": False}
    line = status_line(3, gate, None, 0.4)
    assert "val 0.40->0.45 Δ=+0.050 p=0.31 kept parent" in line
    assert "12345678 merge skipped (budget)" in line


def test_thompson_pick_and_eviction_in_the_real_loop(tiny_model_dir, tmp_path):
    """A full pool (cap 1) and evict_below close to 1: when reflection proposes, the measured
    challenger is retired as evicted (its lines count as rejected) and the proposal takes its place."""
    session, _ = start(tmp_path, selection={"type": "in_group", "challenger_pool": 1, "evict_below": 0.99})
    ch = seed_challenger(session, DISTRACTORS[0])
    try:
        outs = run(session, 2)
    finally:
        session.close()
    assert outs[0].metrics["challengers"][0]["id"] == ch.id
    ev = session.ctx.evolver
    evicted = [o.metrics.get("evicted") for o in outs if o.metrics.get("evicted")]
    if any(p["proposal"] for o in outs for p in o.proposals):  # reflection proposed something
        assert evicted and evicted[0] == [ch.id]
        assert any(d["id"] == ch.id and d["evidence"]["decision"] == "retired-evicted" for d in ev.pool.decided)
        assert ev.rejected.get(DISTRACTORS[0]) == 1
    else:
        pytest.skip("reflection proposed nothing on the CI model in 2 generations")


def _scored(prompt: str, task: str, rewards_passed: list[tuple[float, bool]]) -> list[Rollout]:
    from evolve.verification.types import VerifyResult

    return [Rollout(task, 0, i, prompt, "w", [], "", f"c{i}", result=VerifyResult(task, rw, ok), reward=rw)
            for i, (rw, ok) in enumerate(rewards_passed)]


def test_paired_differences_score_the_verdict_or_the_reward():
    """A lesson that turns near-misses (reward 0.9, failed) into passes moves the reward a little and
    the verdict a lot; the paired test sees the verdict (the random control: its reward draw)."""
    from evolve.loop.selection.in_group import paired_differences

    inc = _scored("I", "a", [(0.9, False), (0.9, False)]) + _scored("I", "b", [(1.0, True), (0.0, False)])
    ch = _scored("C", "a", [(1.0, True), (0.9, False)]) + _scored("C", "b", [(1.0, True), (0.0, False)])

    def reference(by):
        def mean(rs, t):
            vals = [(r.reward if by == "reward" else (1.0 if r.result.passed else 0.0)) for r in rs if r.task_id == t]
            return sum(vals) / len(vals)
        return [mean(ch, t) - mean(inc, t) for t in ("a", "b")]

    for by in ("reward", "passed"):
        diffs, scores = paired_differences(inc, ch, by)
        assert diffs == pytest.approx(reference(by))
    assert paired_differences(inc, ch, "passed")[0] == pytest.approx([0.5, 0.0])
    assert paired_differences(inc, ch, "reward")[0] == pytest.approx([0.05, 0.0])
