"""Where a file is expected, only a regular file is taken: a FIFO, a device,
a directory (or a name that is a symbolic link to one) is a one-line error,
never a hang, a ``MemoryError`` or a traceback."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from bus import LogError, LogReader, NotRegularFileError, SessionLog
from guard.config import ConfigError, load_config
from guard.importers import TranscriptError, open_sessions
from tests.faults.conftest import CLI, make_fifo

Maker = Callable[[Path], Path]


def _fifo(path: Path) -> Path:
    return make_fifo(path)


def _zero(path: Path) -> Path:
    path.symlink_to("/dev/zero")
    return path


def _directory(path: Path) -> Path:
    path.mkdir()
    return path


def _null(path: Path) -> Path:
    path.symlink_to("/dev/null")
    return path


KINDS: dict[str, Maker] = {"fifo": _fifo, "dev-zero": _zero, "directory": _directory, "dev-null": _null}
_WORDS = {"fifo": "FIFO", "dev-zero": "character device", "directory": "directory", "dev-null": "character device"}


@pytest.fixture(params=sorted(KINDS))
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_replay_log(kind: str, tmp_path: Path, cli: CLI) -> None:
    line = cli("replay", KINDS[kind](tmp_path / "s.jsonl")).clean_error(2)
    assert _WORDS[kind] in line


@pytest.mark.parametrize("suffix", [".toml", ".yaml"])
def test_config_of_replay_and_check_config(kind: str, suffix: str, tmp_path: Path, cli: CLI) -> None:
    config = KINDS[kind](tmp_path / f"guard{suffix}")
    assert _WORDS[kind] in cli("check-config", config).clean_error(2)
    log = tmp_path / "s.jsonl"
    SessionLog(log).close()
    assert _WORDS[kind] in cli("replay", log, "--config", config).clean_error(2)


def test_import_source(kind: str, tmp_path: Path, cli: CLI) -> None:
    line = cli("import", KINDS[kind](tmp_path / "t.jsonl"), "-o", tmp_path / "out.jsonl").clean_error(2)
    assert _WORDS[kind] in line
    assert not (tmp_path / "out.jsonl").exists()


def test_audit_path_is_listed_as_unreadable(kind: str, tmp_path: Path, cli: CLI) -> None:
    run = cli("audit", KINDS[kind](tmp_path / "t.jsonl"))
    assert run.code in (0, 1)  # a directory is walked (and is empty); anything else is an error
    if kind != "directory":
        assert run.code == 1
        assert _WORDS[kind] in run.out


def test_a_fifo_inside_an_audited_directory_is_not_waited_on(tmp_path: Path, cli: CLI) -> None:
    make_fifo(tmp_path / "agent-1.jsonl")  # a subagent file's first line is peeked at
    make_fifo(tmp_path / "t.jsonl")
    run = cli("audit", tmp_path)
    assert run.code == 1
    assert "FIFO" in run.out


def test_hook_config(kind: str, tmp_path: Path, cli: CLI) -> None:
    config = KINDS[kind](tmp_path / "guard.toml")
    payload = {"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": "hi"}
    run = cli("hook", "--config", config, "--state-dir", tmp_path / "state", stdin=json.dumps(payload).encode())
    assert _WORDS[kind] in run.clean_error(1)


def test_audit_html_output(tmp_path: Path, cli: CLI) -> None:
    log = tmp_path / "s.jsonl"
    SessionLog(log).close()
    assert "FIFO" in cli("audit", log, "--html", make_fifo(tmp_path / "r.html")).clean_error(2)


def test_library_entry_points(kind: str, tmp_path: Path) -> None:
    path = KINDS[kind](tmp_path / "x.jsonl")
    with pytest.raises(LogError, match=_WORDS[kind]):
        LogReader(path)
    with pytest.raises(TranscriptError, match=_WORDS[kind]):
        list(open_sessions(path))
    with pytest.raises(ConfigError, match=_WORDS[kind]):
        load_config(KINDS[kind](tmp_path / "c.toml"))
    if kind in ("fifo", "directory"):
        with pytest.raises(NotRegularFileError, match=_WORDS[kind]):
            SessionLog(path, append=True)


def test_a_device_is_still_a_place_to_write_a_log() -> None:
    with SessionLog(os.devnull, append=True, follow_symlinks=True):
        pass
