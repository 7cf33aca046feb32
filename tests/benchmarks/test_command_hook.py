"""Smoke test of the command-hook section at tiny sizes: it runs real hook
processes and reports every size against the interpreter's own start, and
no hook had to replay its log. No timing is asserted."""

from __future__ import annotations

import msgspec
import pytest

from benchmarks.cli import main


@pytest.mark.slow  # hook processes at every session size
def test_the_section_times_hook_processes_at_every_session_size(capsys: pytest.CaptureFixture[str]) -> None:
    options = ["--only", "command-hook", "--hook-sizes", "0,12", "--hook-processes", "1", "--format", "json"]
    assert main(options) == 0
    _, *rows = (msgspec.json.decode(line) for line in capsys.readouterr().out.splitlines() if line)
    for config, forwarded in (
        (
            "default config (remind)",
            ["hook forwarding to serve, 0 earlier calls", "hook forwarding to serve, 12 earlier calls"],
        ),
        ("every policy", []),
    ):
        names = [row["name"] for row in rows if config in row["section"]]
        assert names == [
            "python -c pass",
            'python -c "import msgspec"',
            "hook, 0 earlier calls",
            "hook, 12 earlier calls",
            *forwarded,
        ]
    hooks = [row for row in rows if row["name"].startswith("hook")]
    assert all(row["rate"] > 0 and "× python -c pass" in row["extra"] for row in hooks)
    assert not any("REPLAYED" in row["extra"] for row in hooks)
