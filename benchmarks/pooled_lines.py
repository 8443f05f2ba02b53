"""The lines the 1.5B reflector wrote from the pooled failure view (issue 37 item 4, the "after" to the
headroom probe's ``reflector`` lines, which it wrote from one generation's truncated failures): every line
a reflection proposal added to its parent in the powered ablation's kept lineage databases
(benchmarks/results/lineage/ablation_qwen_powered/*.db.gz), read through the lineage store.

Every proposal is recorded as a prompt version whether or not it was ever sampled or promoted, so the list
is what reflection wrote, not what the selection rule kept.
"""

from __future__ import annotations

import gzip
import shutil
import tempfile
from pathlib import Path

KEPT = Path(__file__).resolve().parent / "results" / "lineage" / "ablation_qwen_powered"


def _lines(text: str) -> list[str]:
    return [x.strip() for x in text.splitlines() if x.strip()]


def reflection_lines(db_url: str) -> list[str]:
    """Every line a reflection proposal in this lineage database adds to its first parent's lessons, in the
    order the proposals were recorded."""
    from sqlalchemy import select

    from evolve.lineage.models import PromptVersion
    from evolve.lineage.store import LineageStore

    out: list[str] = []
    with LineageStore.open(db_url, create=False, auto_upgrade=False) as store:
        with store.session() as s:
            versions = list(s.scalars(select(PromptVersion).order_by(PromptVersion.created_at, PromptVersion.id)))
        lessons = {v.id: _lines(v.components.get("lessons", "")) for v in versions}
        for v in versions:
            if v.proposed_by != "reflection":
                continue
            parents = store.prompt_parents(v.id)
            before = set(lessons.get(parents[0], [])) if parents else set()
            out += [x for x in lessons[v.id] if x not in before]
    return out


def pooled_lines(kept: Path = KEPT) -> list[tuple[str, str]]:
    """(kept run, line) of every distinct line, first writer kept, in run-name order; runs that never reflect
    (weights-only) add nothing."""
    seen: dict[str, str] = {}
    for gz in sorted(kept.glob("*.db.gz")):
        run = gz.name.removesuffix(".db.gz")
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / f"{run}.db"
            with gzip.open(gz, "rb") as f, open(db, "wb") as g:
                shutil.copyfileobj(f, g)
            for line in reflection_lines(f"sqlite:///{db}"):
                seen.setdefault(line, run)
    return [(run, line) for line, run in seen.items()]
