"""The one episode path: collect (policy turns and the environment's answers) -> verify (the
final reward) -> score (per-task means, pass@k). The loop (prompt-only runs included) and
``evolve eval`` roll out through here.

Single-turn (``env.max_turns == 1``): one ``policy.generate`` over every task's first messages,
one rollout per sample, ``turns`` empty -- exactly what the loop always did.

Multi-turn: after each policy turn the environment answers every live episode at once
(``env.respond``); the episodes it continues are sampled again (one sample each, a seed derived
from the turn), through the chat template with the whole conversation. The rollout then holds:
``prompt_ids`` = the first messages' tokens; ``completion_ids`` = every token after them (policy
turns and environment replies, as the template renders them); ``completion_mask`` 1 on policy
tokens; ``logprobs`` aligned (0.0 on environment tokens); ``turns`` the transcript, each policy
turn with its token span, dense reward and the hash of the conversation it acted on (identical
states across a group share it: GiGPO's anchor states); ``completion`` = the last policy turn,
which the verifier judges.
"""

from __future__ import annotations

import zlib
from collections import defaultdict

import numpy as np

from evolve.env.base import Environment, EpisodeState, Generator, PromptLike, Verifying
from evolve.errors import EvolveError
from evolve.rollout import Rollout, Turn
from evolve.util.hashing import content_hash
from evolve.util.passk import pass_at_k
from evolve.verification.types import Task


def collect(env: Environment, policy: Generator, candidate: PromptLike, tasks: list[Task], n: int, seed: int,
            purpose: str, weights_version: str, verifier: Verifying | None = None) -> list[Rollout]:
    """``n`` episodes per task under ``candidate``; not yet verified (``verify`` gives the final reward).

    ``verifier`` is needed only by multi-turn environments (they run visible tests to answer)."""
    return collect_arms(env, policy, [candidate], tasks, n, seed, purpose, weights_version, verifier)[0]


def collect_arms(env: Environment, policy: Generator, candidates: list[PromptLike], tasks: list[Task], n: int,
                 seed: int, purpose: str, weights_version: str,
                 verifier: Verifying | None = None) -> list[list[Rollout]]:
    """``collect`` for several prompts at once: ONE ``policy.generate`` over every prompt's first messages
    (all tasks x all candidates, ``n`` samples each, one seed), one rollout list per candidate, each as
    ``collect`` would number it. With one candidate it is ``collect``. Later turns of a multi-turn
    environment continue per candidate, as ``collect`` would."""
    per_cand = [[env.first_messages(c.components, t) for t in tasks] for c in candidates]
    samples = policy.generate([m for msgs in per_cand for m in msgs], n=n, seed=seed)
    out = []
    for k, (candidate, messages) in enumerate(zip(candidates, per_cand, strict=True)):
        per_prompt = samples[k * len(tasks):(k + 1) * len(tasks)]
        rollouts = []
        for group, (task, msgs, group_samples) in enumerate(zip(tasks, messages, per_prompt, strict=True)):
            for i, s in enumerate(group_samples):
                rollouts.append(Rollout(
                    task_id=task.task_id, group=group, sample_index=i, prompt_version=candidate.id,
                    weights_version=weights_version, messages=msgs, prompt_text=s.prompt_text,
                    completion=s.text, purpose=purpose, prompt_ids=list(s.prompt_ids),
                    completion_ids=list(s.completion_ids), logprobs=list(s.logprobs), truncated=bool(s.truncated),
                ))
        if getattr(env, "max_turns", 1) > 1:
            if verifier is None:
                raise EvolveError(f"environment {env.name} is multi-turn: collect needs the verifier")
            by_id = {t.task_id: t for t in tasks}
            _continue_episodes(env, policy, verifier, by_id, rollouts, seed)
        out.append(rollouts)
    return out


def conversation(r: Rollout) -> list[dict]:
    """The chat so far: first messages, then every turn."""
    return list(r.messages) + [{"role": t.role, "content": t.content} for t in r.turns]


def observation_hash(messages: list[dict]) -> str:
    """What the policy saw before acting (GiGPO's anchor state)."""
    return content_hash(messages)


