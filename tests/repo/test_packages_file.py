"""The repo package list (verifiers/repo_packages.toml) in the one config style: an unknown key, a bad
type and a bad value are one-line errors naming the file and the key; a local sdist's path is the file's."""

from __future__ import annotations

from pathlib import Path

import pytest
from config_errors import assert_one_line_error

from evolve.repo.packages import load_packages

ROW = 'name = "a"\nversion = "1.0"\nsha256 = "00"\nlicense = "MIT"\nsource = ["a.py"]\ntests = ["t"]\n'


@pytest.mark.parametrize("text,needle", [
    ("[[package]]\n" + ROW + 'splt = "heldout"\n', "unknown key 'package.0.splt'"),
    ("[[package]]\n" + ROW.replace('version = "1.0"', "version = 1.0"), "package.0.version: Input should be a valid string"),
    ("[[package]]\n" + ROW + 'split = "test"\n', "package.0.split: Input should be 'train' or 'heldout'"),
    ("[[package]]\n" + ROW + "[[package]]\n" + ROW + 'sources = ["b.py"]\n', "unknown key 'package.1.sources'"),
    ("[[packages]]\n" + ROW, "unknown key 'packages'"),
    ("", "no [[package]] entries"),
])
def test_a_bad_package_list_is_one_line_naming_file_and_key(tmp_path, text, needle):
    msg = assert_one_line_error(load_packages, tmp_path / "packages.toml", text, needle)
    assert "more)" not in msg, msg


def test_a_local_sdist_is_relative_to_the_list(tmp_path):
    sub = tmp_path / "lists"
    sub.mkdir()
    (sub / "p.toml").write_text("[[package]]\n" + ROW + 'path = "dist/a-1.0.tar.gz"\n')
    (spec,) = load_packages(sub / "p.toml")
    assert spec.path == str((sub / "dist" / "a-1.0.tar.gz").resolve()) and spec.split == "train"
    shipped = load_packages(Path(__file__).resolve().parents[2] / "verifiers" / "repo_packages.toml")
    assert len(shipped) >= 8 and all(s.path is None for s in shipped)
