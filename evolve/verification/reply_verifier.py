"""The verifier of model replies: each task's reply format names how its reply becomes a program.

``meta["reply_format"]``: ``"chat"`` (a chat model's markdown: ``model_reply.extract``), ``"json-answer"``
(a final JSON answer: ``json_answer.read_json_answer``). A task with no reply format is verified as
given (the tiny model's raw completions).
"""

from __future__ import annotations

from collections.abc import Callable

from evolve.verification.json_answer import read_json_answer
from evolve.verification.model_reply import Extraction, extract, reply_failure


def _read_chat(task, text: str) -> Extraction:
    return extract(text, task.entry_point)


READERS: dict[str, Callable[..., Extraction]] = {"chat": _read_chat, "json-answer": read_json_answer}


class ReplyVerifier:
    """A Verifier for model replies: a task whose ``meta["reply_format"]`` names a reader (``READERS``) has its
    reply read first; a reply failure is a verdict of its own, everything else goes to the inner verifier
    with the program the reader made. Other tasks pass through untouched. Same API as Verifier."""

    def __init__(self, inner):
        self.inner = inner

    def verify_batch(self, pairs):
        out: list = [None] * len(pairs)
        forward, where = [], []
        for i, (task, text) in enumerate(pairs):
            fmt = task.meta.get("reply_format")
            reader = READERS.get(fmt) if isinstance(fmt, str) else None  # task files are checked at load
            if reader is None:
                forward.append((task, text))
                where.append(i)
                continue
            text = text if isinstance(text, str) else ""
            if len(text) > self._cap():  # never parsed here: the inner verifier fails it as CompletionTooLong
                forward.append((task, text))
                where.append(i)
                continue
            try:
                ext = reader(task, text)
            except Exception as e:  # noqa: BLE001 - model text must never take the batch down
                ext = Extraction(text, False, "NoCode", f"the reply could not be read ({type(e).__name__})")
            if ext.error_class:
                out[i] = reply_failure(task.task_id, ext)
            else:
                forward.append((task, ext.code))
                where.append(i)
        for i, res in zip(where, self.inner.verify_batch(forward) if forward else [], strict=True):
            out[i] = res
        return out

    def verify(self, task, completion):
        return self.verify_batch([(task, completion)])[0]

    def _cap(self) -> int:
        pipe = getattr(self.inner, "pipeline", None)
        return getattr(getattr(pipe, "limits", None), "max_completion_chars", 131072)

    def __getattr__(self, name):  # isolation, close, pipeline, ...
        return getattr(self.inner, name)

    def __enter__(self):
        self.inner.__enter__()
        return self

    def __exit__(self, *exc):
        self.inner.close()
