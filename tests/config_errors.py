"""One check for every user-edited file format: a bad file is one ConfigError line that starts with
the file's name and says what is wrong (the needle), never a traceback or pydantic's multi-line text."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from evolve.errors import ConfigError


def assert_one_line_error(load: Callable[[Path], object], path: Path, text: str, needle: str,
                          prefix: str = "") -> str:
    path.write_text(text)
    with pytest.raises(ConfigError) as e:
        load(path)
    msg = str(e.value)
    assert msg.startswith(f"{prefix}{path}: ") and needle in msg and "\n" not in msg, msg
    return msg
