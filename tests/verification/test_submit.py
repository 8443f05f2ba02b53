"""ForkServer.submit: jobs added from on_reply run in the same batch (a replayed check starts as soon as
its candidate's results are in), come back through on_reply, and survive a server restart."""

from __future__ import annotations

import os
import signal

from evolve.verification.sandbox.client import ForkServer, SandboxConfig


def _job(src: str, calls=((1, 2),)) -> dict:
    return {"mode": "run", "src": src, "entry": "f", "calls": list(calls), "timeout": 5.0}


def test_jobs_submitted_from_on_reply_run_and_reply_in_order(monkeypatch):
    fs = ForkServer(SandboxConfig(jobs=2))
    batches = []
    run_once = fs._run_once
    monkeypatch.setattr(fs, "_run_once", lambda jobs, keep: batches.append(len(jobs)) or run_once(jobs, keep))
    seen: dict[int, str] = {}
    follow: dict[int, int] = {}

    def on_reply(i, reply):
        seen[i] = " ".join(reply["lines"])
        if i < 4:  # each given job gets one follow-up, which gets none
            follow[fs.submit(_job(f"def f(a, b):\n    return {i} * 100 + a + b\n"))] = i
        return i

    try:
        replies = fs.run([_job(f"def f(a, b):\n    return {i} + a + b\n") for i in range(4)], on_reply)
    finally:
        fs.close()
    assert replies == list(range(8)) and sorted(follow) == [4, 5, 6, 7]
    assert batches == [4]  # the follow-ups ran in the same batch, not after it
    for j, i in follow.items():
        assert f"R 0 ok {i * 100 + 3}" in seen[j] and f"R 0 ok {i + 3}" in seen[i]


def test_a_submitted_job_survives_a_server_restart():
    fs = ForkServer(SandboxConfig(jobs=1, grace_s=1.0))
    seen: dict[int, str] = {}

    def on_reply(i, reply):
        seen[i] = " ".join(reply["lines"])
        if i == 0:
            fs.submit(_job("import time\ndef f(a, b):\n    time.sleep(0.3)\n    return 42\n"))
            os.kill(fs._proc.popen.pid, signal.SIGKILL)  # the server dies while the submitted job waits or runs
        return i

    try:
        replies = fs.run([_job("def f(a, b):\n    return a + b\n")], on_reply)
    finally:
        fs.close()
    assert replies == [0, 1] and "R 0 ok 42" in seen[1] and fs.restarts >= 1


def test_a_task_s_recording_its_samples_and_their_replays_run_in_one_batch(monkeypatch):
    from pathlib import Path

    from evolve.verification import Verifier, load_humaneval, load_pipeline

    repo = Path(__file__).resolve().parents[2]
    tasks = {t.task_id: t for t in load_humaneval()}
    rec = tasks["HumanEval/53"]  # random inputs: recorded and replayed
    plain = tasks["HumanEval/0"]
    with Verifier(load_pipeline(repo / "verifiers" / "humaneval.toml"), jobs=2) as v:
        batches = []
        run_once = v.sandbox._run_once
        monkeypatch.setattr(v.sandbox, "_run_once", lambda jobs, keep: batches.append(len(jobs)) or run_once(jobs, keep))
        rs = v.verify_batch([(rec, rec.canonical_solution), (rec, "    return x - y\n"), (plain, plain.canonical_solution)])
        assert v.plan(rec).check and v.plan(rec).recorded
    assert [r.passed for r in rs] == [True, False, True], [r.trace for r in rs]
    assert batches == [2]  # the recording and the plain sample; the rest was submitted into that batch
