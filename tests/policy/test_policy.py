"""Generation, updates, checkpoints and LoRA on a real tiny Qwen2 model (built offline)."""

from __future__ import annotations

import pytest
import torch

from evolve.errors import EvolveError
from evolve.policy import PolicySpec, load_policy
from evolve.policy.updater import _Row, collate, completion_logprobs
from evolve.rollout import Rollout

PROMPTS = [
    [{"role": "user", "content": "def f(xs): return the sum"}],
    [{"role": "system", "content": "Write Python."}, {"role": "user", "content": "count the negatives in xs"}],
    [{"role": "user", "content": "largest even number, or 0"}],
]


def _spec(model_dir, **over) -> PolicySpec:
    base = {"model": str(model_dir), "sampling": {"max_new_tokens": 16}, "seed": 3}
    for key, value in over.items():
        base[key] = {**base.get(key, {}), **value} if isinstance(value, dict) else value
    return PolicySpec.from_dict(base)


def _rollouts(samples, rewards) -> list[list[Rollout]]:
    groups = []
    for g, (group, rs) in enumerate(zip(samples, rewards, strict=True)):
        groups.append([Rollout(task_id=f"t{g}", group=g, sample_index=i, prompt_version="p", weights_version="w",
                               messages=PROMPTS[g], prompt_text=s.prompt_text, completion=s.text, reward=float(r),
                               prompt_ids=s.prompt_ids, completion_ids=s.completion_ids, logprobs=s.logprobs)
                       for i, (s, r) in enumerate(zip(group, rs, strict=True))])
    return groups


def test_generate_is_deterministic_and_logprobs_match_a_forward(random_model_dir):
    policy = load_policy(_spec(random_model_dir, sampling={"temperature": 0.7}))
    a = policy.generate(PROMPTS, n=4, seed=11)
    b = policy.generate(PROMPTS, n=4, seed=11)
    c = policy.generate(PROMPTS, n=4, seed=12)
    ids = lambda out: [[s.completion_ids for s in g] for g in out]  # noqa: E731
    assert ids(a) == ids(b) and ids(a) != ids(c)
    assert [len(g) for g in a] == [4, 4, 4]
    flat = [s for g in a for s in g]
    assert any(not s.truncated for s in flat) or all(len(s.completion_ids) == 16 for s in flat)
    for s in flat:
        assert len(s.logprobs) == len(s.completion_ids) > 0
        assert s.truncated == (s.completion_ids[-1] != policy.tokenizer.eos_token_id)
        assert s.prompt_text.endswith("<|im_start|>assistant\n")
    # Recompute with one training-style forward (left-padded prompts, right-padded completions).
    rows = [_Row(s.prompt_ids, s.completion_ids, s.logprobs, 0.0) for s in flat]
    t = collate(rows, policy.tokenizer.pad_token_id)
    with torch.no_grad():
        lp = completion_logprobs(policy.model, *t, temperature=0.7)
    for i, s in enumerate(flat):
        got = lp[i, :len(s.logprobs)]
        assert torch.allclose(got, torch.tensor(s.logprobs), atol=1e-4), float((got - torch.tensor(s.logprobs)).abs().max())


def test_update_changes_weights_and_reports_zero_variance(random_model_dir):
    policy = load_policy(_spec(random_model_dir, optimizer={"lr": 1e-3}))
    samples = policy.generate(PROMPTS, n=4, seed=0)
    before = policy.weights_hash()
    groups = _rollouts(samples, [[1, 0, 0, 1], [0, 0, 0, 0], [0.5, 1, 0, 0]])
    stats = policy.update(groups)
    assert policy.weights_hash() != before
    assert stats.zero_variance_fraction == pytest.approx(1 / 3)
    assert stats.all_fail_fraction == pytest.approx(1 / 3)
    assert stats.n_groups == 3 and stats.n_trained_groups == 2
    assert stats.n_tokens == sum(len(s.completion_ids) for g in (samples[0], samples[2]) for s in g)
    assert stats.grad_norm > 0 and stats.logprob_gap < 1e-4 and stats.optimizer_steps == 1
    assert all(r.advantage == 0.0 for r in groups[1]) and groups[0][0].advantage > 0 > groups[0][1].advantage
    assert set(stats.to_dict()) >= {"loss", "kl", "clip_fraction", "grad_norm", "mean_advantage_abs",
                                    "zero_variance_fraction", "n_groups", "n_tokens", "lr", "seconds"}
    # A batch with no signal at all leaves the weights alone.
    h = policy.weights_hash()
    assert policy.update(_rollouts(samples, [[1] * 4, [0] * 4, [1] * 4])).n_trained_groups == 0
    assert policy.weights_hash() == h


