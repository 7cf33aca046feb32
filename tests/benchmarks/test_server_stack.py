"""Smoke test of the server-stack comparison at a tiny size: each server
installed runs the real application in a process of its own and reports its
CPU per request; one that is not installed says so. No timing is asserted."""

from __future__ import annotations

import importlib.util
import re

import pytest

from benchmarks.server_stack import main


def test_every_server_is_measured_or_said_to_be_missing(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--servers", "hypercorn,uvicorn-h11,uvicorn-httptools", "--rounds", "1", "--requests", "4"])
    lines = capsys.readouterr().out.splitlines()[1:]
    assert [line.split(":")[0].strip() for line in lines] == ["hypercorn", "uvicorn-h11", "uvicorn-httptools"]
    measured = re.compile(r"server CPU per request: bare route \d+ us, hook \d+ us \(([\d.]+x|-) the bare route\)")
    assert measured.search(lines[0])
    for line, module in zip(lines[1:], ("uvicorn", "httptools"), strict=True):
        if importlib.util.find_spec(module):
            assert measured.search(line), line
        else:
            assert line.endswith(f"not installed ({module})")


def test_limits_show_the_server_serve_runs_refusing_oversized_headers(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--servers", "hypercorn", "--rounds", "1", "--requests", "4", "--limits"])
    probed = capsys.readouterr().out.splitlines()[-1]
    assert probed.startswith("         hypercorn: a 100 KB header: HTTP/1.1 431")
    assert "20 MB of endless headers: refused more after" in probed


def test_an_unknown_server_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--servers", "gunicorn"])
    assert "unknown gunicorn" in capsys.readouterr().err
