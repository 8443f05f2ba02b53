"""Time to first byte of `evolve ui` pages on a 10,000-generation, 1,000,000-rollout lineage.

Builds the lineage in a temp SQLite file by script (the real schema from LineageStore.open, then bulk
inserts through sqlite3): a branching run with a fork every ~50 generations, 2 reflection proposals
per generation with their LM calls and evidence, a kept prompt change every ~10, one weights version
per generation, full metrics documents, and 100 rollouts per generation with completion, trace and
stages. Then starts the real `evolve ui` server and times each page over HTTP against baselines
measured in the same run: `/ping` (the same app, no database) and a static file. Each page's first
request (cold: the run page computes its curves then, later loads reuse them until the run changes)
is reported apart from the median of the repeats.

    .venv/bin/python benchmarks/ui_scale.py [--generations 10000] [--rollouts-per-gen 100] [--repeats 7]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from results_io import print_figures, write_results  # noqa: E402

from evolve.lineage import LineageStore  # noqa: E402
from evolve.ui.views import GEN_PAGE  # noqa: E402
from evolve.util.hashing import content_hash  # noqa: E402

CLASSES = ("SyntaxError", "WrongAnswer", "TypeMismatch", "NameError", "IndentationError")
LESSONS = ("Handle the empty input first.", "Use // for integer division.", "Include the boundary value k.",
           "Define the function with exactly the name given.", "Keep the answer short enough to finish.")


def _metrics(rng: random.Random, i: int) -> dict:
    p1 = min(1.0, 0.2 + i / 40000 + rng.random() * 0.1)
    fc = {c: rng.randrange(0, 20) for c in CLASSES}
    return {"heldout": {"pass@1": p1, "pass@4": min(1.0, p1 * 1.8), "failure_classes": fc, "samples": 32,
                        "tasks": 8},
            "train_reward": rng.random(), "zero_variance_fraction": rng.random(),
            "routing": {"groups": 8, "all_fail": rng.randrange(9), "mixed": 3, "all_pass": 1,
                        "reflection_rollouts": 16, "recurring_classes": list(CLASSES[:2])},
            "attribution": {"delta_weights": rng.uniform(-.05, .05), "delta_prompt": rng.uniform(-.05, .05),
                            "classes": {c: {"before": 5, "after": 4, "removed_by_weights": 1, "removed_by_prompt": 0}
                                        for c in CLASSES}},
            "update": {"loss": rng.random(), "kl": 0.01, "grad_norm": 1.0, "all_fail_fraction": 0.3},
            "proposals": 2, "accepted": 0, "rollouts_spent": 64, "timings": {"total": 3.0}}


def _proposal(rng: random.Random, i: int, k: int, pv: str, call_id: int, now: str, out: tuple) -> str:
    """One reflection proposal of generation ``i`` with its LM call; returns the prompt kept after it."""
    pv_rows, edges, calls, links = out
    lesson = rng.choice(LESSONS)
    comps = {"system": "Write Python.", "lessons": f"{lesson}\n(variant {i}.{k})"}
    new = content_hash({"components": comps})
    accepted = k == 0 and rng.random() < 0.1
    meta = {"kind": "add-lesson", "rationale": f"failures: SyntaxError x{rng.randrange(9)}; added {lesson!r}",
            "generation": i, "accepted": accepted,
            "minibatch": {f"tc/list/t{j}": rng.random() for j in range(3)},
            "parent_minibatch": {f"tc/list/t{j}": rng.random() for j in range(3)}, "val": None}
    pv_rows.append((new, json.dumps(comps), "reflection", json.dumps(meta), now))
    edges.append((new, pv, 0))
    request = {"reflector": "offline", "parent": {"lessons": ""}, "dataset": {"groups": [
        {"signature": f"SyntaxError|-|x{j}", "count": 3, "tasks": [f"tc/list/t{j}"]} for j in range(8)]}}
    calls.append((call_id, i + 1, "reflection", "offline", json.dumps(request), content_hash(request),
                  json.dumps({"proposals": [{"components": comps}]}), None, "{}", 0.01, now))
    links.append((new, call_id))
    return new if accepted else pv


def build(db: Path, n: int, per_gen: int, seed: int = 0) -> dict:
    """The lineage; returns what was built (counts, the run name)."""
    rng = random.Random(seed)
    LineageStore.open(f"sqlite:///{db}").close()  # the real, migrated schema
    con = sqlite3.connect(db)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=OFF")
    now = "2026-11-30 12:00:00.000000"
    con.execute("INSERT INTO run (id, name, config, created_at, code_version, package_versions) VALUES "
                "(1, 'big', ?, ?, 'bench', '{}')",
                (json.dumps({"loop": {"mode": "coupled", "heldout_ks": [1, 4]}, "verifier_isolation": "bwrap+seccomp"}),
                 now))
    pv_rows, edges, links, calls, wv_rows, gens = [], [], [], [], [], []
    pv_of, wv_of = {}, {}
    seed_pv = content_hash({"c": "seed"})
    pv_rows.append((seed_pv, json.dumps({"system": "Write Python.", "lessons": ""}), "seed", "{}", now))
    call_id = 0
    for i in range(n):
        parent = None if i == 0 else (rng.randrange(i) if rng.random() < 0.02 else i - 1)
        pv = pv_of.get(parent, seed_pv)
        for k in range(2 if i else 0):  # two reflection proposals per generation, one kept now and then
            call_id += 1
            pv = _proposal(rng, i, k, pv, call_id, now, (pv_rows, edges, calls, links))
        pv_of[i] = pv
        w_parent = wv_of.get(parent)
        wv = content_hash({"w": i})
        wv_of[i] = wv
        wv_rows.append((wv, None, None, w_parent, "tiny", "full", None, json.dumps({"loss": rng.random()}), now))
        gens.append((i + 1, 1, None if parent is None else parent + 1, i, pv, wv, json.dumps({"seed": i}),
                     "committed", json.dumps(_metrics(rng, i)), "{}", now, now))
    con.executemany("INSERT INTO prompt_version (id, components, proposed_by, meta, created_at) VALUES (?,?,?,?,?) "
                    "ON CONFLICT DO NOTHING", pv_rows)
    con.executemany("INSERT INTO prompt_parent (child, parent, position) VALUES (?,?,?) ON CONFLICT DO NOTHING", edges)
    con.executemany("INSERT INTO weights_version (id, artifact_sha, weights_sha256, parent, base_model, kind, "
                    "optimizer_artifact, stats, created_at) VALUES (?,?,?,?,?,?,?,?,?)", wv_rows)
    con.executemany("INSERT INTO generation (id, run_id, parent_id, \"index\", prompt_version, weights_version, seeds, "
                    "status, metrics, timings, created_at, committed_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", gens)
    con.executemany("INSERT INTO lm_call (id, generation_id, role, model, request, request_hash, response, error, "
                    "tokens, latency_s, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)", calls)
    con.executemany("INSERT INTO prompt_lm_call (prompt_version, lm_call_id) VALUES (?,?) ON CONFLICT DO NOTHING",
                    links)
    con.commit()
    n_roll = _rollouts(con, n, per_gen, pv_of, wv_of, rng)
    con.commit()
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    return {"run": "big", "generations": n, "rollouts": n_roll, "prompt_versions": len(pv_rows),
            "lm_calls": len(calls), "db_bytes": db.stat().st_size}


def _rollouts(con, n: int, per_gen: int, pv_of: dict, wv_of: dict, rng: random.Random) -> int:
    total = 0
    stage_fail = json.dumps([{"name": "hidden", "score": 0.0, "passed": False, "trace": "expected 3, got 2",
                              "error_class": "WrongAnswer", "failures": []}])
    stage_ok = json.dumps([{"name": "hidden", "score": 1.0, "passed": True, "trace": "", "error_class": None,
                            "failures": []}])
    sql = ("INSERT INTO rollout (generation_id, task_id, group_index, sample_index, prompt_version, weights_version, "
           "purpose, prompt, completion, reward, advantage, passed, error_class, stages, trace, hack_flags, truncated) "
           "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)")
    for i in range(n):
        rows = []
        for j in range(per_gen):
            ok = rng.random() < 0.3
            task = f"tc/list/f{(i * 7 + j // 4) % 997}-m-r/{j % 2}"
            rows.append((i + 1, task, j // 4, j % 4, pv_of[i], wv_of[i], "train" if j < per_gen // 2 else "heldout",
                         "", f"def f(xs):\n    return sum(x for x in xs if x > {j})\n", float(ok),
                         rng.uniform(-1, 1), ok, None if ok else rng.choice(CLASSES), stage_ok if ok else stage_fail,
                         "" if ok else "expected 3, got 2", "[]", False))
        con.executemany(sql, rows)
        total += len(rows)
    return total


def ttfb(host: str, port: int, path: str) -> tuple[float, float, int, int]:
    """(seconds to the first response byte, seconds to the last, status, bytes) of one GET."""
    con = http.client.HTTPConnection(host, port, timeout=120)
    t0 = time.perf_counter()
    con.request("GET", path)
    resp = con.getresponse()
    first = time.perf_counter() - t0  # status line and headers read: the first byte has arrived
    body = resp.read()
    total = time.perf_counter() - t0
    con.close()
    return first, total, resp.status, len(body)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(db: Path, n: int, repeats: int) -> dict:
    port = free_port()
    evolve = str(Path(sys.executable).with_name("evolve"))
    proc = subprocess.Popen([evolve, "ui", "--db", f"sqlite:///{db}", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                ttfb("127.0.0.1", port, "/ping")
                break
            except OSError:
                time.sleep(0.1)
        mid, last = n // 2, n - 1
        pages = {
            "ping (baseline, no database)": "/ping",
            "static file (baseline)": "/static/ui.css",
            "runs": "/",
            "run page": "/run/1",
            "run page, last generations": f"/run/1?page={(n - 1) // GEN_PAGE}",
            "generation page": f"/run/1/gen/{mid}",
            "generation page, failed rollouts, page 2": f"/run/1/gen/{mid}?passed=fail&rpage=1",
            "generation page, newest": f"/run/1/gen/{last}",
            "reflection call": f"/call/{max(1, n)}",
            "compare first vs newest": f"/compare?a=big:1&b=big:{last}",
        }
        out = {}
        for name, path in pages.items():
            first = ttfb("127.0.0.1", port, path)  # the first request: cold caches (the run page's curves)
            runs = [ttfb("127.0.0.1", port, path) for _ in range(repeats)]
            assert all(r[2] == 200 for r in runs), (name, runs[0])
            out[name] = {"path": path, "ttfb_s": statistics.median(r[0] for r in runs),
                         "total_s": statistics.median(r[1] for r in runs), "bytes": runs[0][3], "first_ttfb_s": first[0],
                         "ttfb_all": [round(r[0], 4) for r in runs]}
        return out
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--generations", type=int, default=10_000)
    ap.add_argument("--rollouts-per-gen", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "lineage.db"
        t = time.perf_counter()
        built = build(db, args.generations, args.rollouts_per_gen)
        built["build_s"] = time.perf_counter() - t
        pages = measure(db, args.generations, args.repeats)
    base = pages["ping (baseline, no database)"]["ttfb_s"]
    static = pages["static file (baseline)"]["ttfb_s"]
    print(f"{built['generations']:,} generations, {built['rollouts']:,} rollouts, {built['prompt_versions']:,} prompt "
          f"versions, {built['lm_calls']:,} lm calls; {built['db_bytes'] / 1e6:.0f} MB SQLite, built in "
          f"{built['build_s']:.0f}s; median of {args.repeats}; load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} cores")
    print(f"{'page':44} {'first s':>8} {'TTFB s':>8} {'total s':>8} {'x ping':>7} {'KB':>7}")
    for name, r in pages.items():
        print(f"{name:44} {r['first_ttfb_s']:8.4f} {r['ttfb_s']:8.4f} {r['total_s']:8.4f} {r['ttfb_s'] / base:7.1f} "
              f"{r['bytes'] / 1e3:7.1f}")
    figures = {
        "run_page_ttfb_s": round(pages["run page"]["ttfb_s"], 4),
        "run_page_first_ttfb_s": round(pages["run page"]["first_ttfb_s"], 4),
        "generation_page_ttfb_s": round(pages["generation page"]["ttfb_s"], 4),
        "run_page_x_ping": round(pages["run page"]["ttfb_s"] / base, 1),
        "generation_page_x_ping": round(pages["generation page"]["ttfb_s"] / base, 1),
        "generation_page_x_static": round(pages["generation page"]["ttfb_s"] / static, 1),
        "ping_ttfb_s": round(base, 4),
        "generations": built["generations"], "rollouts": built["rollouts"],
    }
    write_results("ui_scale", args=vars(args), results={"built": built, "pages": pages}, figures=figures)
    print_figures(figures)


if __name__ == "__main__":
    main()
