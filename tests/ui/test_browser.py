"""Every page of `evolve ui` in a real headless chromium, on a lineage made by a short real run.

Assertions are on the DOM after ui.js ran (it marks <html data-ready>), compared with the
database itself; screenshots go to each test's tmp folder.
"""

from __future__ import annotations

import json
import sqlite3

from ui_helpers import HOSTILE, HOSTILE_RUN, open_page, shot

from evolve.ui.text import visible


def q(db, sql, *args):
    con = sqlite3.connect(db)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def run_id(db, name="t") -> int:
    return q(db, "select id from run where name = ?", name)[0][0]


def test_runs_page_lists_runs(page, ui_server, ui_db, tmp_path):
    open_page(page, ui_server + "/")
    rows = page.locator("#runs tbody tr")
    assert rows.count() == 2
    t_row = page.locator("#runs tr", has_text="coupled")
    cells = t_row.locator("td").all_inner_texts()
    assert cells[0] == "t" and cells[1] == "coupled" and cells[2] == "4"  # generations 0..2 plus the fork
    (p1,) = q(ui_db, "select json_extract(metrics, '$.heldout.\"pass@1\"') from generation g join run r "
                     "on r.id = g.run_id where r.name = 't' and g.\"index\" = 3")[0]
    assert abs(float(cells[5]) - p1) < 5e-3
    shot(page, tmp_path, "runs")
    assert not page.errors, page.errors


def test_run_page_tree_dag_curves(page, ui_server, ui_db, tmp_path):
    open_page(page, ui_server + "/")
    page.click("a.run-link:text-is('t')")
    page.wait_for_selector("html[data-ready='1']", state="attached")
    assert page.inner_text("#run-name") == "t"
    # the generation tree: one node per generation, t:1 is a branch point (t:2 and the fork t:3)
    assert page.locator("#gen-tree a.node").count() == 4
    branch = page.locator("#generations tr.branch")
    assert branch.count() == 1 and branch.get_attribute("data-index") == "1"
    assert page.locator("#generations tr.fork").get_attribute("data-index") == "3"
    # the prompt DAG: every prompt version the run used or proposed, with its verdict
    rid = run_id(ui_db)
    in_run = ("select prompt_version id from generation where run_id = ? union select l.prompt_version "
              "from prompt_lm_call l join lm_call c on c.id = l.lm_call_id join generation g on g.id = c.generation_id "
              "where g.run_id = ?")
    dag = q(ui_db, f"select p.id, p.proposed_by, json_extract(p.meta, '$.accepted') from prompt_version p "
                   f"where p.id in ({in_run})", rid, rid)
    assert page.locator("#prompt-dag article.proposal").count() == len(dag)
    judged = [a for _, how, a in dag if how == "reflection"]
    assert len(judged) >= 2
    assert page.locator("#prompt-dag .verdict.ok").count() == sum(1 for a in judged if a == 1)
    assert page.locator("#prompt-dag .verdict.no").count() == sum(1 for a in judged if a == 0)
    assert page.locator("#prompt-dag ul.lesson li.add").count() >= 1  # the lesson text itself
    # curves: four charts, held-out pass@k drawn for k = 1 and 4 over the committed generations
    assert page.locator("svg.chart").count() == 4
    assert page.locator("#chart-passk circle.pt[data-series='pass@1']").count() == 4
    assert page.locator("#weights-chain li").count() == 4  # every generation trained its own weights
    shot(page, tmp_path, "run")
    assert not page.errors, page.errors