def _continue_episodes(env, policy, verifier, by_id: dict[str, Task], rollouts: list[Rollout], seed: int) -> None:
    anchor = _anchor(env, by_id)
    for r in rollouts:  # turn 1, as sampled above
        span = (0, len(r.completion_ids)) if r.completion_ids else None
        r.turns = [Turn("assistant", r.completion, observation_hash=anchor(r.task_id, r.messages), token_span=span)]
        r.completion_mask = [1] * len(r.completion_ids)
    live = list(rollouts)
    for turn in range(1, env.max_turns + 1):
        states = [EpisodeState(by_id[r.task_id], conversation(r), r.completion, turn) for r in live]
        replies = env.respond(verifier, states)
        going = []
        for r, reply in zip(live, replies, strict=True):
            r.turns[-1].reward = None if reply.reward is None else float(reply.reward)
            if not reply.done and reply.message is not None and turn < env.max_turns:
                r.turns.append(Turn(reply.role, reply.message))
                going.append(r)
        if not going:
            return
        convs = [conversation(r) for r in going]
        samples = policy.generate(convs, n=1, seed=(seed * 31 + turn) % (2**31 - 1))
        for r, conv, (s,) in zip(going, convs, samples, strict=True):
            _append_policy_turn(r, conv, s, anchor(r.task_id, conv))
        live = going


def _anchor(env, by_id: dict[str, Task]):
    """GiGPO's anchor state of a turn: the environment's own state hash when it has one (repo-fix:
    the working copy's content), else the conversation the policy acted on."""
    state_hash = getattr(env, "state_hash", None)
    if state_hash is None:
        return lambda _task_id, conv: observation_hash(conv)
    return lambda task_id, conv: state_hash(by_id[task_id], conv)


def _append_policy_turn(r: Rollout, conv: list[dict], s, anchor_hash: str | None = None) -> None:
    """Splice a later turn's sample into the rollout's token stream (environment tokens masked)."""
    start = None
    if r.prompt_ids or s.prompt_ids:
        full = r.prompt_ids + r.completion_ids
        if s.prompt_ids[:len(full)] != full:
            _reanchor(r, s)
        else:
            env_ids = list(s.prompt_ids[len(full):])
            r.completion_ids += env_ids
            r.completion_mask += [0] * len(env_ids)
            r.logprobs += [0.0] * len(env_ids)
        start = len(r.completion_ids)
        r.completion_ids += list(s.completion_ids)
        r.completion_mask += [1] * len(s.completion_ids)
        r.logprobs += list(s.logprobs)
    span = (start, len(r.completion_ids)) if start is not None else None
    r.turns.append(Turn("assistant", s.text, observation_hash=anchor_hash or observation_hash(conv), token_span=span))
    r.completion, r.truncated = s.text, bool(s.truncated)


def _reanchor(r: Rollout, s) -> None:
    """The template re-tokenised an earlier turn differently from how it was sampled. The tokens
    the policy saw now are the new prompt's: earlier turns become context (masked, no span)."""
    if s.prompt_ids[:len(r.prompt_ids)] != r.prompt_ids:
        raise EvolveError("multi-turn: the chat template re-tokenised the first messages differently; "
                          "this tokenizer cannot splice turns")
    r.completion_ids = list(s.prompt_ids[len(r.prompt_ids):])
    r.completion_mask = [0] * len(r.completion_ids)
    r.logprobs = [0.0] * len(r.completion_ids)
    for t in r.turns:
        t.token_span = None


# ---- verify and score ------------------------------------------------------------------------

def verify(verifier: Verifying, tasks_by_id: dict[str, Task], rollouts: list[Rollout],
           random_seed: int | None) -> None:
    """Attach verdicts (the final reward). With ``random_seed`` the learning reward is Bernoulli(0.5)
    (the control); the verdict itself (and so held-out scores and reflection traces) stays real."""
    if hasattr(verifier, "verify_conversations"):  # a repository episode is judged on its whole transcript
        results = verifier.verify_conversations([(tasks_by_id[r.task_id], conversation(r)) for r in rollouts])
    else:
        results = verifier.verify_batch([(tasks_by_id[r.task_id], r.completion) for r in rollouts])
    for r, res in zip(rollouts, results, strict=True):
        r.result = res
        if random_seed is not None and r.purpose != "heldout":
            r.reward = random_reward(random_seed, r)
        else:
            r.reward = float(res.reward)


