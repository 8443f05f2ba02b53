"""The loop's one frozen config, read from TOML (`evolve run CONFIG`, the ``[loop]`` table).

A pydantic model (evolve/util/config_model.py): every field has its description here, unknown keys
are one-line errors naming the file and where the key does belong, and every field can be set from
the command line by its dotted name (``--loop.samples_per_task 8``). The whole config is serialised
into the run row of the lineage, so a run can be resumed, forked and replayed with what it used.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationInfo, field_validator

from evolve.errors import ConfigError
from evolve.loop.guided import SOURCES
from evolve.loop.legacy import MOVED, upgrade_recorded
from evolve.loop.selection.configs import InGroupSelection, SelectionConfig
from evolve.prompt.config import PromptEvolutionConfig
from evolve.util.config_model import ConfigModel, validate_as
from evolve.util.toml_files import read_toml

GuidanceSource = Literal[SOURCES]  # type: ignore[valid-type]


class LoopConfig(ConfigModel):
    """One run of the loop: what learns, on which tasks, with how many samples, judged how."""

    mode: Literal["coupled", "weights", "prompt"] = Field(
        "coupled", description=
        "Which levers learn: both (\"coupled\"), weights only (prompt frozen), prompt only (weights "
        "frozen).")
    reward: Literal["verifier", "random"] = Field(
        "verifier", description=
        "\"verifier\" = verified rewards; \"random\" = the random-reward control: every learning rollout "
        "(train and candidate) gets an independent Bernoulli(0.5) reward, drawn from the run seed and the "
        "rollout's prompt, task, sample and text, so both levers see pure noise (the weight update and the "
        "prompt selection alike; a challenger and its incumbent get independent draws, so noise can promote "
        "one, at the rule's error rate in_group and about half the time at the gate). Held-out evaluation "
        "and the reflection traces always use the verifier.")
    selection: SelectionConfig = Field(
        default_factory=InGroupSelection, description=
        "How prompt candidates are evaluated: the ``[loop.selection]`` table, ``type = \"in_group\"`` (the "
        "default: the prompts share every task's GRPO group) or ``\"gate\"`` (GEPA's separate minibatch and "
        "validation rollouts), each with only its own keys (evolve/loop/selection/configs.py). Ignored "
        "under ``mode = \"weights\"``, where the prompt is frozen.")
    all_fail_groups: Literal["reflection", "both"] = Field(
        "reflection", description=
        "Where groups whose samples all failed go: \"reflection\" only (GRPO has no signal there), or "
        "\"both\" (also to the weight update; only ngrpo learns from them). Routing is enforced: the update "
        "receives exactly the groups routed to the weights.")
    distill: Literal["off", "seed"] = Field(
        "off", description=
        "EXPERIMENTAL context distillation: \"seed\" also trains, on each rollout sampled under a prompt "
        "other than the seed, the log-probabilities of the same completion under the seed prompt (same "
        "reward, advantage from the same baseline), so the weights learn to act as if the lessons were "
        "there. \"off\" = no.")
    update_prompt: Literal["sampled", "incumbent"] = Field(
        "incumbent", description=
        "The prompt the weight update conditions each completion on. \"incumbent\" (the default): a challenger's "
        "completions are re-rendered under the incumbent's prompt, the one held-out evaluation uses, keeping "
        "rewards and the task's shared baseline; pi_old for such a completion is the model's under the prompt it "
        "was sampled with, so the ratio is the importance weight (evolve/loop/recontext.py). \"sampled\": each "
        "completion under the prompt it was sampled under, the rule of every coupled run recorded before this "
        "field existed (an older record without it means \"sampled\"); measured worse on seeds 40-55, "
        "\"incumbent\" - \"sampled\" = +2.2 points [+0.2, +4.4] where no lesson helps, +2.1 [-0.4, +5.6] on "
        "the gym (docs/ablation.md). No effect under ``mode = \"weights\"`` or ``\"prompt\"``.")
    heldout_seed_prompt: bool = Field(
        False, description=
        "Also evaluate held-out with the seed prompt on the new weights (\"does the model still need the "
        "prompt?\"), recorded as ``heldout_seed``.")
    heldout_final_tasks: int | None = Field(
        None, ge=0, description=
        "Evaluate this many held-out tasks (0 = all) at generation 0 and at the last generation (its budget "
        "spent or ``generations`` reached), recorded as ``heldout_full``; None = off.")
    heldout_full_at_start: bool = Field(
        True, description=
        "Also measure ``heldout_full`` at generation 0 (runs that share a seed share that figure).")
    heldout_final_samples: int = Field(
        8, ge=1, description=
        "Samples per task of that full held-out figure (pass@1, pass@4 and pass@8 where they fit).")
    generations: int = Field(8, ge=0, description="Generations to run after generation 0 (the initial state).")
    seed: int = Field(0, description="Run seed; each generation's seeds derive from it and the generation index.")
    policy: str = Field(
        "policies/tiny-coder.toml", description=
        "Policy spec (model, backend, sampling, optimizer, GRPO parameters).")
    suite: str = Field(
        "tiny-coder-hard", description=
        "Environment (``evolve.env.load_environment``): a registered name, a user's task file "
        "(``.jsonl``/``.jsonl.gz``, the schema of ``evolve verify --tasks``) or Hugging Face dataset folder "
        "(``save_to_disk``; see ``task_columns``), a path to a .py file or a dotted module exposing "
        "``load_environment(**options)``. Built-in: \"tiny-coder\" (the gym), \"tiny-coder-hard\" (its hard "
        "tier: the CMP-bug tasks, where the base model's groups mostly all fail, plus as many others; see "
        "evolve/gym/tiers.py), \"humaneval\", or the chat renderings for pre-trained chat models, "
        "\"tiny-coder-chat\" and \"humaneval-chat\" (evolve/gym/chat.py: the task in the user message, replies "
        "taken apart by evolve/verification/model_reply.py).")
    guided_retries: tuple[GuidanceSource, ...] = Field(
        (), strict=False, description=
        "Guided retries for groups whose samples all failed (``evolve/loop/guided.py``): the guidance "
        "sources, any of \"errors\" (the attempts' exceptions), \"visible_diff\" (visible tests they got "
        "wrong) and \"lessons\" (the current prompt's lessons); () = off. The retries are trained as if "
        "unguided (re-tokenised under the unguided first messages, joined to the failed group), stored with "
        "purpose \"guided\" and their sources, and count against ``max_rollouts``; the generation's metrics "
        "``guided`` hold the leakage audit next to held-out pass@1 (always without guidance).")
    guided_samples: int = Field(4, ge=1, description="Guided retries sampled per all-fail group.")
    guided_max_groups: int = Field(4, ge=1, description="Most all-fail groups given guided retries per generation.")
    max_turns: int = Field(
        3, ge=1, description=
        "Self-repair environments (``<suite>-repair``): most policy turns per episode (turn 1 writes the "
        "code, each later one answers the visible tests' failures). Single-turn suites ignore it.")
    split_seed: int = Field(
        0, description=
        "humaneval-chat and a user's task file or dataset: seed of the train/held-out split (the held-out "
        "ids are also written into the run config as ``suite_split``).")
    heldout_fraction: float = Field(
        0.25, gt=0, lt=1, description=
        "humaneval-chat and a user's task file or dataset: share of the problems held out.")
    task_columns: dict[str, str] = Field(
        default_factory=dict, description=
        "A user's task file or dataset: which column holds each task field, e.g. ``{prompt = \"question\", "
        "task_id = \"id\"}`` (``[loop.task_columns]``; unmapped fields are read under their own names; "
        "docs/environments.md lists the fields). {} = the rows use the field names.")
    pipeline: str | None = Field(None, description="Verifier pipeline TOML; None = the built-in default.")
    verifier_version: str | None = Field(
        None, min_length=1, description=
        "A verifier version file written by `evolve augment` (JSON): its added tests join the hidden tests "
        "of the tasks it names, so training rewards and held-out verdicts come from the augmented tests; "
        "held-out pass@k is also reported under the tasks' own tests (``heldout_original``, with the gap). "
        "The run records the version's hash and provenance (``verifier_version`` in its config); resume and "
        "replay refuse a file that holds another version. None = the tasks' own tests.")
    seed_prompt: str = Field(
        "prompts/tiny-coder.toml", description=
        "Seed prompt candidate (TOML with a [components] table).")
    tasks_per_generation: int = Field(8, ge=1, description="Train tasks rolled out per generation.")
    samples_per_task: int = Field(8, ge=1, description="G: samples per task (one GRPO group).")
    heldout_tasks: int = Field(
        48, ge=1, description=
        "Held-out tasks evaluated after every generation (a fixed subset).")
    heldout_samples: int = Field(8, ge=1, description="Samples per held-out task (pass@k needs k <= this).")
    heldout_each_generation: bool = Field(
        True, description=
        "Sample the held-out check (heldout_tasks x heldout_samples) after every generation. false: only at "
        "generation 0; learning generations are followed by their train reward and pass rate, and the "
        "held-out figure is ``heldout_full`` at the start and the end (heldout_final_tasks must be set). "
        "On a real model the check costs as much sampling as the learning (issue 36).")
    one_request: bool = Field(
        False, description=
        "Send every prompt arm's rollouts of a generation to the engine as one request (vLLM: a prompt's "
        "samples depend only on the request's seed, so the arms keep their common random numbers); "
        "backends without that property (HF) keep one request per arm.")
    heldout_ks: tuple[int, ...] = Field(
        (1, 4, 8), strict=False, description=
        "k values of the pass@k reported on held-out tasks.")
    prompt: PromptEvolutionConfig = Field(
        default_factory=PromptEvolutionConfig, description=
        "Prompt evolution: the [loop.prompt] table (evolve/prompt/config.py), every field under its own "
        "name: reflection_lm, api_base, timeout_s, proposals_per_step, lessons_dir, max_lessons, ...")
    recurring_failure_min_groups: int = Field(
        2, description=
        "A failure class seen in at least this many groups also goes to reflection.")
    max_rollouts: int | None = Field(
        None, ge=1, description=
        "Stop once this many learning rollouts (train + candidate) were spent; None = no budget.")
    verifier_jobs: int = Field(2, ge=1, description="Parallel sandbox jobs.")
    attribution: bool = Field(
        True, description=
        "When the prompt changes, also evaluate held-out with the old prompt on the new weights, to split "
        "the gain between the two levers.")

    @field_validator("selection", mode="before")
    @classmethod
    def _selection_type(cls, value: Any) -> Any:
        # a [loop.selection] table without `type` is in-group selection with those settings
        return {"type": "in_group", **value} if isinstance(value, dict) and "type" not in value else value

    @field_validator("task_columns")
    @classmethod
    def _columns(cls, value: dict[str, str]) -> dict[str, str]:
        from evolve.env.task_source import check_columns

        try:
            return check_columns(value, "task_columns")
        except ConfigError as e:
            raise ValueError(str(e).removeprefix("task_columns: ")) from None

    @field_validator("heldout_ks")
    @classmethod
    def _ks(cls, value: tuple[int, ...], info: ValidationInfo) -> tuple[int, ...]:
        samples = info.data.get("heldout_samples")  # declared before heldout_ks: already checked
        if samples is not None and any(k < 1 or k > samples for k in value):
            raise ValueError(f"must be integers in 1..heldout_samples ({samples}), got {list(value)}")
        return value

    @field_validator("heldout_each_generation")
    @classmethod
    def _heldout_off(cls, value: bool, info: ValidationInfo) -> bool:
        # declared after heldout_final_tasks: without it a run off the check would measure no held-out at the end
        if not value and info.data.get("heldout_final_tasks") is None:
            raise ValueError("false needs heldout_final_tasks (the held-out figure at the start and the end)")
        return value

    # ---- construction -------------------------------------------------------------------------
    @classmethod
    def from_recorded(cls, data: dict[str, Any], source: str = "config", recorded_by: str | None = None) -> LoopConfig:
        """A run's recorded config. One recorded before ``[loop.selection]`` or ``[loop.prompt]`` existed
        (flat keys) is upgraded when it ran under rules that still exist, and refused with one line naming
        the code version that recorded it otherwise (``evolve.loop.legacy``), so resume and replay of an
        older run follow its own rules or do not run at all."""
        return cls.from_dict(upgrade_recorded(data, source, recorded_by), source=source)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "config", where: str = "") -> LoopConfig:
        """``where``: the prefix keys are named with in errors (``--loop`` for command-line values)."""
        moved = next((k for k in MOVED if k in data), None)
        if moved:  # one name per setting: the prompt evolution's own
            raise ConfigError(f"{source}: {moved} is now prompt.{MOVED[moved]} (the [loop.prompt] table; "
                              f"--loop.prompt.{MOVED[moved]} on the command line)")
        return validate_as(cls, data, source, where, roots=run_roots())

    @classmethod
    def from_toml(cls, path: str | Path) -> LoopConfig:
        path = Path(path)
        data = read_toml(path, not_found="config file not found")  # extends = "other.toml" resolved
        return cls.from_dict(loop_table(data), source=str(path))

    @property
    def selection_signal(self) -> str:
        """``task_scores``' ``by`` for prompt selection: the verdict, or under the random control its
        draw (which stands in for both levers)."""
        return "reward" if self.reward == "random" else "passed"

    def with_overrides(self, **overrides: Any) -> LoopConfig:
        """A copy with some fields replaced (None = keep); a nested table may be given as a dict."""
        data = self.to_dict()
        for key, value in overrides.items():
            if value is not None:
                data[key] = value.model_dump() if isinstance(value, BaseModel) else value
        return LoopConfig.from_dict(data, source="command line", where="--loop")

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def loop_table(data: dict[str, Any]) -> dict[str, Any]:
    """The loop's table of a config file: ``[loop]``, or a file without it is the loop table itself,
    less ``[cluster]``."""
    return data["loop"] if "loop" in data else {k: v for k, v in data.items() if k != "cluster"}


def run_roots() -> dict[str, type[BaseModel]]:
    """The components a run's settings live in, by their dotted root (``--loop.X``, ``--policy.X``,
    ``--cluster.X``): where an unknown key is looked for to say where it belongs."""
    from evolve.cluster.config import ClusterConfig
    from evolve.policy.spec import PolicySpec

    return {"loop": LoopConfig, "policy": PolicySpec, "cluster": ClusterConfig}


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
