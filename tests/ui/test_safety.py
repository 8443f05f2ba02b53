"""`evolve ui` safety over real HTTP: escaping in the raw bytes, the token gate, the Host check,
the loopback default, read-only methods, and one-line errors for bad input."""

from __future__ import annotations

import http.client
import sqlite3
import subprocess
import urllib.parse

import pytest
from ui_helpers import EVOLVE, HOSTILE, HOSTILE_RUN, REPO, free_port, start_ui


def get(base: str, path: str, headers: dict | None = None, method: str = "GET"):
    u = urllib.parse.urlsplit(base)
    con = http.client.HTTPConnection(u.hostname, u.port, timeout=20)
    con.request(method, path, headers=headers or {})
    resp = con.getresponse()
    body = resp.read()
    con.close()
    return resp.status, dict(resp.getheaders()), body


def hostile_urls(db) -> list[str]:
    con = sqlite3.connect(db)
    rid = con.execute("select id from run where name = ?", (HOSTILE_RUN,)).fetchone()[0]
    cid = con.execute("select c.id from lm_call c join generation g on g.id = c.generation_id where g.run_id = ?",
                      (rid,)).fetchone()[0]
    pv = con.execute("select prompt_version from generation where run_id = ? and \"index\" = 1", (rid,)).fetchone()[0]
    con.close()
    name = urllib.parse.quote(HOSTILE_RUN)
    return ["/", f"/run/{rid}", f"/run/{rid}/gen/1", f"/run/{rid}/gen/1?passed=fail&cls={urllib.parse.quote(HOSTILE)}",
            f"/call/{cid}", f"/prompt/{pv}", f"/compare?a={name}:0&b={name}:1", f"/compare?a={urllib.parse.quote(HOSTILE)}:9&b=x"]


def test_every_page_escapes_hostile_text(ui_server, ui_db):
    for path in hostile_urls(ui_db):
        status, headers, body = get(ui_server, path)
        assert status in (200, 404), path
        text = body.decode()
        assert "<script>window.__pwned" not in text and "<img src=x" not in text, path
        assert "\x00" not in text and "\x1b" not in text and "\u202e" not in text, path
        assert "&lt;script&gt;window.__pwned" in text, path  # shown, as text
        assert "script-src 'self'" in headers["content-security-policy"]
    status, _, body = get(ui_server, hostile_urls(ui_db)[2])
    assert "\\x00NUL\\x07BEL\\x1b[31mESC \\u202eRLO" in body.decode()
    assert "episode (2 turns)" in body.decode() and "(visible tests 0.5" in body.decode()  # transcripts shown, escaped


def test_read_only_and_host_check(ui_server):
    assert get(ui_server, "/", method="POST")[0] == 405
    assert get(ui_server, "/run/1", method="DELETE")[0] == 405
    # DNS rebinding: a page on another origin that resolves to 127.0.0.1 still sends its own Host
    assert get(ui_server, "/", headers={"Host": "evil.example"})[0] == 400
    assert get(ui_server, "/", headers={"Host": "localhost"})[0] == 200


def test_token_gate(ui_db):
    proc, base = start_ui(ui_db, "--token", "s3cret")
    try:
        assert get(base, "/")[0] == 401
        assert get(base, "/?token=wrong")[0] == 401
        assert get(base, "/static/ui.css")[0] == 401
        status, headers, _ = get(base, "/?token=s3cret&x=1")
        assert status == 303 and headers["location"] == "/?x=1"  # the token leaves the address bar
        cookie = headers["set-cookie"].split(";")[0]
        assert "HttpOnly" in headers["set-cookie"] and "samesite=strict" in headers["set-cookie"].lower()
        assert get(base, "/", headers={"Cookie": cookie})[0] == 200
        assert get(base, "/", headers={"Authorization": "Bearer s3cret"})[0] == 200
        assert get(base, "/", headers={"Authorization": "Bearer s3cre"})[0] == 401
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.parametrize("args, needle", [
    (["--host", "0.0.0.0"], "not a loopback address: pass --token"),
    (["--host", "192.168.1.7"], "not a loopback address"),
    (["--port", "70000"], "out of range"),
])
def test_bad_binds_are_one_line_errors(ui_db, args, needle):
    proc = subprocess.run([*EVOLVE, "ui", "--db", f"sqlite:///{ui_db}", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and needle in lines[0], proc.stderr


def test_missing_database_is_one_line_error(tmp_path):
    proc = subprocess.run([*EVOLVE, "ui", "--db", str(tmp_path / "none.db"), "--port", str(free_port())], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "none.db").exists()  # read-only: nothing created