def random_reward(seed: int, r: Rollout) -> float:
    """The control's reward: Bernoulli(0.5) keyed by the seed and the rollout's prompt, task, sample
    and text. Two prompts (a challenger and its incumbent, a proposal and its parent) get independent
    draws, so noise can make either look better; the same rollout always gets the same draw."""
    key = zlib.crc32(f"{r.prompt_version}|{r.task_id}|{r.sample_index}|{r.purpose}|{r.completion}".encode())
    return float(np.random.default_rng([seed, key]).random() < 0.5)


def run_episodes(env: Environment, policy: Generator, verifier: Verifying, candidate: PromptLike,
                 tasks: list[Task], n: int, seed: int, purpose: str = "candidate",
                 weights_version: str = "") -> list[list[Rollout]]:
    """Collect and verify: ``n`` verified episodes per task, one list per task in task order."""
    rollouts = collect(env, policy, candidate, tasks, n, seed, purpose, weights_version, verifier)
    verify(verifier, {t.task_id: t for t in tasks}, rollouts, None)
    groups: list[list[Rollout]] = [[] for _ in tasks]
    for r in rollouts:
        groups[r.group].append(r)
    return groups


SCORES = ("reward", "passed")


def task_scores(rollouts: list[Rollout], by: str = "reward") -> dict[str, float]:
    """Mean score per task (several samples per task smooth noisy scores): ``by`` "reward" (the
    learning reward) or "passed" (1 when the verdict passed, the unit of pass@k)."""
    if by not in SCORES:
        raise ValueError(f"task_scores by must be one of {SCORES}, got {by!r}")
    sums: dict[str, list[float]] = defaultdict(list)
    for r in rollouts:
        sums[r.task_id].append(r.reward if by == "reward" else float(r.passed))
    return {t: float(np.mean(v)) for t, v in sums.items()}


def passed_before_augmentation(verifier: Verifying, originals: dict[str, Task],
                               rollouts: list[Rollout]) -> tuple[list[bool], int]:
    """Each rollout's verdict under its task's own tests, when a verifier version added tests to the task
    (``originals``: task id -> the task before), and how many samples were verified again for it.

    The added tests come after the task's own, so the augmented run is a superset: a sample that passed
    it passed its task's own tests (the same calls, in the same order, on the same sandbox limits), and a
    task the version left alone has one verdict. Only the failures on augmented tasks are verified a
    second time, on the original task: the verdict does not expose which tests failed, and a run of
    the added calls can fail the whole sample (a timeout, a crash), which the original run would not."""
    passed = [r.passed for r in rollouts]
    redo = [i for i, r in enumerate(rollouts) if not r.passed and r.task_id in originals]
    if redo:
        results = verifier.verify_batch([(originals[rollouts[i].task_id], rollouts[i].completion) for i in redo])
        for i, res in zip(redo, results, strict=True):
            passed[i] = bool(res.passed)
    return passed, len(redo)


def pass_at_k_rows(rollouts: list[Rollout], ks, passed: list[bool] | None = None) -> dict[str, dict]:
    """Per task (first-seen order): {"n", "c", "pass@k"...} with the unbiased estimator. ``passed``:
    the verdicts to count, one per rollout (default: each rollout's own)."""
    per_task: dict[str, list[bool]] = defaultdict(list)
    for r, ok in zip(rollouts, passed if passed is not None else [r.passed for r in rollouts], strict=True):
        per_task[r.task_id].append(ok)
    out = {}
    for task_id, v in per_task.items():
        row = {"n": len(v), "c": sum(v)}
        row.update({f"pass@{k}": pass_at_k(len(v), sum(v), k) for k in ks if k <= len(v)})
        out[task_id] = row
    return out
