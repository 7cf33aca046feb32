"""Fixtures shared by the adapter integration tests.

Every runtime's tests run its real agent loop against a ``GuardLink`` whose
guard runs the project's real policies:

- ``link``: ``remind`` at 3 (reminders, subagent isolation, user-turn reset);
- ``rescue_link``: ``rescue`` with its defaults (the 3rd occurrence of a call
  is denied) and an ask command that does not exist, so nothing leaves the
  machine;
- ``advice_link``: ``rescue`` that denies the 2nd occurrence and escalates at
  the 3rd through a real ask script (a process) which saves its question to
  ``asked`` and answers ``ADVICE``;
- ``turns_link``: ``turns`` at threshold 2 with a one-turn ladder: the 2nd
  consecutive turn of a call draws the advisory, the 3rd is denied, the 4th
  is denied with a halt request.

The adapters see only the bus contract (a deny ``Decision``, a
``context/message``, an ``agent/status`` ``halt-requested``); a test that
needs one in a place no policy puts it (a halt during the user's prompt, a
halt by another plugin that must outlive a hook process) publishes it itself.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bus.testing import Capture
from guard import TURNS_DENIAL, Config, RemindConfig, RescueConfig, TurnsConfig
from guard.adapters import GuardLink
from tests.conftest import AskScript

RESCUE_DENIED = "loop-rescue denied this call; it did not run."
"""How every rescue denial starts."""

TURNS_DENIED = TURNS_DENIAL.split("{tool}")[0]
"""How every turns denial starts."""

ADVICE = "Stop searching: load_config is defined at src/cfg.py:12, read that file."
"""What ``advice_link``'s ask script answers."""

REMINDED = "repeating the exact same tool call"
"""A phrase of ``remind``'s gentle reminder."""

GUARD_SAID = (REMINDED, RESCUE_DENIED, "Tool-call loop detected", TURNS_DENIED)
"""Phrases a looping test model reacts to by giving up the loop."""

_OFF = RemindConfig(enabled=False)


@pytest.fixture
def remind_at_3() -> Config:
    return Config(remind=RemindConfig(thresholds=(3,), exclude=("delegate", "transfer_*")))


@pytest.fixture
def link(remind_at_3: Config) -> GuardLink:
    return GuardLink(config=remind_at_3)


@pytest.fixture
def events(link: GuardLink) -> Capture:
    return Capture().attach(link.bus)


@pytest.fixture
def rescue_link(missing_ask_command: str) -> GuardLink:
    return GuardLink(config=Config(remind=_OFF, rescue=RescueConfig(ask_command=missing_ask_command)))


@pytest.fixture
def asked(tmp_path: Path) -> Path:
    """Where ``advice_link``'s ask script saves the question it was asked."""
    return tmp_path / "asked.txt"


@pytest.fixture
def advice_link(ask_script: AskScript, asked: Path) -> GuardLink:
    command = ask_script(f"printf '%s' \"$1\" > '{asked}'\necho '{ADVICE}'")
    rescue = RescueConfig(ask_command=str(command), nudge_at=2, rescue_at=3, window=3)
    return GuardLink(config=Config(remind=_OFF, rescue=rescue))


@pytest.fixture
def turns_link() -> GuardLink:
    return GuardLink(config=Config(remind=_OFF, turns=TurnsConfig(threshold=2, deny_after=1, halt_after=1)))
