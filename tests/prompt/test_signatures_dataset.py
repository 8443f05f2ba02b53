import random

from prompt_helpers import div_failure, empty_failure, rollout

from evolve.prompt.config import PromptEvolutionConfig
from evolve.prompt.reflective_dataset import build_reflective_dataset
from evolve.prompt.signatures import group_failures, input_shape, output_shape, rollout_signature


def test_shapes_of_failing_inputs_and_outputs():
    assert input_shape("([],)") == {"empty"}
    assert input_shape("([-3, 0, 5], 2)") == {"negative", "zero"}
    assert input_shape("[7]") == {"single"}
    assert "division" in output_shape("3", "3.5")
    assert "off-by-one" in output_shape("4", "3")
    assert output_shape("[1]", "None") == {"returned-none"}


def test_signature_groups_by_error_shape_and_message():
    rs = [empty_failure("t1"), empty_failure("t2"), div_failure("t3"), rollout("t4", True)]
    sig = rollout_signature(rs[0])
    assert sig.error_type == "ValueError" and "empty" in sig.features and "sequence" in sig.features
    assert rollout_signature(rs[3]) is None
    groups = group_failures(rs)
    assert [g.count for g in groups] == [2, 1]
    assert groups[0].task_ids == ["t1", "t2"]
    assert "division" in groups[1].signature.features


def test_minibatch_is_failures_first_with_contrast_successes():
    cfg = PromptEvolutionConfig(reflection_minibatch_size=5, contrast_successes=2)
    rs = [empty_failure(f"e{i}") for i in range(6)] + [div_failure("d0")] + [rollout("e1", True),
                                                                           rollout("z", True)]
    ds = build_reflective_dataset(rs, cfg, random.Random(0))
    assert len(ds.records) == 5
    assert [r["passed"] for r in ds.records] == [False, False, False, True, True]
    # round-robin over signatures: the rare division failure is not crowded out
    assert "d0" in [r["task_id"] for r in ds.records]
    # the contrast success on a failing task comes first
    failing = {r["task_id"] for r in ds.records if not r["passed"]}
    assert ds.records[3]["task_id"] in failing or "e1" not in failing
    assert ds.n_failures == 7 and ds.n_rollouts == 9


def test_thousand_failures_give_a_bounded_request():
    cfg = PromptEvolutionConfig(reflection_minibatch_size=8, max_field_chars=300, max_reflection_chars=6000)
    long = "x = 1\n" * 5000
    rs = [rollout(f"t{i}", False, f"Error{i % 40}", f"([{i}] * {i},)", completion=long, prompt=long,
                  message="boom " * 200) for i in range(1000)]
    ds = build_reflective_dataset(rs, cfg, random.Random(1))
    assert ds.n_failures == 1000
    assert 0 < len(ds.records) <= 8
    assert len(ds.groups) <= cfg.max_signature_groups
    assert ds.chars() <= 6000
    assert all(len(r["output"]) <= 300 and r["output_truncated"] for r in ds.records)


def test_dataset_is_deterministic_given_the_rng():
    cfg = PromptEvolutionConfig(reflection_minibatch_size=3)
    rs = [empty_failure(f"e{i}") for i in range(10)]
    a = build_reflective_dataset(rs, cfg, random.Random(5)).to_dict()
    b = build_reflective_dataset(rs, cfg, random.Random(5)).to_dict()
    assert a == b
