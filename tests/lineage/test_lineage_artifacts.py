"""The content-addressed artifact store on a real folder."""

from __future__ import annotations

import os
import threading

import pytest
from sqlalchemy import select

from evolve.errors import LineageError
from evolve.lineage import Artifact, ArtifactStore
from evolve.util.hashing import sha256_bytes


def _tmp_files(root):
    return [p for p in root.rglob("*") if p.name.endswith(".tmp")]


def test_put_bytes_is_content_addressed_and_durable(tmp_path):
    seen = []
    art = ArtifactStore(tmp_path / "a", on_durable=lambda *row: seen.append((row, art.path(row[0]).is_file())))
    sha = art.put_bytes(b"hello")
    assert sha == sha256_bytes(b"hello")
    assert art.path(sha) == tmp_path / "a" / sha[:2] / sha
    assert art.get_bytes(sha) == b"hello" and art.verify(sha)
    assert art.put_bytes(b"hello") == sha  # dedupe
    assert seen[0] == ((sha, "blob", 5), True)  # reported only once the file is there
    assert _tmp_files(tmp_path) == []


def test_put_dir_round_trip_and_verify(tmp_path):
    src = tmp_path / "ckpt"
    (src / "sub").mkdir(parents=True)
    (src / "model.safetensors").write_bytes(os.urandom(3 << 20))  # bigger than one copy chunk
    (src / "config.json").write_text("{}")
    (src / "sub" / "tok.json").write_text('{"v": 1}')
    art = ArtifactStore(tmp_path / "a")
    sha = art.put_dir(src)
    m = art.manifest(sha)
    assert sorted(m["files"]) == ["config.json", "model.safetensors", "sub/tok.json"]
    assert m["files"]["model.safetensors"]["size"] == 3 << 20
    assert art.put_dir(src) == sha  # deterministic
    out = art.materialize_dir(sha, tmp_path / "out")
    for rel in m["files"]:
        assert (out / rel).read_bytes() == (src / rel).read_bytes()
    assert art.verify(sha) and art.problems(sha) == []
    assert _tmp_files(tmp_path) == []

    blob = art.path(m["files"]["sub/tok.json"]["sha"])
    blob.write_bytes(b'{"v": 2}')
    assert not art.verify(sha)
    (problem,) = art.problems(sha)
    assert "corrupt" in problem and "sub/tok.json" in problem
    with pytest.raises(LineageError, match="missing or corrupt"):
        art.materialize_dir(sha, tmp_path / "out2")
    blob.unlink()
    assert "missing" in art.problems(sha)[0]
    with pytest.raises(LineageError, match="not an artifact sha256"):
        art.path("../../etc/passwd")


def test_failed_write_leaves_no_temp_file(tmp_path):
    art = ArtifactStore(tmp_path / "a")
    art.put_bytes(b"x")
    (tmp_path / "src").mkdir()
    with pytest.raises(IsADirectoryError):  # the temp file exists when reading the source fails
        art.put_file(tmp_path / "src")
    with pytest.raises(FileNotFoundError):
        art.put_file(tmp_path / "absent.bin")
    assert _tmp_files(tmp_path) == [] and sorted(p.name for p in (tmp_path / "a").iterdir()) == ["2d"]


def test_concurrent_puts_of_one_blob(tmp_path):
    art = ArtifactStore(tmp_path / "a")
    data = os.urandom(1 << 20)
    shas = []
    threads = [threading.Thread(target=lambda: shas.append(art.put_bytes(data))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(shas)) == 1 and art.verify(shas[0]) and _tmp_files(tmp_path) == []


def test_store_artifacts_are_recorded_under_the_run(store):
    store.create_run("r", {})
    art = store.artifacts("r")
    assert art.root == store.runs_dir / "r" / "artifacts"
    sha = art.put_bytes(b"abc")
    art.put_bytes(b"abc")
    with store.engine.connect() as conn:
        rows = conn.execute(select(Artifact.sha, Artifact.kind, Artifact.size)).all()
    assert rows == [(sha, "blob", 3)]
