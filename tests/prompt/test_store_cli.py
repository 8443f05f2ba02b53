"""Recording into a real SQLite lineage, replay from it, and `evolve prompts RUN` on it."""

import json
import os
import random
import subprocess
import sys
from pathlib import Path

from test_evolver import FIXES, LESSONS, SEED, rollouts_for, score

from evolve.lineage import LineageStore
from evolve.prompt import PromptEvolutionConfig, PromptEvolver, ReplayRecorder, StoreRecorder, make_reflector

REPO = Path(__file__).resolve().parents[2]


def run_generations(store, run, ev, rec, steps, seed):
    wv = store.put_weights_version(None, None, "tiny", kind="full")
    store.put_prompt_version(SEED.components, proposed_by="seed")
    rng, parent_gid, proposed = random.Random(seed), None, []
    for _ in range(steps):
        gid = store.begin_generation(run, parent_gid, {"reflect": seed})
        rec.generation_id = gid
        cur = ev.current()
        for p in ev.propose(cur, rollouts_for(cur), rng):
            proposed.append(p.candidate.id)
            ok = ev.accept(p, score(p.candidate, FIXES), score(cur, FIXES))
            val = score(p.candidate, FIXES) if ok else None
            if ok:
                ev.observe_val(cur, score(cur, FIXES))
                ev.observe_val(p.candidate, val)
            store.put_prompt_version(p.candidate.components, parents=p.parents, proposed_by=p.proposed_by,
                                     lm_call_ids=p.lm_call_ids, meta={**p.meta, "accepted": ok, "val": val})
        new = ev.current()
        store.put_prompt_version(new.components, proposed_by="kept")
        store.commit_generation(gid, new.id, wv, metrics={"heldout": {"pass@1": sum(score(new, FIXES).values()) / 3}})
        parent_gid = gid
    return proposed


def test_store_recording_replay_and_prompts_command(tmp_path):
    db = tmp_path / "lineage.db"
    cfg = PromptEvolutionConfig(lessons_dir=LESSONS, proposals_per_step=2, max_lessons=3)
    with LineageStore.open(str(db)) as store:
        store.create_run("r1", {})
        rec = StoreRecorder(store)
        live = PromptEvolver(cfg, make_reflector(cfg, rec), SEED)
        proposed = run_generations(store, "r1", live, rec, steps=4, seed=11)
        assert sum(score(live.current(), FIXES).values()) >= 2
        # every proposal links the lm call that produced it
        calls = store.lm_calls_for_prompt(proposed[0])
        assert calls and calls[0].model == "offline" and calls[0].generation_id is not None

        # replay: responses come from the lineage, identical candidates (same hashes)
        store.create_run("r1-replay", {})
        rrec = ReplayRecorder(StoreRecorder(store))
        rrec.generation_id = None
        again = PromptEvolver(cfg, make_reflector(cfg, rrec), SEED)
        replayed = run_generations(store, "r1-replay", again, rrec, steps=4, seed=11)
        assert replayed == proposed
        assert again.current().id == live.current().id
        n_calls = len([c for pid in proposed for c in store.lm_calls_for_prompt(pid)])

    env = {**os.environ, "EVOLVE_DB": ""}
    out = subprocess.run([sys.executable, "-m", "evolve", "prompts", "r1", "--db", str(db), "--json"],
                         capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr
    nodes = json.loads(out.stdout)
    by_id = {n["id"]: n for n in nodes}
    assert SEED.id in by_id and by_id[SEED.id]["parents"] == []
    best = by_id[live.current().id]
    assert best["generations"] and best["score"] >= 2 / 3
    assert all(p in by_id for n in nodes for p in n["parents"])  # the DAG is closed under parents
    assert any(n["lm_calls"] for n in nodes) and n_calls >= len(proposed)

    tree = subprocess.run([sys.executable, "-m", "evolve", "prompts", "r1", "--db", str(db)],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert tree.returncode == 0 and SEED.id[:12] in tree.stdout and "score=" in tree.stdout
    bad = subprocess.run([sys.executable, "-m", "evolve", "prompts", "nope", "--db", str(db)],
                         capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert bad.returncode == 2 and bad.stderr.startswith("error:") and "Traceback" not in bad.stderr
