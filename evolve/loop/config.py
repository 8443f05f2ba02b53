"""The loop's one frozen config, read from TOML (`evolve run --config FILE`).

Every field is documented here; the whole config is serialised into the run row
of the lineage, so a run can be resumed, forked and replayed with what it used.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from evolve.errors import ConfigError
from evolve.loop.guided import SOURCES
from evolve.loop.legacy import upgrade_recorded
from evolve.loop.selection.configs import (
    SELECTION_TYPES,
    InGroupSelection,
    SelectionConfig,
    selection_from_dict,
    selection_to_dict,
)
from evolve.util.toml_files import read_toml

MODES = ("coupled", "weights", "prompt")
REWARDS = ("verifier", "random")
ALL_FAIL_ROUTES = ("reflection", "both")
DISTILL = ("off", "seed")


@dataclass(frozen=True)
class LoopConfig:
    mode: str = "coupled"
    """Which levers learn: both ("coupled"), weights only (prompt frozen), prompt only (weights frozen)."""
    reward: str = "verifier"
    """"verifier" = verified rewards; "random" = the random-reward control: every learning rollout
    (train and candidate) gets an independent Bernoulli(0.5) reward, drawn from the run seed and the
    rollout's prompt, task, sample and text, so both levers see pure noise (the weight update and the
    prompt selection alike; a challenger and its incumbent get independent draws, so noise can promote
    one, at the rule's error rate in_group and about half the time at the gate). Held-out evaluation
    and the reflection traces always use the verifier."""
    selection: SelectionConfig = field(default_factory=InGroupSelection)
    """How prompt candidates are evaluated: the ``[loop.selection]`` table, ``type = "in_group"``
    (the default: the prompts share every task's GRPO group) or ``"gate"`` (GEPA's separate minibatch
    and validation rollouts), each with only its own keys (evolve/loop/selection/configs.py). Ignored
    under ``mode = "weights"``, where the prompt is frozen."""
    all_fail_groups: str = "reflection"
    """Where groups whose samples all failed go: "reflection" only (GRPO has no signal there), or
    "both" (also to the weight update; only ngrpo learns from them). Routing is enforced: the
    update receives exactly the groups routed to the weights."""
    distill: str = "off"
    """EXPERIMENTAL context distillation: "seed" also trains, on each rollout sampled under a prompt
    other than the seed, the log-probabilities of the same completion under the seed prompt (same
    reward, advantage from the same baseline), so the weights learn to act as if the lessons were
    there. "off" = no."""
    heldout_seed_prompt: bool = False
    """Also evaluate held-out with the seed prompt on the new weights ("does the model still need
    the prompt?"), recorded as ``heldout_seed``."""
    heldout_final_tasks: int | None = None
    """Evaluate this many held-out tasks (0 = all) at generation 0 and at the last generation
    (its budget spent or ``generations`` reached), recorded as ``heldout_full``; None = off."""
    heldout_full_at_start: bool = True
    """Also measure ``heldout_full`` at generation 0 (runs that share a seed share that figure)."""
    heldout_final_samples: int = 8
    """Samples per task of that full held-out figure (pass@1, pass@4 and pass@8 where they fit)."""
    generations: int = 8
    """Generations to run after generation 0 (the initial state)."""
    seed: int = 0
    """Run seed; each generation's seeds derive from it and the generation index."""
    policy: str = "policies/tiny-coder.toml"
    """Policy spec (model, backend, sampling, optimizer, GRPO parameters)."""
    suite: str = "tiny-coder-hard"
    """Environment (``evolve.env.load_environment``): a registered name, a user's task file
    (``.jsonl``/``.jsonl.gz``, the schema of ``evolve verify --tasks``) or Hugging Face dataset folder
    (``save_to_disk``; see ``task_columns``), a path to a .py file or a
    dotted module exposing ``load_environment(**options)``. Built-in: "tiny-coder" (the gym), "tiny-coder-hard" (its hard tier: the CMP-bug tasks, where
    the base model's groups mostly all fail, plus as many others; see evolve/gym/tiers.py), "humaneval",
    or the chat renderings for pre-trained chat models, "tiny-coder-chat" and "humaneval-chat"
    (evolve/gym/chat.py: the task in the user message, replies taken apart by
    evolve/verification/chat_reply.py)."""
    guided_retries: tuple[str, ...] = ()
    """Guided retries for groups whose samples all failed (``evolve/loop/guided.py``): the guidance
    sources, any of "errors" (the attempts' exceptions), "visible_diff" (visible tests they got
    wrong) and "lessons" (the current prompt's lessons); () = off. The retries are trained as if
    unguided (re-tokenised under the unguided first messages, joined to the failed group), stored
    with purpose "guided" and their sources, and count against ``max_rollouts``; the generation's
    metrics ``guided`` hold the leakage audit next to held-out pass@1 (always without guidance)."""
    guided_samples: int = 4
    """Guided retries sampled per all-fail group."""
    guided_max_groups: int = 4
    """Most all-fail groups given guided retries per generation."""
    max_turns: int = 3
    """Self-repair environments (``<suite>-repair``): most policy turns per episode (turn 1 writes
    the code, each later one answers the visible tests' failures). Single-turn suites ignore it."""
    split_seed: int = 0
    """humaneval-chat and a user's task file or dataset: seed of the train/held-out split (the
    held-out ids are also written into the run config as ``suite_split``)."""
    heldout_fraction: float = 0.25
    """humaneval-chat and a user's task file or dataset: share of the problems held out."""
    task_columns: dict[str, str] = field(default_factory=dict)
    """A user's task file or dataset: which column holds each task field, e.g.
    ``{prompt = "question", task_id = "id"}`` (``[loop.task_columns]``; unmapped fields are read
    under their own names; docs/environments.md lists the fields). {} = the rows use the field names."""
    lessons_dir: str = "prompts/lessons"
    """Lesson library of the offline reflector (prompts/lessons/chat holds the chat-model lessons)."""
    max_lessons: int = 3
    """Most lessons (lines) the offline reflector keeps in the prompt."""
    pipeline: str | None = None
    """Verifier pipeline TOML; None = the built-in default."""
    seed_prompt: str = "prompts/tiny-coder.toml"
    """Seed prompt candidate (TOML with a [components] table)."""
    tasks_per_generation: int = 8
    """Train tasks rolled out per generation."""
    samples_per_task: int = 8
    """G: samples per task (one GRPO group)."""
    heldout_tasks: int = 48
    """Held-out tasks evaluated after every generation (a fixed subset)."""
    heldout_samples: int = 8
    """Samples per held-out task (pass@k needs k <= this)."""
    heldout_ks: tuple[int, ...] = (1, 4, 8)
    """k values of the pass@k reported on held-out tasks."""
    reflection_lm: str = "offline"
    """"offline" (the lesson-library reflector, no LM) or a litellm model string."""
    reflection_api_base: str | None = None
    """OpenAI-compatible server for the reflection LM (e.g. http://127.0.0.1:8000/v1)."""
    reflection_timeout_s: float = 60.0
    """Seconds one reflection LM call may take before it is retried: a hosted model answers in seconds,
    a 1.5B served on 2 CPU cores needs minutes (a 1.8k-token prompt and 4 drafts: about 4 minutes)."""
    proposals_per_generation: int = 2
    """Prompt proposals made by reflection each generation."""
    recurring_failure_min_groups: int = 2
    """A failure class seen in at least this many groups also goes to reflection."""
    max_rollouts: int | None = None
    """Stop once this many learning rollouts (train + candidate) were spent; None = no budget."""
    verifier_jobs: int = 2
    """Parallel sandbox jobs."""
    attribution: bool = True
    """When the prompt changes, also evaluate held-out with the old prompt on the new weights,
    to split the gain between the two levers."""

    # ---- construction -------------------------------------------------------------------------
    @classmethod
    def from_recorded(cls, data: dict[str, Any], source: str = "config", recorded_by: str | None = None) -> LoopConfig:
        """A run's recorded config. One recorded before ``[loop.selection]`` existed (flat keys) is
        upgraded when it ran under a rule that still exists, and refused with one line naming the code
        version that recorded it otherwise (``evolve.loop.legacy``), so resume and replay of an older
        run follow its own rules or do not run at all."""
        return cls.from_dict(upgrade_recorded(data, source, recorded_by), source=source)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "config") -> LoopConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"{source}: unknown key {unknown[0]!r} (known: {', '.join(sorted(known))}; "
                              "prompt-selection keys go in [loop.selection])")
        values = dict(data)
        for key in ("heldout_ks", "guided_retries"):
            if key in values and isinstance(values[key], list | tuple):
                values[key] = tuple(values[key])
        if "selection" in values:
            values["selection"] = selection_from_dict(values["selection"], source)
        try:
            cfg = cls(**values)
        except TypeError as e:
            raise ConfigError(f"{source}: {e}") from None
        cfg.validate(source)
        return cfg

    @classmethod
    def from_toml(cls, path: str | Path) -> LoopConfig:
        path = Path(path)
        data = read_toml(path, not_found="config file not found")  # extends = "other.toml" resolved
        # [loop] holds the loop; a file without it is the loop table itself, less [cluster] (evolve.cluster)
        return cls.from_dict(data.get("loop", {k: v for k, v in data.items() if k != "cluster"}), source=str(path))

    def validate(self, source: str = "config") -> None:
        def bad(msg: str) -> None:
            raise ConfigError(f"{source}: {msg}")

        for name, allowed in (("mode", MODES), ("reward", REWARDS), ("all_fail_groups", ALL_FAIL_ROUTES),
                              ("distill", DISTILL)):
            if getattr(self, name) not in allowed:
                bad(f"{name} must be one of {', '.join(allowed)}, got {getattr(self, name)!r}")
        for name in ("tasks_per_generation", "samples_per_task", "heldout_tasks", "heldout_samples", "verifier_jobs",
                     "max_turns", "guided_samples", "guided_max_groups", "heldout_final_samples"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                bad(f"{name} must be a positive integer, got {value!r}")
        if not isinstance(self.generations, int) or self.generations < 0:
            bad(f"generations must be a non-negative integer, got {self.generations!r}")
        if any((not isinstance(k, int)) or k < 1 or k > self.heldout_samples for k in self.heldout_ks):
            bad(f"heldout_ks must be integers in 1..heldout_samples ({self.heldout_samples}), got {self.heldout_ks}")
        if not 0 < self.heldout_fraction < 1:
            bad(f"heldout_fraction must be in (0, 1), got {self.heldout_fraction!r}")
        if not isinstance(self.max_lessons, int) or self.max_lessons < 0:
            bad(f"max_lessons must be a non-negative integer, got {self.max_lessons!r}")
        if isinstance(self.reflection_timeout_s, bool) or not isinstance(self.reflection_timeout_s, int | float) \
                or not self.reflection_timeout_s > 0:
            bad(f"reflection_timeout_s must be a positive number of seconds, got {self.reflection_timeout_s!r}")
        if self.max_rollouts is not None and self.max_rollouts < 1:
            bad("max_rollouts must be positive")
        if not isinstance(self.guided_retries, tuple) or any(x not in SOURCES for x in self.guided_retries):
            bad(f"guided_retries must be a list of {', '.join(SOURCES)}, got {self.guided_retries!r}")
        if not isinstance(self.selection, tuple(SELECTION_TYPES.values())):
            bad(f"selection must be a [loop.selection] table, got {self.selection!r}")
        self.selection.validate(bad)
        if self.heldout_final_tasks is not None and self.heldout_final_tasks < 0:
            bad("heldout_final_tasks must be >= 0 (0 = all)")
        if not isinstance(self.task_columns, dict):
            bad(f"task_columns must be a table of field = \"column\", got {self.task_columns!r}")
        from evolve.env.task_source import check_columns

        check_columns(self.task_columns, f"{source}: task_columns")

    @property
    def selection_signal(self) -> str:
        """``task_scores``' ``by`` for prompt selection: the verdict, or under the random control its
        draw (which stands in for both levers)."""
        return "reward" if self.reward == "random" else "passed"

    def with_overrides(self, **overrides: Any) -> LoopConfig:
        """A copy with some fields replaced (None = keep); ``selection`` may be a table (dict)."""
        clean = {k: v for k, v in overrides.items() if v is not None}
        if isinstance(clean.get("selection"), dict):
            clean["selection"] = selection_from_dict(clean["selection"], "command line")
        cfg = replace(self, **clean)
        cfg.validate("command line")
        return cfg

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["heldout_ks"] = list(self.heldout_ks)
        d["selection"] = selection_to_dict(self.selection)
        return d


@dataclass(frozen=True)
class GenerationSeeds:
    """Seeds of one generation, recorded on its row; replay reuses them."""

    sample: int
    heldout: int
    reflect: int
    reward: int
    extra: dict = field(default_factory=dict)

    @classmethod
    def derive(cls, run_seed: int, index: int) -> GenerationSeeds:
        base = (run_seed * 1_000_003 + index * 7919) % (2**31 - 1)
        # held-out evaluation uses the same seed every generation (common random numbers)
        return cls(sample=base + 1, heldout=run_seed * 31 + 17, reflect=base + 2, reward=base + 3)

    def to_dict(self) -> dict:
        return asdict(self)
