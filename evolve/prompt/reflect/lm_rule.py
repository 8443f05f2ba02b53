"""The LM reflector's prompt and filter: failing traces from several tasks in, ONE general rule out.

GEPA's reflection (gepa 0.1.4, ``gepa/strategies/instruction_proposal.py``) shows the current
instruction and a minibatch of (input, response, feedback) records, and asks the LM to rewrite the
whole instruction, explicitly including "niche and domain specific factual information about the
task"; the reply is whatever sits between the first and last ``` fence. Departures, all made for small
reflectors (a 1.5B, measured in benchmarks/results/reflector_lm.json):

- The ask is ONE general rule (one short sentence) that is added to the ``lessons`` component, not a
  rewrite of the instruction. The current instruction is shown, but kept: a small LM's rewrite drops
  what already works, and GEPA's "include task-specific facts" is exactly what a 1.5B overdoes (it
  restated the one task it was shown).
- The traces come from several tasks at once (the reflective dataset round-robins over failure
  signatures, and :func:`pick_records` keeps at most ``per_task`` records per task), and the prompt
  forbids naming a function, variable or number from them.
- Several drafts are sampled per request (OpenAI ``n``), and each passes a cheap filter before it can
  become a candidate (:func:`filter_rule`): not truncated, one line, bounded length, no identifier or
  number taken from the traces' tasks (a restatement), not already among the lessons.
- Plain text reply (no JSON, no fence): a 1.5B writes one sentence more reliably than a JSON object.
"""

from __future__ import annotations

import re

RULE_PROMPT = """I gave a code-writing assistant these instructions:
```
{current}
```
Below are tasks of several different kinds that it got wrong under these instructions: the task, what it \
wrote, and the test feedback.
{examples}

Failure signatures over all {n_failures} failures in {n_rollouts} attempts:
{groups}

Write ONE general rule for the assistant: a single short sentence that would have prevented these \
mistakes on any task of this kind. Do not restate a task. Do not name any function, variable or number \
from the examples. Reply with the rule only."""

MAX_RULE_CHARS = 120
# A rule is one sentence of at most MAX_RULE_CHARS (~30 tokens); a reply that needs more is a ramble,
# refused as truncated, and capping it keeps a 1.5B's request on 2 CPU cores to seconds, not minutes.
RULE_MAX_TOKENS = 64
MIN_RULE_WORDS = 3
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"(?<![A-Za-z_])\d+(?:\.\d+)?")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)]|rule\s*\d*\s*:|new rule\s*:)\s*", re.I)
_PREAMBLE = re.compile(r"^[^.]{0,60}:$")  # a short lead-in line ending in a colon
# Words that may appear in a rule even when a task happens to use them as a name.
_COMMON = frozenset("""a an the and or not of to in on for with by is be as at it if do does return returns
list lists int ints integer integers str string strings number numbers value values input inputs output
function functions python code sum count max min len range sorted true false none empty each every
all any first last one zero k n i x xs key keys item items element elements result index""".split())


def pick_records(records: list[dict], per_task: int = 2) -> list[dict]:
    """At most ``per_task`` records per task, in the dataset's order: more tasks, fewer repeats of one."""
    seen: dict[str, int] = {}
    out = []
    for r in records:
        k = seen.get(r["task_id"], 0)
        if k < per_task:
            out.append(r)
            seen[r["task_id"]] = k + 1
    return out


def episode_text(record: dict) -> str:
    """A multi-turn record's whole episode (the repair turns); nothing for single-turn records."""
    if "transcript" not in record:
        return ""
    return f"\nEpisode ({record['turns']} policy turns, the environment's answers between them):\n{record['transcript']}"


POOLED_PROMPT = """I gave a code-writing assistant these instructions:
```
{current}
```
Below are tasks of several different kinds that it got wrong under these instructions over the last \
{n_generations} generations, grouped by the kind of failure: the task, what it wrote, what the tests \
expected against what it returned, and the test feedback. Long texts are shortened in the middle.
{examples}

Failure classes over all {n_failures} failures in {n_rollouts} attempts:
{classes}

Write ONE general rule for the assistant: a single short sentence that would have prevented the most \
frequent of these mistakes on any task of this kind. Do not restate a task. Do not name any function, \
variable or number from the examples. Reply with the rule only."""


def _pooled_example(i: int, r: dict) -> str:
    checked = (f"Call: {r['call']}\nExpected: {r['expected']}\nGot: {r['got']}\n" if "expected" in r else "")
    return (f"### Example {i} ({'passed' if r['passed'] else 'failed'})\nTask:\n{r['inputs']}\n"
            f"Output:\n{r['output']}\n{checked}Feedback: {r['feedback']}" + episode_text(r))