def test_generation_page_and_click_to_reflection_call(page, ui_server, ui_db, tmp_path):
    rid = run_id(ui_db)
    open_page(page, f"{ui_server}/run/{rid}/gen/1")
    assert page.inner_text("#gen-name") == "t:1"
    cmds = [c.strip() for c in page.locator("pre.cmd").all_inner_texts()]
    assert cmds == [f"evolve resume t --from t:1 --db sqlite:///{ui_db}", f"evolve replay t:1 --db sqlite:///{ui_db}"]
    assert page.locator("button.copy").count() == 2  # added by ui.js
    (pv,) = q(ui_db, "select prompt_version from generation where run_id = ? and \"index\" = 1", rid)[0]
    (comps,) = q(ui_db, "select components from prompt_version where id = ?", pv)[0]
    shown = page.locator("#prompt pre.component").all_inner_texts()
    assert shown == list(json.loads(comps).values())
    assert page.locator("#prompt .diff, #prompt #no-diff").count() >= 1
    assert page.locator("#classes tbody tr").count() >= 1  # the routed failure classes
    calls = q(ui_db, "select c.id, c.response from lm_call c join generation g on g.id = c.generation_id "
                     "where g.run_id = ? and g.\"index\" = 1 order by c.id", rid)
    assert page.locator("a.call-link").count() == len(calls) >= 1
    proposed = q(ui_db, "select distinct l.prompt_version from prompt_lm_call l join lm_call c on c.id = l.lm_call_id "
                        "join generation g on g.id = c.generation_id where g.run_id = ? and g.\"index\" = 1", rid)
    ids = page.locator("#proposals article.proposal").evaluate_all("as => as.map(a => a.id)")
    assert sorted(ids) == sorted(f"pv-{p[:16]}" for (p,) in proposed) and len(ids) >= 1
    assert page.locator("#proposals ul.lesson li").count() >= len(ids)  # each with its lesson lines
    shot(page, tmp_path, "generation")
    page.locator("a.call-link").first.click()
    page.wait_for_selector("#call-title")
    assert page.inner_text("#call-title") == f"Reflection call #{calls[0][0]}"
    assert json.loads(page.inner_text("#reply-json")) == json.loads(calls[0][1])
    assert json.loads(page.inner_text("#request-json"))["reflector"] == "offline"
    assert page.inner_text("#call-generation") == "t:1"
    shot(page, tmp_path, "call")
    assert not page.errors, page.errors


def test_rollouts_filter_and_paginate(page, ui_server, ui_db, tmp_path):
    rid = run_id(ui_db)
    (gid,) = q(ui_db, "select id from generation where run_id = ? and \"index\" = 2", rid)[0]
    open_page(page, f"{ui_server}/run/{rid}/gen/2")
    (total,) = q(ui_db, "select count(*) from rollout where generation_id = ?", gid)[0]
    assert page.locator("#rollout-table tbody tr.rollout").count() == min(25, total)
    with page.expect_navigation():  # ui.js submits the form when a select changes
        page.select_option("select[name=purpose]", "train")
    page.wait_for_selector("html[data-ready='1']", state="attached")
    purposes = page.locator("#rollout-table tbody tr.rollout td:nth-child(3)").all_inner_texts()
    (n_train,) = q(ui_db, "select count(*) from rollout where generation_id = ? and purpose = 'train'", gid)[0]
    assert set(purposes) == {"train"} and len(purposes) == min(25, n_train)
    task = page.locator("#rollout-table tbody tr.rollout").first.get_attribute("data-task")
    with page.expect_navigation():
        page.select_option("select[name=task]", task)
    page.wait_for_selector("html[data-ready='1']", state="attached")
    rows = q(ui_db, "select passed, completion from rollout where generation_id = ? and purpose = 'train' "
                    "and task_id = ? order by id", gid, task)
    assert page.locator("#rollout-table tbody tr.rollout").count() == len(rows)
    assert set(page.locator("#rollout-table tbody tr.rollout").evaluate_all("rs => rs.map(r => r.dataset.task)")) \
        == {task}
    first = page.locator("#rollout-table tbody tr.rollout").first
    first.locator("summary").click()
    assert first.locator("pre.completion").inner_text() == rows[0][1].rstrip("\n") or \
        first.locator("pre.completion").inner_text() == rows[0][1]
    # pass/fail filter and paging through every failed rollout of the generation
    open_page(page, f"{ui_server}/run/{rid}/gen/2?passed=fail")
    (n_fail,) = q(ui_db, "select count(*) from rollout where generation_id = ? and not passed", gid)[0]
    seen = page.locator("#rollout-table tbody tr.rollout.fail").count()
    while page.locator(".pager a.next").count():
        with page.expect_navigation():
            page.locator(".pager a.next").first.click()
        page.wait_for_selector("html[data-ready='1']", state="attached")
        assert page.locator("#rollout-table tbody tr.rollout.pass").count() == 0
        seen += page.locator("#rollout-table tbody tr.rollout.fail").count()
    assert seen == n_fail
    shot(page, tmp_path, "rollouts")
    assert not page.errors, page.errors


