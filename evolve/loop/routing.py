"""Route each failure to the lever that can learn from it.

GRPO learns nothing from a group whose samples all got the same reward (zero
variance), and NGRPO only gets a weak push there. Reflection, though, can read
exactly those failures' traces. So:

- all-fail groups, and failure classes that keep recurring across groups, go to reflection;
- mixed groups drive the weights;
- all-pass groups give reflection successes to contrast with.

The update is given exactly ``Routing.weight_groups`` (enforced in the controller, tested).
All-fail groups reach the weights only with the explicit setting ``all_fail_groups = "both"``
(recorded in the run config and in each generation's routing summary), which only ngrpo can use.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from evolve.metrics import RoutingSummary
from evolve.rollout import Rollout


def failure_class(rollout: Rollout) -> str | None:
    """A coarse, readable class of why a sample failed (None if it passed).

    The error type of the first failure, refined by the shape of the failing input:
    "WrongAnswer[empty]" and "WrongAnswer" are different lessons to learn.
    """
    result = rollout.result
    if result is None or result.passed:
        return None
    if result.hack_flags:
        return "hack"
    failures = result.failures
    if not failures:
        return result.error_class or "Failure"
    first = failures[0]
    kind = first.error_type or result.error_class or "Failure"
    shape = input_shape(first.input_repr)
    return f"{kind}[{shape}]" if shape else kind


def input_shape(input_repr: str) -> str:
    """"empty" when the failing call had an empty container or string argument, else ""."""
    text = input_repr.replace(" ", "")
    for empty in ("([]", ",[]", "('')", "(\"\")", ",'')", "((),", "({}", "[])"):
        if empty in text:
            return "empty"
    return ""


def group_by_task(rollouts: list[Rollout]) -> list[list[Rollout]]:
    """GRPO groups: the samples of one task, in first-seen order, across the prompts that shared the
    task's group (one advantage baseline per task: E-SPL's "marginalize", which measured better than
    one per prompt; benchmarks/results/ablation.json)."""
    groups: dict[str, list[Rollout]] = {}
    for r in rollouts:
        groups.setdefault(r.task_id, []).append(r)
    return list(groups.values())


@dataclass
class Routing:
    weight_groups: list[list[Rollout]] = field(default_factory=list)  # mixed groups (+ reused)
    reflection_rollouts: list[Rollout] = field(default_factory=list)  # failures to reflect on
    contrast_rollouts: list[Rollout] = field(default_factory=list)  # successes for contrast
    all_fail_tasks: list[str] = field(default_factory=list)
    mixed_tasks: list[str] = field(default_factory=list)
    all_pass_tasks: list[str] = field(default_factory=list)
    recurring_classes: list[str] = field(default_factory=list)
    all_fail_to_weights: bool = False

    def summary(self) -> RoutingSummary:
        n = len(self.all_fail_tasks) + len(self.mixed_tasks) + len(self.all_pass_tasks)
        return {
            "groups": n,
            "all_fail": len(self.all_fail_tasks),
            "mixed": len(self.mixed_tasks),
            "all_pass": len(self.all_pass_tasks),
            "zero_variance_fraction": (len(self.all_fail_tasks) + len(self.all_pass_tasks)) / n if n else 0.0,
            "reflection_rollouts": len(self.reflection_rollouts),
            "recurring_classes": self.recurring_classes,
            "weight_groups": len(self.weight_groups),
            "all_fail_to_weights": self.all_fail_to_weights,
        }


def turn_level(policy) -> bool:
    """Whether the policy's weight update credits turns (GiGPO): then all-pass groups can carry signal."""
    updater = getattr(policy, "updater", None)
    return hasattr(getattr(updater, "estimator", None), "turn_advantages")


def policy_turn_count(r: Rollout) -> int:
    return max(1, sum(t.role == "assistant" for t in r.turns))


def route(groups: list[list[Rollout]], recurring_min_groups: int = 2, all_fail_to_weights: bool = False,
          turn_level: bool = False) -> Routing:
    """Split verified groups between the levers (see the module docstring).

    ``turn_level`` (a turn-level estimator such as GiGPO): an all-pass group whose episodes took
    different numbers of policy turns also goes to the weights -- its discounted step returns differ,
    so the faster solutions get a positive step advantage although every final reward is equal."""
    routing = Routing(all_fail_to_weights=all_fail_to_weights)
    class_groups: Counter[str] = Counter()
    for group in groups:
        classes = {c for c in (failure_class(r) for r in group) if c}
        class_groups.update(classes)
    recurring = {c for c, n in class_groups.items() if n >= recurring_min_groups}
    routing.recurring_classes = sorted(recurring)

    for group in groups:
        rewards = {round(r.reward, 9) for r in group}
        task_id = group[0].task_id
        if len(rewards) > 1:
            routing.mixed_tasks.append(task_id)
            routing.weight_groups.append(group)
            routing.reflection_rollouts += [r for r in group if failure_class(r) in recurring]
            routing.contrast_rollouts += [r for r in group if r.passed][:1]
        elif group[0].passed:
            routing.all_pass_tasks.append(task_id)
            routing.contrast_rollouts.append(group[0])
            if turn_level and len({policy_turn_count(r) for r in group}) > 1:
                routing.weight_groups.append(group)
        else:
            routing.all_fail_tasks.append(task_id)
            routing.reflection_rollouts += group
            if all_fail_to_weights:
                routing.weight_groups.append(group)
    return routing
