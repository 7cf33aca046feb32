"""Fixtures for the guard tests: a scripted session on a real bus, guard and log."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bus.testing import Capture
from guard import Config
from tests.scenarios._script import Script


class CapturedScript(Script):
    """A ``Script`` whose published events are also kept in ``capture``."""

    def __init__(self, path: Path, config: Config | None = None) -> None:
        super().__init__(path, config)
        self.capture = Capture().attach(self.bus)


MakeScript = Callable[..., CapturedScript]


@pytest.fixture
def make_script(tmp_path: Path) -> Iterator[MakeScript]:
    """``make_script(config=None)``: a fresh scripted session writing
    ``session-N.jsonl`` under ``tmp_path``; closed at teardown."""
    made: list[Script] = []

    def make(config: Config | None = None) -> CapturedScript:
        script = CapturedScript(tmp_path / f"session-{len(made) + 1}.jsonl", config)
        made.append(script)
        return script

    yield make
    for script in made:
        script.close()
