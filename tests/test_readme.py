"""The README's example runs as printed and does what it says."""

from __future__ import annotations

import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README.read_text(), flags=re.DOTALL)


def test_readme_example_writes_a_log_and_collects_the_reminder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (example,) = _blocks("python")
    script = tmp_path / "example.py"
    script.write_text(example)
    monkeypatch.chdir(tmp_path)
    runpy.run_path(str(script), run_name="__main__")
    out = capsys.readouterr().out
    assert "You are repeating the exact same tool call" in out
    lines = (tmp_path / "session.jsonl").read_text().splitlines()
    assert lines[0].startswith('{"type":"session/start","v":1')
    assert sum('"type":"tool/result"' in line for line in lines) == 3
    assert (tmp_path / "session.jsonl").stat().st_mode & 0o777 == 0o600


def test_readme_quick_start_replay_command_succeeds() -> None:
    command = next(line for block in _blocks("sh") for line in block.splitlines() if "repeat-tool-guard replay" in line)
    replay = command.split("&& ")[-1].split()
    assert replay[0] == "repeat-tool-guard"
    result = subprocess.run(
        [sys.executable, "-m", "guard", *replay[1:]],
        cwd=README.parent,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(README.parent)},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "remind/remind  grep × 3" in result.stdout
    assert "check: every guard action matches the log" in result.stderr


def test_readme_config_example_is_a_valid_config() -> None:
    import tomllib

    from guard import parse_config

    (example,) = _blocks("toml")
    config = parse_config(tomllib.loads(example))
    assert (config.remind.enabled, config.turns.enabled, config.rescue.enabled) == (True, True, True)
    assert config.turns.threshold == 5
