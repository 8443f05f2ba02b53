"""A seed prompt file (prompts/*.toml) in the one config style: every shipped file loads; an unknown key,
a bad type and a bad value are one-line errors naming the file and the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from config_errors import assert_one_line_error

from evolve.prompt.seed import load_seed_prompt

REPO = Path(__file__).resolve().parents[2]


def test_every_shipped_seed_prompt_loads():
    files = sorted((REPO / "prompts").glob("*.toml"))
    assert len(files) >= 4
    for f in files:
        assert "system" in load_seed_prompt(f).components, f


@pytest.mark.parametrize("text,needle", [
    ('[components]\nsystem = "x"\n[component]\nlessons = ""\n', "unknown key 'component'"),  # was silently ignored
    ('[components]\nsystem = 3\n', "components.system: Input should be a valid string"),
    ('[components]\n', "components: Dictionary should have at least 1 item"),
    ('system = "x"\n', "components: Field required"),
])
def test_a_bad_seed_prompt_is_one_line_naming_file_and_key(tmp_path, text, needle):
    assert_one_line_error(load_seed_prompt, tmp_path / "seed.toml", text, needle, prefix="seed prompt ")
