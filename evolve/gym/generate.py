"""Seeded task generation: inputs, hidden tests with targeted edge cases, splits.

Expected values come from running the trusted reference in-process. Hidden tests
are chosen so that every applicable bug mode is caught by at least one of them
(a mode no input can reveal is dropped from ``meta["bug_modes"]``).
"""

from __future__ import annotations

import hashlib
import random

from pydantic import Field, model_validator

from evolve.gym import check
from evolve.gym.grammar import Composition, all_compositions
from evolve.util.config_model import ConfigModel
from evolve.verification.types import Task, TestCase

SUITE = "tiny-coder"
WORDS = ("a", "to", "ox", "cat", "sky", "pen", "idea", "moon", "data", "tree", "apple", "java", "banana",
         "level", "mama", "go")


class GymParams(ConfigModel):
    """Generator parameters (``[generator]`` in verifiers/tiny_coder.toml)."""

    split_seed: int = Field(1234, description="Fixes which compositions are held out, independent of the task "
                            "seed.")
    heldout_fraction: float = Field(0.12, gt=0.0, lt=1.0, description="Share of compositions held out (unseen "
                                    "combinations of seen pieces).")
    train_variants: int = Field(2, ge=1, description="Tasks per train composition (different inputs).")
    heldout_variants: int = Field(1, ge=1, description="Tasks per held-out composition.")
    hidden_min: int = Field(10, ge=1, description="Fewest hidden tests per task, edge cases included.")
    hidden_max: int = Field(13, ge=1, description="Most hidden tests per task (the range is inclusive).")
    visible: int = Field(2, ge=1, description="Visible examples in the prompt (short: the model's context is "
                         "small).")

    @model_validator(mode="after")
    def _range(self) -> GymParams:
        if self.hidden_min > self.hidden_max:
            raise ValueError(f"hidden_min {self.hidden_min} is above hidden_max {self.hidden_max}")
        return self


def _rng(*parts) -> random.Random:
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def is_heldout(c: Composition, p: GymParams) -> bool:
    r = _rng("split", p.split_seed, *c.names).random()
    return r < p.heldout_fraction


# ---- inputs -------------------------------------------------------------------------------------

def _k(c: Composition, rng: random.Random) -> int:
    if c.source.elem == "word":
        return rng.randint(1, 5)
    if c.source.elem == "pair":
        return rng.randint(0, 5)
    return rng.randint(1, 6) if c.source.name == "range" else rng.randint(-3, 5)


def _first(c: Composition, rng: random.Random, small: bool, k: int | None):
    kind = c.source.arg
    if kind == "xs":
        n = rng.randint(2, 4) if small else rng.randint(0, 8)
        pool = list(range(-9, 10)) + ([k, k] if k is not None else [])
        return [rng.choice(pool) for _ in range(n)]
    if kind == "n":
        return rng.randint(1, 7) if small else rng.randint(-2, 12)
    n = rng.randint(2, 3) if small else rng.randint(0, 5)
    return " ".join((w.capitalize() if rng.random() < 0.3 else w) for w in rng.choices(WORDS, k=n))


def _random_input(c: Composition, rng: random.Random, small: bool = False) -> tuple:
    k = _k(c, rng) if c.filter.needs_k else None
    first = _first(c, rng, small, k)
    return (first, k) if k is not None else (first,)


