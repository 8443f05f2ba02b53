"""Helpers shared by the UI tests (kept out of conftest.py so that `import` never picks another
directory's conftest): the real `evolve` CLI, the hostile run, the server, the browser page."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import evolve_zygote

REPO = Path(__file__).resolve().parents[2]
EVOLVE = [sys.executable, "-m", "evolve"]
CHROMIUM = os.environ.get("EVOLVE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# Text an attacker controls: markup, an event handler, NUL and other control characters, a bidi override.
HOSTILE = ('</pre></td><script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
           '\x00NUL\x07BEL\x1b[31mESC \u202eRLO</textarea>{{ 7*7 }}')
HOSTILE_RUN = "hostile-run"  # run names are restricted to [A-Za-z0-9._-]; everything else is hostile


def evolve(*args: str, db: Path, check: bool = True, timeout: int = 600) -> subprocess.CompletedProcess:
    proc = evolve_zygote.run([*args, "--db", f"sqlite:///{db}"], dict(os.environ), timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"evolve {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def add_hostile_run(db: Path) -> None:
    """A run whose every shown string is hostile, written through the real LineageStore API."""
    from evolve.lineage import LineageStore
    from evolve.rollout import Rollout, Turn
    from evolve.verification.types import StageResult, VerifyResult

    with LineageStore.open(f"sqlite:///{db}") as store:
        store.create_run(HOSTILE_RUN, {"loop": {"mode": HOSTILE, "heldout_ks": [1]}, "verifier_isolation": HOSTILE})
        seed = store.put_prompt_version({"system": "seed"}, proposed_by="seed")
        wv = store.put_weights_version(None, None, HOSTILE, kind="base")
        g0 = store.begin_generation(HOSTILE_RUN, None, {})
        store.commit_generation(g0, seed, wv, metrics={"heldout": {"pass@1": 0.25}})
        gid = store.begin_generation(HOSTILE_RUN, g0, {})
        cid = store.record_lm_call("reflection", HOSTILE, {"messages": [{"role": "user", "content": HOSTILE}]},
                                   {"new_instruction": HOSTILE}, generation_id=gid)
        pv = store.put_prompt_version({"system": HOSTILE, HOSTILE: "lesson"}, parents=[seed], proposed_by="reflection",
                                      lm_call_ids=[cid], meta={"accepted": True, "generation": 1, "evidence": HOSTILE,
                                                               "minibatch": {HOSTILE: 1.0}})
        res = VerifyResult("t", 0.0, False, [StageResult("hidden", 0.0, False, trace=HOSTILE, error_class=HOSTILE)],
                           trace=HOSTILE, error_class=HOSTILE)
        turns = [Turn(HOSTILE, HOSTILE, 0.5, HOSTILE), Turn("user", HOSTILE)]  # a multi-turn transcript
        store.add_rollouts(gid, [Rollout(HOSTILE, 0, i, pv, wv, [], HOSTILE, HOSTILE, result=res, reward=0.0,
                                         turns=turns) for i in range(2)])
        store.commit_generation(gid, pv, wv, metrics={"heldout": {"pass@1": 0.5, "failure_classes": {HOSTILE: 2}},
                                                      HOSTILE: 1.0, "routing": {"recurring_classes": [HOSTILE]}})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_ui(db: Path, *extra: str, port: int | None = None) -> tuple[subprocess.Popen, str]:
    port = port or free_port()
    proc = subprocess.Popen([*EVOLVE, "ui", "--db", f"sqlite:///{db}", "--port", str(port), *extra], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            urllib.request.urlopen(base + "/ping", timeout=2)
            return proc, base
        except OSError as e:
            if getattr(e, "code", None) == 401:  # token-gated, but up
                return proc, base
            if proc.poll() is not None:
                raise AssertionError(f"evolve ui exited: {proc.stdout.read()}") from None
            time.sleep(0.2)
    proc.kill()
    raise AssertionError("evolve ui did not start")


def open_page(page, url: str):
    """Go to ``url`` and wait until ui.js has run (it sets <html data-ready>)."""
    page.goto(url)
    page.wait_for_selector("html[data-ready='1']", state="attached", timeout=15000)
    return page


def shot(page, tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 5000
    return path

