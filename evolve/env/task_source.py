"""A user's own tasks as an environment: a task JSONL, or a Hugging Face dataset saved to disk.

``suite = "my_tasks.jsonl"`` (or a ``Dataset.save_to_disk`` folder) gives a single-turn environment
over those rows, read with the schema of ``evolve verify --tasks`` (``evolve.verification.tasks``;
field by field in docs/environments.md), with an optional column mapping (``task_columns``: schema
field -> the row's column). Everything is read and checked when the environment is made, so a bad
row stops a run before anything runs, with one line naming the file, line (or row) and field.

The train / held-out split is a function of the task ids, ``split_seed`` and ``heldout_fraction``
only: each id's rank under a seeded hash, so the same tasks give the same split in any row order.
The run records the held-out ids (``suite_split``) and a digest of the tasks (``task_source``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from pathlib import Path

from evolve.env.suites import SuiteEnv
from evolve.errors import ConfigError
from evolve.verification.tasks import TASK_FIELDS, load_tasks, tasks_from_rows
from evolve.verification.types import Task

TASK_FILE_SUFFIXES = (".jsonl", ".jsonl.gz")
# What Dataset.save_to_disk / DatasetDict.save_to_disk write into their folder.
_DATASET_MARKERS = ("state.json", "dataset_info.json", "dataset_dict.json")


def names_task_source(name: str) -> bool:
    """Whether ``name`` means a user's task file or dataset folder (existing or not: a missing task
    file is then told as such, not as an unknown environment)."""
    path = Path(name)
    if name.endswith(TASK_FILE_SUFFIXES):
        return True
    return path.is_dir() and any((path / m).exists() for m in _DATASET_MARKERS)


def check_columns(columns: Mapping[str, str] | None, source: str = "task_columns") -> dict[str, str]:
    """The mapping, checked: keys are schema fields, values column names."""
    columns = dict(columns or {})
    for fld, col in columns.items():
        if fld not in TASK_FIELDS:
            raise ConfigError(f"{source}: unknown task field {fld!r} (fields: {', '.join(TASK_FIELDS)})")
        if not isinstance(col, str) or not col:
            raise ConfigError(f"{source}: the column of {fld!r} must be a non-empty string, got {col!r}")
    return columns


def heldout_ids(ids: list[str], split_seed: int, heldout_fraction: float) -> set[str]:
    """The held-out share of ``ids``: the first round(n * fraction) (at least 1, at most n - 1) under
    a hash of (seed, id), so the split depends on the set of ids, never on their order."""
    if not 0 < heldout_fraction < 1:
        raise ConfigError(f"heldout_fraction must be in (0, 1), got {heldout_fraction}")
    if len(ids) < 2:
        raise ConfigError(f"{len(ids)} task(s): a train and a held-out split need at least 2")
    cut = min(len(ids) - 1, max(1, round(len(ids) * heldout_fraction)))
    ranked = sorted(ids, key=lambda i: hashlib.sha256(f"{split_seed}\0{i}".encode()).hexdigest())
    return set(ranked[:cut])


def tasks_digest(tasks: list[Task]) -> str:
    """sha256 of the tasks as read (ids, prompts, tests, ...), in id order: a run records it."""
    rows = sorted(json.dumps(t.to_dict(), sort_keys=True, default=repr) for t in tasks)
    return hashlib.sha256("\n".join(rows).encode()).hexdigest()


def _dataset_rows(path: Path) -> Iterator[tuple[str, dict]]:
    try:
        import datasets
    except ImportError:
        raise ConfigError(f"{path}: a dataset folder needs the `datasets` package (pip install datasets)") from None
    try:
        ds = datasets.load_from_disk(str(path))
    except Exception as e:  # noqa: BLE001 - any failure to open is the user's folder, told in one line
        raise ConfigError(f"{path}: not a dataset saved with save_to_disk ({type(e).__name__}: {e})") from None
    if isinstance(ds, datasets.DatasetDict):
        raise ConfigError(f"{path}: a DatasetDict with splits {', '.join(ds)}: give one split's folder "
                          f"(e.g. {path / next(iter(ds))}); evolve makes its own train/held-out split")
    for i, row in enumerate(ds):
        yield f"{path}: row {i}", row


def read_task_source(name: str, columns: Mapping[str, str] | None = None) -> list[Task]:
    """Every task of a task file or dataset folder; the first bad row raises ConfigError."""
    columns = check_columns(columns)
    path = Path(name)
    if path.is_dir():
        tasks = tasks_from_rows(_dataset_rows(path), path.name, columns)
    elif not path.is_file():
        raise ConfigError(f"task file not found: {name}")
    else:
        tasks = load_tasks(path, columns=columns)
    if not tasks:
        raise ConfigError(f"{name}: no tasks")
    return tasks


def load_task_source(name: str, split_seed: int = 0, heldout_fraction: float = 0.25,
                     task_columns: Mapping[str, str] | None = None, **_options) -> SuiteEnv:
    """The single-turn environment over a user's tasks, split by ``heldout_ids``."""
    tasks = read_task_source(name, task_columns)
    held = heldout_ids([t.task_id for t in tasks], split_seed, heldout_fraction)
    parts = {"train": [t for t in tasks if t.task_id not in held],
             "heldout": [t for t in tasks if t.task_id in held]}
    record = {"suite_split": {"split_seed": split_seed, "heldout_fraction": heldout_fraction,
                              "heldout": [t.task_id for t in parts["heldout"]]},
              "task_source": {"path": name, "tasks": len(tasks), "sha256": tasks_digest(tasks)}}
    stem = Path(name).name.split(".")[0] or "tasks"
    # chat=True: rows marked meta.reply_format = "chat" have their replies taken apart; others pass through
    return SuiteEnv(stem, lambda: parts, chat=True, record=record)


def parse_columns(text: str | None) -> dict[str, str] | None:
    """``--columns prompt=question,task_id=id`` as a mapping (None when not given)."""
    if text is None:
        return None
    out = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        fld, sep, col = item.partition("=")
        if not sep or not fld.strip() or not col.strip():
            raise ConfigError(f"--columns: {item!r} is not FIELD=COLUMN (e.g. prompt=question,task_id=id)")
        out[fld.strip()] = col.strip()
    return check_columns(out, "--columns")
