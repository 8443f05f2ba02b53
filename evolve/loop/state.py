"""A generation's full state, as one content-addressed artifact folder.

Everything needed to continue from a generation (resume), branch from it (fork)
or re-run its child (replay) lives here:

    policy/            Policy.save(): HF weights, optimizer, scheduler, RNG, sampler
    prompt.json        the prompt evolver's state (pool, frontier, scores)
    loop.json          task sampler cursor, carried rollouts, counters

The folder is written to a temp dir, then stored blob by blob (each blob
tmp + fsync + rename) and referenced by the manifest's sha on the generation row.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from evolve.rollout import Rollout, Turn
from evolve.util.atomic import atomic_write_text
from evolve.util.hashing import canonical_json
from evolve.verification.types import VerifyResult


@dataclass
class SamplerState:
    """Deterministic task sampler: a seeded permutation per epoch and a cursor into it."""

    seed: int
    epoch: int = 0
    cursor: int = 0

    def take(self, n_tasks: int, k: int) -> list[int]:
        import numpy as np

        out: list[int] = []
        while len(out) < k:
            order = np.random.default_rng(self.seed + self.epoch).permutation(n_tasks)
            take = min(k - len(out), n_tasks - self.cursor)
            out += [int(i) for i in order[self.cursor:self.cursor + take]]
            self.cursor += take
            if self.cursor >= n_tasks:
                self.epoch, self.cursor = self.epoch + 1, 0
        return out


@dataclass
class LoopState:
    """Loop-side state carried from a generation to its children."""

    sampler: SamplerState
    rollouts_spent: int = 0  # learning rollouts so far on this branch (train + candidate)
    carried: list[dict] = field(default_factory=list)  # on-policy candidate rollouts for the next update
    heldout_history: list[float] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"sampler": asdict(self.sampler), "rollouts_spent": self.rollouts_spent,
                "carried": self.carried, "heldout_history": self.heldout_history}

    @classmethod
    def from_dict(cls, d: dict) -> LoopState:
        return cls(sampler=SamplerState(**d["sampler"]), rollouts_spent=d["rollouts_spent"],
                   carried=d.get("carried", []), heldout_history=d.get("heldout_history", []))


def rollout_to_dict(r: Rollout) -> dict:
    d = asdict(r)
    d["result"] = r.result.to_dict() if r.result else None
    return d


def rollout_from_dict(d: dict) -> Rollout:
    d = dict(d)
    d["result"] = VerifyResult.from_dict(d["result"]) if d.get("result") else None
    d["turns"] = [turn_from_dict(t) for t in d.get("turns") or []]
    return Rollout(**d)


def turn_from_dict(d: dict) -> Turn:
    span = d.get("token_span")
    return Turn(**{**d, "token_span": tuple(span) if span is not None else None})


def write_state_folder(dest: Path, policy, prompt_state: dict, loop_state: LoopState) -> Path:
    """Write every part of a generation's state into ``dest`` (a fresh folder)."""
    dest.mkdir(parents=True, exist_ok=True)
    policy.save(dest / "policy")
    # ASCII JSON: model text may hold lone surrogates, which have no UTF-8 form; \u escapes keep them.
    atomic_write_text(dest / "prompt.json", _ascii_json(prompt_state))
    atomic_write_text(dest / "loop.json", _ascii_json(loop_state.to_dict()))
    return dest


def _ascii_json(obj) -> str:
    return json.dumps(json.loads(canonical_json(obj)), sort_keys=True, separators=(",", ":"))


def store_state(artifacts, policy, prompt_state: dict, loop_state: LoopState) -> tuple[str, str]:
    """Store the state folder; returns (state sha, policy-checkpoint sha)."""
    with tempfile.TemporaryDirectory(prefix="evolve-state-") as tmp:
        folder = write_state_folder(Path(tmp) / "state", policy, prompt_state, loop_state)
        policy_sha = artifacts.put_dir(folder / "policy")
        state_sha = artifacts.put_dir(folder)
    return state_sha, policy_sha


def read_state_folder(folder: Path) -> tuple[dict, LoopState]:
    """The prompt evolver's and the loop's state (an ``rng.pkl`` from older runs is ignored: seeds are derived)."""
    prompt_state = json.loads((folder / "prompt.json").read_text(encoding="utf-8"))
    loop_state = LoopState.from_dict(json.loads((folder / "loop.json").read_text(encoding="utf-8")))
    return prompt_state, loop_state
