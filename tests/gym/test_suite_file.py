"""The gym's suite file (verifiers/tiny_coder.toml) in the one config style: an unknown key, a bad type
and a bad value are one-line errors naming the file and the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from config_errors import assert_one_line_error

from evolve.gym.generate import GymParams
from evolve.gym.suite import read_suite_toml

REPO = Path(__file__).resolve().parents[2]


def test_the_shipped_suite_file_states_the_code_defaults():
    params, table = read_suite_toml(REPO / "verifiers" / "tiny_coder.toml")
    assert params == GymParams() and table == {"name": "tiny-coder", "seed": 0}


@pytest.mark.parametrize("text,needle", [
    ("[generator]\nheldout_fractoin = 0.2\n", "unknown key 'generator.heldout_fractoin'"),
    ("[generators]\nvisible = 2\n", "unknown key 'generators'"),
    ('[generator]\nvisible = "2"\n', "generator.visible: Input should be a valid integer"),
    ("[generator]\ntrain_variants = 2.0\n", "generator.train_variants: Input should be a valid integer"),
    ("[suite]\nseed = true\n", "suite.seed: Input should be a valid integer"),
    ("[generator]\nheldout_fraction = 1.0\n", "generator.heldout_fraction: Input should be less than 1"),
    ("[generator]\nvisible = 0\n", "generator.visible: Input should be greater than or equal to 1"),
    ("[generator]\nhidden_min = 14\n", "generator: hidden_min 14 is above hidden_max 13"),
    ('[suite]\npipeline = "x"\n', "[suite] key 'pipeline' is not read"),
])
def test_a_bad_suite_file_is_one_line_naming_file_and_key(tmp_path, text, needle):
    assert_one_line_error(read_suite_toml, tmp_path / "suite.toml", text, needle)