def test_ngrpo_learns_from_all_fail_groups_with_kl_and_inner_epochs(random_model_dir):
    spec = _spec(random_model_dir, grpo={"advantage": "ngrpo", "loss_type": "dapo", "epsilon_low": 0.16,
                                       "epsilon_high": 0.24, "beta": 0.05, "num_iterations": 3,
                                       "micro_batch_size": 5}, optimizer={"lr": 1e-2})
    policy = load_policy(spec)
    samples = policy.generate(PROMPTS, n=4, seed=0)
    before = policy.weights_hash()
    stats = policy.update(_rollouts(samples, [[0] * 4, [0] * 4, [1] * 4]))
    assert stats.n_trained_groups == 2 and stats.all_fail_fraction == pytest.approx(2 / 3)
    assert stats.optimizer_steps == 3 and policy.updater.step == 3
    assert stats.kl > 0  # the policy moved away from the frozen reference over the inner epochs
    assert stats.clip_fraction > 0  # lr 1e-2 over 3 epochs pushes ratios past the clip
    assert policy.weights_hash() != before


def _train_steps(policy, steps, seed0):
    for k in range(steps):
        samples = policy.generate(PROMPTS, n=4, seed=seed0 + k)
        rewards = [[float(sum(s.completion_ids[:3]) % 2) for s in g] for g in samples]
        policy.update(_rollouts(samples, rewards))


@pytest.mark.parametrize("finetune", ["full", "lora"])
def test_checkpoint_resume_is_bit_exact(random_model_dir, tmp_path, finetune):
    spec = _spec(random_model_dir, finetune=finetune, optimizer={"lr": 5e-3, "warmup_steps": 2,
                                                                "scheduler": "cosine", "total_steps": 6},
                 lora={"r": 4, "target_modules": ["q_proj", "v_proj"]})
    straight = load_policy(spec)
    _train_steps(straight, 4, 100)

    first = load_policy(spec)
    _train_steps(first, 2, 100)
    ckpt = first.save(tmp_path / "ckpt")
    torch.manual_seed(999)  # scramble the global RNG: no state is restored, so nothing may depend on it
    resumed = load_policy(spec, checkpoint_dir=ckpt)
    assert resumed.weights_hash() == first.weights_hash()
    assert resumed.updater.step == first.updater.step >= 1 and resumed.generate_calls == 2
    _train_steps(resumed, 2, 102)
    assert resumed.weights_hash() == straight.weights_hash()
    assert resumed.updater.scheduler.get_last_lr() == straight.updater.scheduler.get_last_lr()