def test_compare_two_generations(page, ui_server, ui_db, tmp_path):
    open_page(page, ui_server + "/")
    page.fill("input[name=a]", "t:0")
    page.fill("input[name=b]", "t:3")
    with page.expect_navigation():
        page.click("form.cmp button")
    page.wait_for_selector("html[data-ready='1']", state="attached")
    assert page.inner_text("#cmp-a") == "t:0" and page.inner_text("#cmp-b") == "t:3"
    assert "A is an ancestor of B" in page.inner_text(".facts")
    assert page.locator("#prompts table.side tbody tr").count() >= 2  # system, lessons side by side
    check_class_deltas(page, ui_db, ("t", 0), ("t", 3))
    shot(page, tmp_path, "compare")
    # across runs (the tiny CI model fails the same way in every generation, so deltas are 0 above)
    open_page(page, f"{ui_server}/compare?a=t:0&b={HOSTILE_RUN}:1")
    assert page.inner_text("#cmp-b") == f"{HOSTILE_RUN}:1"
    assert check_class_deltas(page, ui_db, ("t", 0), (HOSTILE_RUN, 1)) > 0
    assert not page.errors, page.errors
    open_page(page, ui_server + "/compare?a=t:0&b=nope:1")  # a 404 page, which the console reports
    assert "unknown run" in page.inner_text("#error-message")
    assert not [e for e in page.errors if "404" not in e], page.errors


def check_class_deltas(page, db, a, b) -> int:
    """The per-class table equals the database's held-out failure classes; returns how many differ."""
    def classes(run, index):
        (m,) = q(db, "select g.metrics from generation g join run r on r.id = g.run_id where r.name = ? "
                     "and g.\"index\" = ?", run, index)[0]
        return json.loads(m)["heldout"].get("failure_classes") or {}

    fa, fb = classes(*a), classes(*b)
    shown = {}
    for row in page.locator("#class-deltas tbody tr").all_inner_texts():
        name, va, vb, delta = row.split("\t")
        shown[name] = (int(va), int(vb), int(delta))
    # class names are shown through the ui's `visible` (control characters spelled out)
    assert shown == {visible(k): (fa.get(k, 0), fb.get(k, 0), fb.get(k, 0) - fa.get(k, 0)) for k in set(fa) | set(fb)}
    return sum(1 for v in shown.values() if v[2] != 0)


def test_hostile_text_is_shown_not_run(page, ui_server, ui_db, tmp_path):
    rid = run_id(ui_db, HOSTILE_RUN)
    (cid,) = q(ui_db, "select c.id from lm_call c join generation g on g.id = c.generation_id where g.run_id = ?",
               rid)[0]
    (pv,) = q(ui_db, "select prompt_version from generation where run_id = ? and \"index\" = 1", rid)[0]
    urls = ["/", f"/run/{rid}", f"/run/{rid}/gen/1", f"/run/{rid}/gen/1?task={HOSTILE[:20]}", f"/call/{cid}",
            f"/prompt/{pv}", f"/compare?a={HOSTILE_RUN}:0&b={HOSTILE_RUN}:1"]
    for url in urls:
        open_page(page, ui_server + url)
        assert page.evaluate("window.__pwned") is None, url
        assert page.locator("img[src=x]").count() == 0, url
        html = page.content()
        assert "<script>window.__pwned" not in html and "\x00" not in html, url
    open_page(page, f"{ui_server}/run/{rid}/gen/1")
    page.locator("#rollout-table summary").first.click()
    text = page.locator("#rollout-table pre.completion").first.inner_text()
    # the markup is shown as text, and the invisible characters are spelled out
    assert "<script>window.__pwned=1</script>" in text and "\\x00NUL\\x07BEL\\x1b[31mESC \\u202eRLO" in text
    assert "{{ 7*7 }}" in text  # not a template
    assert page.locator("#rollout-table pre.trace").first.inner_text() == text
    # a hostile task id still works as a filter (its form value is encoded: NUL cannot round-trip in HTML)
    with page.expect_navigation():
        page.select_option("select[name=task]", index=1)
    page.wait_for_selector("html[data-ready='1']", state="attached")
    assert "task=b64%3A" in page.url
    assert page.locator("#rollout-table tbody tr.rollout").count() == 2
    shot(page, tmp_path, "hostile")
    assert not page.errors, page.errors
