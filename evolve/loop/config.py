"""The loop's one frozen config, read from TOML (`evolve run --config FILE`).

Every field is documented here; the whole config is serialised into the run row
of the lineage, so a run can be resumed, forked and replayed with what it used.
"""

from __future__ import annotations

import tomllib
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from evolve.env.episode import SCORES as SELECTION_SCORES
from evolve.errors import ConfigError
from evolve.loop.guided import SOURCES
from evolve.prompt.evidence import TESTS

MODES = ("coupled", "weights", "prompt")
REWARDS = ("verifier", "random")
SELECTIONS = ("in_group", "gate")
BASELINES = ("per_prompt", "task")
ALL_FAIL_ROUTES = ("reflection", "both")
DISTILL = ("off", "seed")
GATE_RULES = ("signflip", "strict")
PICKS = ("ucb", "thompson")
THOMPSON_VARIANCES = ("fixed", "empirical")
# keys whose embedded default changed the behaviour when they were added -> the behaviour before
RECORDED_BEFORE = {"promote_test": "betting", "thompson_variance": "fixed", "selection_score": "reward"}


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
    selection: str = "in_group"
    """How prompt candidates are evaluated. "in_group" (Fast-Slow Training / E-SPL): each task's
    group of G samples is shared by the incumbent and up to ``challengers`` challengers, every
    rollout trains the weights and scores the prompts, and evidence accumulates across generations
    (``promote_alpha``). "gate": GEPA's separate minibatch then validation rollouts, inside the
    rollout budget. Default "in_group" (Thompson allocation on each challenger's own variance,
    eviction, the sign-flip test at promote_alpha 0.1 over 6 looks): +14.9 held-out points over
    weights-only where the gate measured -2.0 (benchmarks/results/ablation.json, arms coupled-sf
    and coupled-gate)."""
    challengers: int = 1
    """in_group: challengers sampled next to the incumbent in every task's group (K - 1)."""
    challenger_samples: int | None = None
    """in_group: samples of each task's G that each challenger gets; the incumbent keeps the rest,
    which must be at least half of G. None = half of G shared by the challengers."""
    challenger_pick: str = "thompson"
    """in_group: which active challengers get a generation's samples. "ucb": the highest upper
    confidence bound (new ones first); "thompson": Thompson sampling from a Gaussian posterior of
    each one's mean difference (prior N(0, thompson_prior_sd^2)), so a promising challenger gets
    most generations' pairs (evolve/prompt/challengers.py)."""
    thompson_prior_sd: float = 0.1
    """in_group, thompson: prior sd of a challenger's mean paired difference."""
    thompson_variance: str = "empirical"
    """in_group, thompson and eviction: variance of one paired difference. "fixed": 0.12 (sd 0.34);
    "empirical": each challenger's own, shrunk towards 0.12 with 2 pseudo-pairs."""
    thompson_untried_first: bool = False
    """in_group, thompson: challengers without evidence get their first look before any Thompson
    draw decides (oldest first), as UCB's "new ones first" does."""
    evict_below: float | None = 0.3
    """in_group: when reflection has a new proposal and the pool is full, retire ("retired-evicted")
    the measured challenger with the lowest posterior probability of beating the incumbent if that
    is below this; 0 (or None) = never (a challenger leaves only by the evidence rule or its cap).
    Eviction never promotes, so the promotion error rate is unchanged."""
    evict_margin: float = 0.0
    """in_group eviction: the chance ``evict_below`` is compared with is that of beating the
    incumbent by more than this (0 = by anything). Above 0, a challenger measured to be about
    neutral leaves for a new proposal instead of holding its place until its looks run out."""
    challenger_pool: int = 4
    """in_group: most challengers waiting or being measured at once; reflection fills free places."""
    baseline: str = "task"
    """in_group advantage baseline: "per_prompt" (one per task and prompt, E-SPL "normal") or "task"
    (one per task across prompts, E-SPL "marginalize": samples under a better prompt get a positive
    advantage). Default "task": it measured better (benchmarks/results/ablation.json)."""
    promote_alpha: float = 0.1
    """in_group: a challenger no better than the incumbent + ``promote_margin`` is promoted with
    probability at most this, over all its looks (evolve/prompt/evidence.py)."""
    promote_test: str = "signflip"
    """in_group: the promotion test. "signflip": exact paired sign-flip test at promote_alpha /
    promote_looks per look, at most promote_looks looks (null: differences symmetric about the
    margin); "betting": anytime-valid test by betting, any number of looks (null: mean <= margin),
    slower to promote."""
    promote_looks: int = 6
    """in_group, signflip: generations a challenger is tested in before it is retired ("retired-cap");
    the divisor of promote_alpha per look (union bound)."""
    selection_score: str = "passed"
    """What prompt selection compares per rollout (in_group's paired differences, the gate's scores):
    "reward" (the verifier's reward the weights learn from, with partial credit) or "passed" (1 when
    every check passed: the unit of held-out pass@1). Under reward = "random" both are the control's
    Bernoulli draw, so the prompt lever sees noise too. Default "passed": the one lesson that matters
    in the gym turns near-misses (reward ~0.9, failed) into passes, so its mean reward differences
    were +0.00 to +0.10 a look where its pass-rate differences were +0.03 to +0.22 (most above
    +0.09), and it was promoted sooner and more often (benchmarks/results/ablation.json, coupled-sfp)."""
    promote_margin: float = 0.0
    """in_group: mean paired difference (challenger - incumbent, per task) a challenger must beat."""
    retire_alpha: float = 0.2
    """in_group: level of the mirror test that retires a challenger that is losing."""
    evidence_cap: int = 96
    """in_group: paired task differences after which an undecided challenger is retired."""
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
    """Environment (``evolve.env.load_environment``): a registered name, a path to a .py file or a
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
    """humaneval-chat: seed of the train/held-out split of the 164 problems (the held-out ids are
    also written into the run config as ``suite_split``)."""
    heldout_fraction: float = 0.25
    """humaneval-chat: share of the problems held out."""
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
    proposals_per_generation: int = 2
    """Prompt proposals made by reflection each generation."""
    minibatch_tasks: int = 6
    """Tasks a proposal is first evaluated on (the reflected-on tasks first)."""
    minibatch_samples: int = 4
    """Samples per minibatch task (several smooth noisy scores)."""
    val_tasks: int = 16
    """Validation tasks (train split, fixed) that a proposal passing the minibatch gate must win on."""
    val_samples: int = 4
    """Samples per validation task."""
    gate_rule: str = "signflip"
    """Gate: when a validated proposal beats its parent (paired per-task differences on the
    validation tasks, same seed and weights; evolve/prompt/gate_rule.py). "signflip": mean
    difference > ``gate_margin`` and an exact one-sided sign-flip test at ``gate_alpha`` (a line
    that changes nothing passes with probability <= gate_alpha); "strict": mean difference >
    ``gate_margin`` (stated rate <= 1/2). A tie never passes either rule."""
    gate_alpha: float = 0.2
    """Gate: level of the sign-flip test (the stated rate at which a line that changes nothing
    passes validation)."""
    gate_margin: float = 0.0
    """Gate: mean paired validation difference a proposal must exceed (strictly)."""
    promotion: str = "best_val"
    """Which validated proposal becomes the prompt, among those that beat the parent by
    ``gate_rule``: "best_val" (the best mean validation score of this generation's) or
    "noninferior" (the first one, and a later one only if no worse than it within
    ``noninferior_tolerance``). Nothing else switches the prompt (older pool members' validation
    means, measured on older weights, never do)."""
    noninferior_tolerance: float = 0.0
    """Allowed drop of mean validation score under the "noninferior" rule."""
    recurring_failure_min_groups: int = 2
    """A failure class seen in at least this many groups also goes to reflection."""
    reuse_candidate_rollouts: str = "winner"
    """Which candidate-evaluation rollouts feed the next weight update (all were sampled from the
    updated weights, so they are on-policy there): "winner" = those of the prompt the next
    generation rolls out with; "all" = every evaluated candidate's (each group is on-policy for
    its own prompt); "none"."""
    max_rollouts: int | None = None
    """Stop once this many learning rollouts (train + candidate) were spent; None = no budget."""
    verifier_jobs: int = 2
    """Parallel sandbox jobs."""
    attribution: bool = True
    """When the prompt changes, also evaluate held-out with the old prompt on the new weights,
    to split the gain between the two levers."""

    # ---- construction -------------------------------------------------------------------------
    @classmethod
    def from_recorded(cls, data: dict[str, Any], source: str = "config") -> LoopConfig:
        """A run's recorded config (``to_dict`` writes every key, so a key that is absent was added
        after the run started): absent keys take the value that reproduces what the run did then,
        not today's default, so resume and replay of an older run follow its own rules."""
        return cls.from_dict({**RECORDED_BEFORE, **data}, source=source)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "config") -> LoopConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"{source}: unknown key {unknown[0]!r} (known: {', '.join(sorted(known))})")
        values = dict(data)
        for key in ("heldout_ks", "guided_retries"):
            if key in values and isinstance(values[key], list | tuple):
                values[key] = tuple(values[key])
        try:
            cfg = cls(**values)
        except TypeError as e:
            raise ConfigError(f"{source}: {e}") from None
        cfg.validate(source)
        return cfg

    @classmethod
    def from_toml(cls, path: str | Path) -> LoopConfig:
        path = Path(path)
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"config file not found: {path}") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise ConfigError(f"{path}: malformed TOML ({e})") from None
        # [loop] holds the loop; a file without it is the loop table itself, less [cluster] (evolve.cluster)
        return cls.from_dict(data.get("loop", {k: v for k, v in data.items() if k != "cluster"}), source=str(path))

    def validate(self, source: str = "config") -> None:
        def bad(msg: str) -> None:
            raise ConfigError(f"{source}: {msg}")

        if self.mode not in MODES:
            bad(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.reward not in REWARDS:
            bad(f"reward must be one of {', '.join(REWARDS)}, got {self.reward!r}")
        for name in ("tasks_per_generation", "samples_per_task", "heldout_tasks", "heldout_samples",
                     "minibatch_tasks", "minibatch_samples", "val_tasks", "val_samples", "verifier_jobs",
                     "max_turns", "guided_samples", "guided_max_groups"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                bad(f"{name} must be a positive integer, got {value!r}")
        if not isinstance(self.generations, int) or self.generations < 0:
            bad(f"generations must be a non-negative integer, got {self.generations!r}")
        if any((not isinstance(k, int)) or k < 1 or k > self.heldout_samples for k in self.heldout_ks):
            bad(f"heldout_ks must be integers in 1..heldout_samples ({self.heldout_samples}), got {self.heldout_ks}")
        if self.promotion not in ("best_val", "noninferior"):
            bad(f"promotion must be best_val or noninferior, got {self.promotion!r}")
        if self.reuse_candidate_rollouts not in ("winner", "all", "none"):
            bad(f"reuse_candidate_rollouts must be winner, all or none, got {self.reuse_candidate_rollouts!r}")
        if not 0 < self.heldout_fraction < 1:
            bad(f"heldout_fraction must be in (0, 1), got {self.heldout_fraction!r}")
        if not isinstance(self.max_lessons, int) or self.max_lessons < 0:
            bad(f"max_lessons must be a non-negative integer, got {self.max_lessons!r}")
        if self.max_rollouts is not None and self.max_rollouts < 1:
            bad("max_rollouts must be positive")
        for name, allowed in (("selection", SELECTIONS), ("baseline", BASELINES),
                              ("all_fail_groups", ALL_FAIL_ROUTES), ("distill", DISTILL)):
            if getattr(self, name) not in allowed:
                bad(f"{name} must be one of {', '.join(allowed)}, got {getattr(self, name)!r}")
        if not isinstance(self.guided_retries, tuple) or any(x not in SOURCES for x in self.guided_retries):
            bad(f"guided_retries must be a list of {', '.join(SOURCES)}, got {self.guided_retries!r}")
        if self.guided_retries and self.selection == "in_group" and self.mode != "weights":
            bad("guided_retries is wired into selection = 'gate' (and mode = 'weights') only")
        for name in ("challengers", "challenger_pool", "evidence_cap", "heldout_final_samples", "promote_looks"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                bad(f"{name} must be a positive integer, got {value!r}")
        per = self.samples_per_challenger
        if not isinstance(per, int) or isinstance(per, bool) or per < 1:
            bad(f"challenger_samples must be a positive integer (and samples_per_task >= 2), got {per!r}")
        if self.selection == "in_group" and 2 * self.challengers * per > self.samples_per_task:
            bad(f"challengers x challenger_samples ({self.challengers} x {per}) must leave "
                f"the incumbent at least half of samples_per_task ({self.samples_per_task})")
        for name, allowed in (("gate_rule", GATE_RULES), ("challenger_pick", PICKS), ("promote_test", TESTS),
                              ("thompson_variance", THOMPSON_VARIANCES), ("selection_score", SELECTION_SCORES)):
            if getattr(self, name) not in allowed:
                bad(f"{name} must be one of {', '.join(allowed)}, got {getattr(self, name)!r}")
        if self.evict_below is not None and not 0 <= self.evict_below < 1:
            bad(f"evict_below must be in [0, 1) (0 = never), got {self.evict_below!r}")
        if not self.thompson_prior_sd > 0:
            bad(f"thompson_prior_sd must be positive, got {self.thompson_prior_sd!r}")
        if not 0 <= self.gate_margin < 1:
            bad(f"gate_margin must be in [0, 1), got {self.gate_margin!r}")
        for name in ("promote_alpha", "retire_alpha", "gate_alpha"):
            if not 0 < getattr(self, name) < 1:
                bad(f"{name} must be in (0, 1), got {getattr(self, name)!r}")
        if not 0 <= self.evict_margin < 1:
            bad(f"evict_margin must be in [0, 1), got {self.evict_margin!r}")
        if not 0 <= self.promote_margin < 1:
            bad(f"promote_margin must be in [0, 1), got {self.promote_margin!r}")
        if self.heldout_final_tasks is not None and self.heldout_final_tasks < 0:
            bad("heldout_final_tasks must be >= 0 (0 = all)")

    @property
    def selection_signal(self) -> str:
        """``task_scores``' ``by`` for prompt selection: the random control's draw stands in for both."""
        return "reward" if self.reward == "random" else self.selection_score

    @property
    def samples_per_challenger(self) -> int:
        if self.challenger_samples is not None:
            return self.challenger_samples
        return self.samples_per_task // (2 * self.challengers) if isinstance(self.challengers, int) else 0

    def with_overrides(self, **overrides: Any) -> LoopConfig:
        clean = {k: v for k, v in overrides.items() if v is not None}
        cfg = replace(self, **clean)
        cfg.validate("command line")
        return cfg

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["heldout_ks"] = list(self.heldout_ks)
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