def test_lora_adapter_loads_with_plain_peft_and_full_with_plain_transformers(random_model_dir, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    lora = load_policy(_spec(random_model_dir, finetune="lora", optimizer={"lr": 1e-2}))
    base_hash = lora.weights_hash()
    samples = lora.generate(PROMPTS, n=4, seed=0)
    lora.update(_rollouts(samples, [[1, 0, 0, 1], [0, 1, 0, 0], [1, 1, 0, 0]]))
    assert lora.weights_hash() != base_hash
    trainable = [n for n, p in lora.model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    d = lora.save(tmp_path / "lora")
    assert (d / "adapter_config.json").exists() and (d / "adapter_model.safetensors").exists()
    plain = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(random_model_dir), str(d))
    ids = torch.tensor([samples[0][0].prompt_ids])
    with torch.no_grad():
        want = lora.model(input_ids=ids).logits
        got = plain(input_ids=ids).logits
    assert torch.allclose(want, got, atol=1e-6)

    full = load_policy(_spec(random_model_dir))
    full.update(_rollouts(full.generate(PROMPTS, n=4, seed=1), [[1, 0, 0, 1], [0, 1, 0, 0], [1, 1, 0, 0]]))
    d2 = full.save(tmp_path / "full")
    reloaded = AutoModelForCausalLM.from_pretrained(str(d2))
    with torch.no_grad():
        assert torch.equal(full.model(input_ids=ids).logits, reloaded(input_ids=ids).logits)


def test_rollouts_without_token_ids_cannot_train(random_model_dir):
    policy = load_policy(_spec(random_model_dir))
    groups = [[Rollout(task_id="t", group=0, sample_index=i, prompt_version="p", weights_version="w",
                       messages=[], prompt_text="", completion="x", reward=float(i)) for i in range(2)]]
    with pytest.raises(EvolveError, match="no token ids"):
        policy.update(groups)


def test_lora_kl_reference_is_the_adapter_disabled(random_model_dir):
    spec = _spec(random_model_dir, finetune="lora", grpo={"beta": 0.1, "num_iterations": 2},
                 optimizer={"lr": 5e-2}, lora={"r": 4})
    policy = load_policy(spec)
    assert policy.updater.reference is None  # no frozen copy: the base is the adapter switched off
    samples = policy.generate(PROMPTS, n=4, seed=0)
    stats = policy.update(_rollouts(samples, [[1, 0, 0, 1], [0, 1, 0, 0], [1, 1, 0, 0]]))
    # Epoch 1 starts at the base (LoRA B = 0, so KL = 0); epoch 2 has moved, so the mean KL is > 0.
    assert stats.kl > 0
    ids = torch.tensor([samples[0][0].prompt_ids])
    with torch.no_grad(), policy.model.disable_adapter():
        base_logits = policy.model(input_ids=ids).logits
    from transformers import AutoModelForCausalLM

    with torch.no_grad():
        plain = AutoModelForCausalLM.from_pretrained(random_model_dir)(input_ids=ids).logits
    assert torch.allclose(base_logits, plain, atol=1e-6)


def test_behaviour_logprobs_as_old_policy(random_model_dir):
    """'behaviour' takes pi_old from the rollouts: stale log-probs make ratios leave the clip range."""
    samples = None
    for mode, want_clip in (("auto", False), ("behaviour", True)):
        policy = load_policy(_spec(random_model_dir, grpo={"old_logprobs": mode}))
        samples = samples or policy.generate(PROMPTS, n=4, seed=0)
        groups = _rollouts(samples, [[1, 0, 0, 1], [0, 1, 0, 0], [1, 1, 0, 0]])
        for g in groups:  # pretend an older policy sampled them: ratio exp(+0.5) for every token
            for r in g:
                r.logprobs = [lp - 0.5 for lp in r.logprobs]
        stats = policy.update(groups)
        assert (stats.clip_fraction > 0.2) == want_clip, (mode, stats.clip_fraction)
    groups[0][0].logprobs = []
    with pytest.raises(EvolveError, match="behaviour"):
        policy.update(groups)


def _moved(policy, samples, rewards, to: int) -> list[list[Rollout]]:
    """The groups with every odd sample re-rendered under PROMPTS[to] (as evolve/loop/recontext.py does)."""
    target = policy.generate([PROMPTS[to]], n=1, seed=0)[0][0].prompt_ids
    groups = _rollouts(samples, rewards)
    for g in groups:
        for r in g[1::2]:
            r.sampled_prompt_ids, r.prompt_ids = r.prompt_ids, list(target)
    return groups


@pytest.mark.parametrize("iterations", [1, 2])
def test_re_rendered_rows_take_pi_old_under_the_prompt_they_were_sampled_with(random_model_dir, iterations):
    """A completion trained under another prompt than it was sampled with (update_prompt = "incumbent") gets
    pi_old = this model's log-probs under its sampling prompt, computed row by row here as the reference; the
    other rows keep the on-policy pi_old (current log-probs, or recomputed before the inner epochs)."""
    policy = load_policy(_spec(random_model_dir, grpo={"num_iterations": iterations}))
    samples = policy.generate(PROMPTS, n=4, seed=0)
    rewards = [[1, 0, 0, 1], [0, 1, 0, 0], [1, 1, 0, 0]]
    prep = policy.updater.prepare(_moved(policy, samples, rewards, to=2))
    pad = policy.tokenizer.pad_token_id
    for k, batch in enumerate(prep.batches):
        for i, row in enumerate(batch):
            context = row.sampled_prompt_ids or row.prompt_ids
            with torch.no_grad():
                ref = completion_logprobs(policy.model, *collate([_Row(context, row.completion_ids, [], 0.0)], pad),
                                          temperature=policy.spec.sampling.temperature)[0]
            n = len(row.completion_ids)
            if iterations == 1 and not row.sampled_prompt_ids:
                assert not bool(prep.old_rows[k][i])  # on-policy: the current log-probs at the step
            else:
                assert prep.old_rows is None or bool(prep.old_rows[k][i])
                assert torch.allclose(prep.old[k][i, :n], ref, atol=1e-4), (k, i)
    assert any(r.sampled_prompt_ids for b in prep.batches for r in b)


def test_re_rendered_rows_are_importance_weighted(random_model_dir):
    """Under another prompt the ratio pi(y | trained prompt) / pi(y | sampled prompt) leaves the clip range
    (narrowed: the random model's log-probs move by at most ~0.04 between these prompts); re-rendered under
    the prompt they were sampled with, the update is the plain one."""
    narrow = {"grpo": {"epsilon_low": 0.002, "epsilon_high": 0.002}}
    policy = load_policy(_spec(random_model_dir, **narrow))
    samples = policy.generate(PROMPTS, n=4, seed=0)
    rewards = [[1, 0, 0, 1], [0, 1, 0, 0], [1, 1, 0, 0]]
    clip = policy.update(_moved(policy, samples, rewards, to=2)).clip_fraction
    assert clip > 0.05, clip
    same = _rollouts(samples, rewards)
    for g in same:
        for r in g[1::2]:
            r.sampled_prompt_ids = list(r.prompt_ids)
    fresh = load_policy(_spec(random_model_dir, **narrow))
    plain = load_policy(_spec(random_model_dir, **narrow)).update(_rollouts(samples, rewards))
    stats = fresh.update(same)
    assert stats.clip_fraction == 0.0 and stats.loss == pytest.approx(plain.loss, abs=1e-6)