def _edge_inputs(c: Composition, rng: random.Random) -> list[tuple]:
    ks = [_k(c, rng) for _ in range(3)] if c.filter.needs_k else [None]
    out = []
    for k in ks:
        kind = c.source.arg
        if kind == "xs":
            firsts = [[], [0], [-4], [-5, -2, -7], [3, 3, 3], [-1, 0, 1], [1, 2, 3, 4, 5, 6], [2, 4, 6, 8],
                      [9, 1, 9], [5, 4, 3, 3, 2], [-3, -3, 6, 6], [1, 7]]
            if k is not None:
                firsts += [[k], [k, k], [k - 1, k, k + 1], [k + 2, k], [k - 3, k + 3, k]]
        elif kind == "n":
            firsts = [0, 1, 2, 3, -3, 6, 9, 12] + ([k, k + 1, k + 3] if k is not None else [])
        else:
            firsts = ["", "a", "Apple", "banana banana", "Go to the moon", "cat Sky ox", "data java mama"]
            if k is not None:
                firsts += [" ".join(w for w in WORDS if len(w) == k) or "a", "x" * k, "y" * (k + 1)]
        out += [(f, k) if k is not None else (f,) for f in firsts]
    return out


# ---- tasks --------------------------------------------------------------------------------------

def _fmt_call(inputs: tuple, expected) -> str:
    return f"f({', '.join(repr(a) for a in inputs)}) == {expected!r}"


def build_task(c: Composition, variant: int, seed: int, p: GymParams) -> Task:
    rng = _rng("task", seed, c.family, c.comp_id, variant)
    ref = check.compile_function(c.render())
    pool, seen = [], set()
    for inp in _edge_inputs(c, rng) + [_random_input(c, rng) for _ in range(40)]:
        key = repr(inp)
        out = check.call(ref, inp)
        if key in seen or isinstance(out, check.Raised):
            continue
        seen.add(key)
        pool.append((inp, out))
    n_hidden = rng.randint(p.hidden_min, p.hidden_max)
    chosen = [pool[0]]  # the empty (or smallest) input always
    modes = []
    for mode in c.bug_modes():
        buggy = check.compile_function(c.render({mode}))
        catch = [io for io in pool if not check.same(check.call(buggy, io[0]), io[1])]
        if not catch:
            continue  # no input reveals it: not a bug mode of this task
        modes.append(mode)
        if not any(io in catch for io in chosen):
            chosen.append(rng.choice(catch[: max(3, len(catch) // 2)]))
    rest = [io for io in pool if io not in chosen]
    edges = [io for io in rest[:12] if rng.random() < 0.5]
    chosen += edges[: max(0, n_hidden - len(chosen))]
    rest = [io for io in rest if io not in chosen]
    rng.shuffle(rest)
    chosen += rest[: max(0, n_hidden - len(chosen))]
    visible, vseen = [], set()
    while len(visible) < p.visible:
        inp = _random_input(c, rng, small=True)
        out = check.call(ref, inp)
        if repr(inp) not in vseen and not isinstance(out, check.Raised):
            vseen.add(repr(inp))
            visible.append(TestCase(inp, out))
    prompt = "\n".join([c.spec(), c.signature(), *(_fmt_call(t.inputs, t.expected) for t in visible)])
    return Task(
        task_id=f"tc/{c.family}/{c.comp_id}/{variant}",
        prompt=prompt,
        entry_point="f",
        visible_tests=tuple(visible),
        hidden_tests=tuple(TestCase(i, o) for i, o in chosen),
        canonical_solution=c.render(),
        suite=SUITE,
        meta={"family": c.family, "composition": c.names, "bug_modes": modes, "variant": variant},
    )


def generate(split: str, seed: int, p: GymParams) -> list[Task]:
    """All tasks of a split, in a fixed order."""
    held = split == "heldout"
    variants = p.heldout_variants if held else p.train_variants
    return [build_task(c, v, seed, p) for c in all_compositions() if is_heldout(c, p) == held
            for v in range(variants)]


def subset(tasks: list[Task], n: int | None, seed: int) -> list[Task]:
    """A deterministic subset of ``n`` tasks; a smaller ``n`` gives a prefix of a larger one."""
    if n is None or n >= len(tasks):
        return list(tasks)
    keyed = sorted(tasks, key=lambda t: hashlib.sha256(f"{seed}|{t.task_id}".encode()).hexdigest())
    return keyed[:n]
