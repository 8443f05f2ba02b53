"""The SFT corpus: gym train tasks, chat-rendered, solved by the imperfect teacher.

Each document is the exact chat rendering the policy sees at run time (an
optional system message, the task prompt as the user message) followed by the
teacher's answer and ``<|end|>``; the loss covers the answer only. System
messages hold 0..max lines: the seed instruction (first when present), notes of
applicable bug modes (the teacher then never makes that bug), notes of modes that
do not apply, and distractors: the last two change nothing.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from evolve.gym import load_gym
from evolve.gym.notes import BUG_MODES, DISTRACTORS, NOTES, SEED_INSTRUCTION
from evolve.gym.teacher import teacher_solution
from evolve.policy.tiny.config import BootstrapConfig
from evolve.policy.tiny.tokenizer import END, render_chat
from evolve.prompt.candidate import render_messages
from evolve.verification.types import Task


@dataclass(frozen=True)
class Doc:
    task_id: str
    prompt_text: str  # chat-rendered, ends with "<|assistant|>\n"
    completion: str  # the teacher's program, without the trailing <|end|>
    bugs: tuple[str, ...]


def system_lines(task: Task, rng: random.Random, cfg: BootstrapConfig) -> list[str]:
    applicable = set(task.meta.get("bug_modes", ()))
    lines = []
    for mode in BUG_MODES:
        p = cfg.p_relevant_note if mode in applicable else cfg.p_irrelevant_note
        if rng.random() < p:
            lines.append(NOTES[mode])
    lines += [d for d in DISTRACTORS if rng.random() < cfg.p_distractor]
    rng.shuffle(lines)
    if rng.random() < cfg.p_seed_instruction:
        lines.insert(0, SEED_INSTRUCTION)  # where a prompt candidate puts it
    return lines[: cfg.max_system_lines]


def make_doc(task: Task, rng: random.Random, cfg: BootstrapConfig) -> Doc:
    system = "\n".join(system_lines(task, rng, cfg))
    messages = render_messages({"system": system} if system else {}, task)
    code, bugs = teacher_solution(task, rng, system, cfg.bug_rates())
    return Doc(task.task_id, render_chat(messages), code.rstrip("\n"), tuple(bugs))


def iter_docs(cfg: BootstrapConfig, seed_offset: int = 0):
    """An endless deterministic stream of documents (epochs over shuffled train tasks)."""
    tasks = load_gym("train", seed=cfg.gym_seed)
    rng = random.Random(f"corpus|{cfg.seed}|{seed_offset}")
    while True:
        order = list(range(len(tasks)))
        rng.shuffle(order)
        for i in order:
            yield make_doc(tasks[i], rng, cfg)


def doc_text(doc: Doc) -> str:
    return doc.prompt_text + doc.completion + END


def pack(cfg: BootstrapConfig, tokenizer, n_windows: int):
    """``n_windows`` packed sequences of whole documents: (input_ids, labels, position_ids) tensors.

    First-fit packing over a few open windows keeps padding low. Labels are -100
    outside answers; position ids restart at 0 for each document so every answer
    is trained at the positions it is generated at.
    """
    import torch

    pad = tokenizer.pad_token_id
    ids = torch.full((n_windows, cfg.seq_len), pad, dtype=torch.long)
    labels = torch.full((n_windows, cfg.seq_len), -100, dtype=torch.long)
    pos = torch.zeros((n_windows, cfg.seq_len), dtype=torch.long)
    fill = [0] * n_windows
    docs, open_w, next_w, chunk = iter_docs(cfg), [], 0, 512
    while open_w or next_w < n_windows:
        batch = [next(docs) for _ in range(chunk)]
        p_ids = tokenizer([d.prompt_text for d in batch], add_special_tokens=False)["input_ids"]
        c_ids = tokenizer([d.completion + END for d in batch], add_special_tokens=False)["input_ids"]
        for p, c in zip(p_ids, c_ids, strict=True):
            n = len(p) + len(c)
            if n > min(cfg.seq_len, cfg.context):
                continue
            w = next((w for w in open_w if fill[w] + n <= cfg.seq_len), None)
            if w is None:
                if next_w >= n_windows:
                    open_w.pop(0)  # the oldest open window stays partly padded
                    if not open_w:
                        break  # every window is closed: the while condition ends the packing
                    continue
                w, next_w = next_w, next_w + 1
                open_w.append(w)
                if len(open_w) > 8:
                    open_w.pop(0)
            f = fill[w]
            ids[w, f:f + n] = torch.tensor(p + c)
            labels[w, f + len(p):f + n] = torch.tensor(c)
            pos[w, f:f + n] = torch.arange(n)
            fill[w] = f + n
            if fill[w] > cfg.seq_len - 40:
                open_w.remove(w)  # nearly full: no document fits any more
    return ids, labels, pos
