"""Frozen configuration of prompt evolution (one object for the evolver and its reflectors)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from evolve.errors import ConfigError


@dataclass(frozen=True)
class PromptEvolutionConfig:
    """Every knob of reflective prompt evolution. All fields are JSON-able."""

    # "offline" (no LM: lesson library + demos), or a litellm model string
    # ("openai/gpt-4o-mini", "anthropic/...", "hosted_vllm/...").
    reflection_lm: str = "offline"
    # OpenAI-compatible server for the reflection LM (e.g. "http://127.0.0.1:8000/v1"); None = provider default.
    api_base: str | None = None
    # Name of the environment variable holding the API key (the key itself is never stored or recorded).
    api_key_env: str | None = None
    # Sampling temperature and output cap of the reflection LM.
    temperature: float = 0.7
    max_tokens: int = 2048
    # Seconds per LM call, retries after the first failure, and the first backoff (doubled each retry).
    timeout_s: float = 60.0
    retries: int = 2
    backoff_s: float = 1.0
    # At most this many rollouts go into one reflection request (failures first, then successes for contrast).
    reflection_minibatch_size: int = 8
    # Successes kept for contrast inside that minibatch (when available).
    contrast_successes: int = 2
    # Per-field truncation of task text, generated output and feedback, in characters.
    max_field_chars: int = 600
    # Hard cap on the whole reflective dataset rendered as JSON, in characters (~4 chars per token).
    max_reflection_chars: int = 12000
    # At most this many failure-signature groups are summarised in a request.
    max_signature_groups: int = 12
    # Proposals returned by one reflection step.
    proposals_per_step: int = 2
    # Drafts an LM reflector samples per request (at least proposals_per_step); those its filter refuses
    # never become proposals (evolve/prompt/reflect/lm_rule.py).
    reflection_drafts: int = 4
    # Components a reflector may rewrite ("lessons" and "demos" are also edited by the offline reflector).
    components: tuple[str, ...] = ("system", "lessons", "demos")
    # Lesson library folder (prompts/lessons/*.md) for the offline reflector.
    lessons_dir: str = "prompts/lessons"
    # At most this many lessons (lines) in the lessons component; the tiny model has a ~256-token context
    # and was trained on system messages of at most 4 lines (the seed instruction + 3).
    max_lessons: int = 3
    # Few-shot demonstrations from verified successes; 0 disables demos (the tiny model cannot use them).
    max_demos: int = 0
    # A proposed component longer than this is rejected (never silently cut).
    max_component_chars: int = 4000
    # Offer a merge proposal (gepa's common-ancestor merge) when the frontier allows it.
    use_merge: bool = True
    # At most this many merge proposals over the whole run.
    max_merges: int = 5
    # Budgets: metric calls (one per sample verified for a candidate) and reflection-LM spend. None = unbounded.
    max_metric_calls: int | None = None
    max_lm_cost_usd: float | None = None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["components"] = list(self.components)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> PromptEvolutionConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ConfigError(f"prompt evolution config: unknown field(s) {', '.join(unknown)}")
        d = dict(d)
        if "components" in d:
            d["components"] = tuple(d["components"])
        cfg = cls(**d)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        if self.reflection_minibatch_size < 1:
            raise ConfigError("prompt evolution config: reflection_minibatch_size must be >= 1")
        if self.max_reflection_chars < 500:
            raise ConfigError("prompt evolution config: max_reflection_chars must be >= 500")
        if self.proposals_per_step < 1:
            raise ConfigError("prompt evolution config: proposals_per_step must be >= 1")
        if self.retries < 0 or self.timeout_s <= 0:
            raise ConfigError("prompt evolution config: retries must be >= 0 and timeout_s > 0")
