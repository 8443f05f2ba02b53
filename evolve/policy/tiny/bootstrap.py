"""`ensure_tiny_model`: build (tokenizer, model, SFT, measurement) once per config, then reuse.

The folder ``<runs>/models/tiny-coder-<config-hash12>/`` is written under a temp
name and renamed into place, so it is either absent or complete; a lock file keeps
two processes from building the same config at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import itertools
import json
import os
import shutil
import time
from pathlib import Path

from evolve.policy.tiny.config import BootstrapConfig
from evolve.policy.tiny.shipped import install_shipped
from evolve.util.atomic import atomic_write_text
from evolve.util.repro import code_version, package_versions

MANIFEST = "bootstrap.json"
TRAINED = "trained.json"  # written after the weights: training finished, only measurement left


def runs_root(runs_dir: str | Path | None) -> Path:
    return Path(runs_dir or os.environ.get("EVOLVE_RUNS_DIR") or "runs")


def model_dir(cfg: BootstrapConfig, runs_dir: str | Path | None = None) -> Path:
    return runs_root(runs_dir) / "models" / f"tiny-coder-{cfg.build_hash()}"


def is_complete(path: Path) -> bool:
    return (path / MANIFEST).is_file() and (path / "config.json").is_file()


def read_manifest(path: Path) -> dict:
    return json.loads((path / MANIFEST).read_text())


@contextlib.contextmanager
def _lock(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # released when the file closes, even if the process dies
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def ensure_tiny_model(cfg: BootstrapConfig | None = None, runs_dir: str | Path | None = None,
                      progress: bool = True, force: bool = False) -> Path:
    """The model folder for ``cfg`` (default preset): cached, else installed from its shipped copy
    (``shipped.py``), else built; ``force`` builds from scratch."""
    cfg = cfg or BootstrapConfig.preset("default")
    out = model_dir(cfg, runs_dir)
    if is_complete(out) and not force:
        return out
    with _lock(out.parent / f".{out.name}.lock"):
        if is_complete(out) and not force:
            return out  # another process built it while we waited
        if not force and install_shipped(cfg, out):
            return out  # the preset's model as shipped, hash-checked: every machine runs the same weights
        partial = out.parent / f".{out.name}.partial"
        if force:
            shutil.rmtree(partial, ignore_errors=True)
        # A failed or interrupted build keeps its trained weights in `partial`: the next call
        # resumes at the measurement (the build is deterministic, so nothing is lost).
        build(cfg, partial, progress=progress)
        if out.exists():
            old = out.parent / f".{out.name}.old-{os.getpid()}"
            os.replace(out, old)
            shutil.rmtree(old, ignore_errors=True)
        os.replace(partial, out)
    return out


def weights_sha256(model) -> str:
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(t.detach().contiguous().cpu().numpy().tobytes())
    return h.hexdigest()


def build(cfg: BootstrapConfig, dest: Path, progress: bool = True) -> dict:
    """Train tokenizer and model into ``dest``, reload them offline, measure, write bootstrap.json."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from evolve.policy.tiny.measure import measure
    from evolve.policy.tiny.model import n_params

    threads = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    timings: dict[str, float] = {}
    t_all = time.perf_counter()
    load0 = os.getloadavg()[0]
    ui = _Progress(progress)
    trained = dest / TRAINED
    try:
        with ui:
            resumed = trained.is_file()
            if resumed:
                stats, timings = (json.loads(trained.read_text())[k] for k in ("train", "timings"))
            else:
                shutil.rmtree(dest, ignore_errors=True)
                stats = _train_into(dest, cfg, ui, timings)
                atomic_write_text(trained, json.dumps({"train": stats, "timings": timings}))
            t, cpu_m = time.perf_counter(), time.process_time()
            # Measure what was saved, reloaded the way every consumer loads it.
            model = AutoModelForCausalLM.from_pretrained(dest)
            tok = AutoTokenizer.from_pretrained(dest)
            figures = {}
            if cfg.measure:
                ui.stage("measure (held-out, sandboxed)", 1)
                figures = measure(model, tok, cfg, on_progress=lambda d, n: ui.set(d, n))
            timings["measure_s"] = time.perf_counter() - t
    finally:
        torch.set_num_threads(threads)
    timings["total_s"] = time.perf_counter() - t_all + (timings["train_total_s"] if resumed else 0.0)
    # CPU seconds of this process (the sandbox's are not included): a load-independent figure,
    # since on a shared machine wall time depends on what else runs.
    timings["cpu_s"] = timings["train_cpu_s"] + time.process_time() - cpu_m
    timings["loadavg_start"], timings["loadavg_end"] = load0, os.getloadavg()[0]
    manifest = {
        "config": cfg.to_dict(), "config_hash": cfg.build_hash(), "n_params": n_params(model),
        "vocab": len(tok), "weights_sha256": weights_sha256(model),
        "train": {k: v for k, v in stats.items() if k != "losses"},
        "loss_curve": [round(x, 4) for x in stats["losses"][:: max(1, cfg.steps // 50)]],
        "timings": {k: round(v, 2) for k, v in timings.items()}, "figures": figures,
        "code_version": code_version(), "packages": package_versions(), "resumed_measurement": resumed,
    }
    atomic_write_text(dest / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True))
    return manifest


def _train_into(dest: Path, cfg: BootstrapConfig, ui, timings: dict) -> dict:
    """Tokenizer, corpus, model init and SFT; saves model and tokenizer into ``dest``."""
    import torch

    from evolve.policy.tiny.corpus import doc_text, iter_docs, pack
    from evolve.policy.tiny.model import make_model
    from evolve.policy.tiny.sft import train
    from evolve.policy.tiny.tokenizer import train_tokenizer

    t0 = t = time.perf_counter()
    cpu0 = time.process_time()
    ui.stage("tokenizer + corpus", None)
    docs = list(itertools.islice(iter_docs(cfg, seed_offset=1), cfg.tokenizer_docs))
    tok = train_tokenizer([doc_text(d) for d in docs], cfg.vocab_size, cfg.context)
    data = pack(cfg, tok, cfg.steps * cfg.batch_size)
    timings["corpus_s"], t = time.perf_counter() - t, time.perf_counter()
    torch.manual_seed(cfg.seed)
    model = make_model(cfg, tok)
    ui.stage("SFT", cfg.steps)
    stats = train(model, data, cfg, on_step=lambda s, loss, lr: ui.advance(1, f"loss {loss:.3f}"))
    dest.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(dest)
    tok.save_pretrained(dest)
    timings["train_s"] = time.perf_counter() - t
    timings["train_total_s"] = time.perf_counter() - t0  # counted in total_s if a later call resumes
    timings["train_cpu_s"] = time.process_time() - cpu0
    return stats


class _Progress:
    """A rich progress bar on stderr, or nothing."""

    def __init__(self, enabled: bool):
        self.enabled, self.p, self.task = enabled, None, None

    def __enter__(self):
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.p = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                              TextColumn("{task.fields[info]}"), TimeElapsedColumn(),
                              console=Console(stderr=True), transient=False)
            self.p.__enter__()
        return self

    def __exit__(self, *exc):
        if self.p:
            self.p.__exit__(*exc)

    def stage(self, name: str, total: int | None) -> None:
        if self.p:
            if self.task is not None:
                self.p.update(self.task, completed=self.p.tasks[-1].total or 1, total=self.p.tasks[-1].total or 1)
            self.task = self.p.add_task(name, total=total, info="")

    def advance(self, n: int, info: str = "") -> None:
        if self.p:
            self.p.update(self.task, advance=n, info=info)

    def set(self, done: int, total: int) -> None:
        if self.p:
            self.p.update(self.task, completed=done, total=total)
