"""Frozen configuration of prompt evolution (one object for the evolver and its reflectors).

In a loop config it is the ``[loop.prompt]`` table, every field under the name it has here (the
evolver records ``to_dict()`` in its state, so these names are also what old states hold).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from evolve.util.config_model import ConfigModel, validate_as

# Fields added with a new default: absent from a recorded prompt config (a run's [loop.prompt], an evolver's
# state) means the behaviour before them.
RECORDED_ABSENT_MEANT = {"demo_budget": "shared"}


class PromptEvolutionConfig(ConfigModel):
    """Every knob of reflective prompt evolution. All fields are JSON-able."""

    reflection_lm: str = Field(
        "offline", description="\"offline\" (no LM: lesson library + demos), or a litellm model string "
        "(\"openai/gpt-4o-mini\", \"anthropic/...\", \"hosted_vllm/...\").")
    api_base: str | None = Field(
        None, description="OpenAI-compatible server for the reflection LM (e.g. \"http://127.0.0.1:8000/v1\"); "
        "None = the provider's default.")
    api_key_env: str | None = Field(
        None, description="Name of the environment variable holding the API key (the key itself is never stored "
        "or recorded).")
    temperature: float = Field(0.7, ge=0, description="Sampling temperature of the reflection LM.")
    max_tokens: int = Field(2048, ge=1, description="Output cap of the reflection LM, in tokens.")
    timeout_s: float = Field(
        60.0, gt=0, description="Seconds one reflection LM call may take before it is retried: a hosted model "
        "answers in seconds, a 1.5B served on 2 CPU cores needs minutes (a 1.8k-token prompt and 4 drafts: "
        "about 4 minutes).")
    retries: int = Field(2, ge=0, description="Retries of a reflection LM call after its first failure.")
    backoff_s: float = Field(1.0, ge=0, description="First backoff between retries, in seconds (doubled each "
                             "retry).")
    reflection_minibatch_size: int = Field(
        8, ge=1, description="At most this many rollouts go into one reflection request (failures first, then "
        "successes for contrast).")
    contrast_successes: int = Field(2, ge=0, description="Successes kept for contrast inside that minibatch "
                                    "(when available).")
    max_field_chars: int = Field(600, ge=1, description="Per-field limit of task text, generated output and "
                                 "feedback, in characters (the pooled view shortens a longer field in the middle).")
    reflection_view: Literal["pooled", "generation"] = Field(
        "generation", description="What a reflector sees: \"pooled\" = failing rollouts of the last failure_window "
        "reflection steps, grouped by failure class, each with expected against got, long fields shortened in the "
        "middle; \"generation\" = this generation's routed rollouts only, fields cut at the end (the default, and "
        "the rule of every run recorded before this setting: the pooled view is not measured yet; "
        "docs/reflector-lm.md).")
    failure_window: int = Field(
        3, ge=1, description="Pooled view: the failures of this many reflection steps (this one and the ones "
        "before it, carried in the evolver's state, so replay sees the same pool) go into one reflection.")
    reflection_prompt_chars: int = Field(
        12000, ge=1000, description="Pooled view: the LM reflector's whole prompt is at most this many characters "
        "(about 4 a token): examples are dropped from the end (the rarest classes' last ones) until it fits.")
    max_reflection_chars: int = Field(
        12000, ge=500, description="Hard cap on the whole reflective dataset rendered as JSON, in characters "
        "(about 4 characters a token).")
    max_signature_groups: int = Field(12, ge=1, description="At most this many failure-signature groups are "
                                      "summarised in a request.")
    proposals_per_step: int = Field(2, ge=1, description="Prompt proposals made by reflection each generation.")
    reflection_drafts: int = Field(
        4, ge=1, description="Drafts an LM reflector samples per request (at least proposals_per_step); those its "
        "filter refuses never become proposals (evolve/prompt/reflect/lm_rule.py).")
    components: tuple[str, ...] = Field(
        ("system", "lessons", "demos"), strict=False, description="Components a reflector may rewrite "
        "(\"lessons\" and \"demos\" are also edited by the offline reflector).")
    lessons_dir: str = Field("prompts/lessons", description="Lesson library folder (prompts/lessons/*.md) of the "
                             "offline reflector (prompts/lessons/chat holds the chat-model lessons).")
    max_lessons: int = Field(
        3, ge=0, description="At most this many lessons (lines) in the lessons component; the tiny model has a "
        "~256-token context and was trained on system messages of at most 4 lines (the seed instruction + 3).")
    max_demos: int = Field(0, ge=0, description="Few-shot demonstrations from verified successes; 0 disables "
                           "demos (the tiny model cannot use them).")
    demo_challengers: bool = Field(
        False, description="Each reflection step also proposes one demonstration set (max_demos verified successes "
        "of training tasks, rendered into the demos component) as a challenger beside the reflector's lines, "
        "decided by the same paired evidence. Off: on Qwen2.5-Coder-0.5B / HumanEval (one coupled run, 672 "
        "rollouts) no set was promoted (24 pairs at +0.010, 12 at -0.104; docs/ablation.md).")
    demo_budget: Literal["own", "shared"] = Field(
        "own", description="Where the demonstration pool (max_demos > 0) counts: \"own\" = outside "
        "max_reflection_chars (no LM reflector reads it; it is bounded by 2 x max_demos entries of at most "
        "max_field_chars a field); \"shared\" = inside it, after the failure records, the rule of every run "
        "recorded before this field (on HumanEval with max_demos = 2 it left the LM reflector 2-3 failure examples "
        "of the 4-5 it saw without demonstrations).")
    max_component_chars: int = Field(4000, ge=1, description="A proposed component longer than this is rejected "
                                     "(never silently cut).")
    use_merge: bool = Field(True, description="Offer a merge proposal (gepa's common-ancestor merge) when the "
                            "frontier allows it.")
    max_merges: int = Field(5, ge=0, description="At most this many merge proposals over the whole run.")
    max_metric_calls: int | None = Field(None, ge=0, description="Budget of metric calls (one per sample "
                                         "verified for a candidate); None = unbounded.")
    max_lm_cost_usd: float | None = Field(None, ge=0, description="Budget of reflection-LM spend in US dollars; "
                                          "None = unbounded.")

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @classmethod
    def from_dict(cls, d: dict[str, Any], source: str = "prompt evolution config") -> PromptEvolutionConfig:
        return validate_as(cls, d, source)