def render_pooled_prompt(current: str, records: list[dict], classes: list[dict], n_failures: int,
                         n_rollouts: int, n_generations: int) -> str:
    """The pooled view's prompt: examples under one heading per failure class (most frequent first),
    successes for contrast last."""
    order = [c["class"] for c in classes] + sorted({r["class"] for r in records if r["class"]}
                                                   - {c["class"] for c in classes})
    count = {c["class"]: c["count"] for c in classes}
    parts, i = [], 0
    for cls in [*order, None]:
        mine = [r for r in records if r["class"] == cls]
        if not mine:
            continue
        parts.append(f"## {cls}: {count.get(cls, len(mine))} failures" if cls else "## Passed (for contrast)")
        for r in mine:
            i += 1
            parts.append(_pooled_example(i, r))
    lines = "\n".join(f"- {c['class']}: {c['count']} (generations {', '.join(map(str, c['generations']))})"
                      for c in classes) or "- none"
    return POOLED_PROMPT.format(current=current.strip() or "(empty)", examples="\n".join(parts) or "(none)",
                                classes=lines, n_failures=n_failures, n_rollouts=n_rollouts,
                                n_generations=n_generations)


def fit_pooled_prompt(current: str, records: list[dict], classes: list[dict], n_failures: int, n_rollouts: int,
                      n_generations: int, budget: int) -> tuple[str, list[dict]]:
    """The pooled prompt within ``budget`` characters, and the records it shows: records are dropped from
    the end (the dataset's order puts successes and the rarest classes' later examples there)."""
    kept = list(records)
    while True:
        content = render_pooled_prompt(current, kept, classes, n_failures, n_rollouts, n_generations)
        if len(content) <= budget or len(kept) <= 1:
            return content, kept
        kept.pop()


def render_rule_prompt(current: str, records: list[dict], groups: list[dict], n_failures: int,
                       n_rollouts: int) -> str:
    examples = "\n".join(
        f"### Example {i + 1} ({'passed' if r['passed'] else 'failed'})\nTask:\n{r['inputs']}\n"
        f"Output:\n{r['output']}\nFeedback: {r['feedback']}" + episode_text(r) for i, r in enumerate(records))
    lines = "\n".join(f"- {g['signature']}: {g['count']}" for g in groups) or "- none"
    return RULE_PROMPT.format(current=current.strip() or "(empty)", examples=examples or "(none)", groups=lines,
                              n_failures=n_failures, n_rollouts=n_rollouts)


def task_identifiers(records: list[dict]) -> tuple[frozenset[str], frozenset[str]]:
    """(names, numbers) that appear in the records' task texts: a rule using one restates a task."""
    names: set[str] = set()
    numbers: set[str] = set()
    for r in records:
        text = r.get("inputs", "")
        names.update(w.lower() for w in _IDENT.findall(text) if len(w) > 2 and ("_" in w or w.lower() not in _COMMON))
        numbers.update(_NUMBER.findall(text))
    return frozenset(names - _COMMON), frozenset(numbers)


def _english(text: str) -> frozenset[str]:
    """Words a rule may share with a task's prose: its plain dictionary words (no underscores, no code)."""
    return frozenset(w.lower() for w in re.findall(r"(?<![`_\w])[A-Za-z]+(?![_\w(`])", text))


def filter_rule(content: str | None, finish_reason: str | None, records: list[dict],
                existing: list[str]) -> tuple[str | None, str | None]:
    """(the rule, None), or (None, why it was refused). Cheap checks a restatement or a ramble fails."""
    if finish_reason == "length":
        return None, "rejected: truncated reply (finish_reason=length)"
    lines = [ln.strip() for ln in (content or "").strip().strip("`").splitlines() if ln.strip()]
    if len(lines) > 1 and _PREAMBLE.match(lines[0]):  # "Here is the rule:" then the rule
        lines = lines[1:]
    if not lines:
        return None, "rejected: empty reply"
    if len(lines) > 1:
        return None, f"rejected: {len(lines)} lines, one rule asked"
    rule = _BULLET.sub("", lines[0]).strip().strip('"').strip()
    if len(rule) > MAX_RULE_CHARS:
        return None, f"rejected: rule longer than {MAX_RULE_CHARS} characters"
    if len(rule.split()) < MIN_RULE_WORDS:
        return None, f"rejected: fewer than {MIN_RULE_WORDS} words"
    names, numbers = task_identifiers(records)
    prose = set()
    for r in records:
        prose |= _english(r.get("inputs", ""))
    code_words = {w.lower() for w in _IDENT.findall(rule)} & names
    # A task's own name (snake_case, or a word used as a name but never as prose) marks a restatement.
    named = sorted(w for w in code_words if "_" in w or w not in prose)
    if named:
        return None, f"rejected: names {named[0]!r} from a task (a restatement)"
    nums = sorted(set(_NUMBER.findall(rule)) & numbers - {"0", "1"})
    if nums:
        return None, f"rejected: uses the number {nums[0]} from a task (a restatement)"
    if rule in {e.strip() for e in existing}:
        return None, "rejected: already a lesson"
    return rule, None
