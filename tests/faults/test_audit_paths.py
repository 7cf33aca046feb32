"""``audit`` on paths a file system allows and a report must still carry:
names that are no UTF-8 or hold control characters, folders that cannot
be listed, and an HTML report path that cannot be written."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from guard.audit import audit
from tests.faults.conftest import CLI
from tests.guard.importers._transcripts import looping_claude_code


def _unlistable_folder(top: Path) -> str:
    """A folder under ``top`` whose path runs past ``PATH_MAX``, made
    through descriptors: listing it fails (``ENAMETOOLONG``), for root as
    for anyone, as a folder without permission fails for a user; the
    transcript in it is never reached. Its first component's name."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for level in range(18):
            name = f"{level:02d}" + "d" * 240
            os.mkdir(name, dir_fd=fd)
            inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        transcript = looping_claude_code(top / "deep.jsonl").read_bytes()
        os.unlink(top / "deep.jsonl")
        out = os.open("deep.jsonl", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd)
        os.write(out, transcript)
        os.close(out)
    finally:
        os.close(fd)
    return "00" + "d" * 240


def test_a_folder_that_cannot_be_listed_is_reported_and_exits_1(tmp_path: Path, cli: CLI) -> None:
    looping_claude_code(tmp_path / "top.jsonl")
    first = _unlistable_folder(tmp_path)
    (tmp_path / "r.html").write_text("an earlier report")  # the check for a report there walks the folder too
    run = cli("audit", tmp_path, "--json", "--html", tmp_path / "r.html")
    assert run.code == 1
    data = json.loads(run.out)
    assert [Path(s["path"]).name for s in data["sessions"]] == ["top.jsonl"]
    (error,) = data["errors"]
    assert error["path"].startswith(str(tmp_path / first) + "/")
    assert error["reason"] == "cannot list this directory: File name too long"
    assert data["totals"]["unreadable"] == 1
    lines = run.err.splitlines()
    assert lines[0].startswith(f"repeat-tool-guard audit: could not read {tmp_path / first}/")
    assert lines[0].endswith(": cannot list this directory: File name too long")
    assert lines[1:] == [f"report: {tmp_path / 'r.html'}"]
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    table = cli("audit", tmp_path)
    assert table.code == 1
    assert "could not read 1 files:" in table.out
    assert ": cannot list this directory: File name too long" in table.out


def test_a_transcript_whose_name_is_no_utf8_is_in_every_report_with_its_name_escaped(tmp_path: Path, cli: CLI) -> None:
    folder = tmp_path / "sessions"
    looping_claude_code(folder / os.fsdecode(b"caf\xe9-session.jsonl"))
    (folder / os.fsdecode(b"torn\xff.jsonl")).write_bytes(_TORN)
    shown, torn = str(folder / "caf\\xe9-session.jsonl"), str(folder / "torn\\xff.jsonl")
    run = cli("audit", folder, "--json", "--html", tmp_path / "r.html")
    assert run.code == 1  # the torn file alone could not be read
    data = json.loads(run.out)
    (session,) = data["sessions"]
    assert (session["path"], session["label"], session["session"]) == (shown, shown, "caf\\xe9-session")
    assert session["calls"] == 22
    (error,) = data["errors"]
    assert error["path"] == torn
    assert run.err.splitlines()[0].startswith(f"repeat-tool-guard audit: could not read {torn}: ")
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "caf\\xe9-session.jsonl" in page
    assert "torn\\xff.jsonl" in page
    table = cli("audit", folder)
    assert table.code == 1
    assert "caf\\xe9-session.jsonl" in table.out
    assert f"  {torn}: " in table.out


def test_a_path_no_file_system_holds_is_an_error_the_report_can_carry(tmp_path: Path) -> None:
    """A lone surrogate no file name decodes to, passed from Python: the
    file is an error, shown escaped, and the report still encodes."""
    report = audit([tmp_path / "x\ud800.jsonl", looping_claude_code(tmp_path / "loop.jsonl")])
    assert len(report.sessions) == 1
    (error,) = report.errors
    assert error.path == str(tmp_path / "x\\ud800.jsonl")
    assert "UnicodeEncodeError" in error.reason
    assert b"x\\\\ud800.jsonl" in msgspec.json.encode(report)


ODD_NAME = "x\x1b[2J\x1b]0;pwned\x07\rname\nsecond.jsonl"
_TORN = b'{"history": ['
"""A transcript cut short: found in a folder, an error of the audit (an
empty file would only be left out)."""


def test_audit_error_lines_are_one_line_each_with_control_characters_escaped(tmp_path: Path, cli: CLI) -> None:
    """On stderr with ``--json``, and in the table's list."""
    (tmp_path / ODD_NAME).write_bytes(_TORN)
    run = cli("audit", tmp_path, "--json")
    line = run.clean_error(1)
    assert line.startswith("repeat-tool-guard audit: could not read ")
    assert "x\\x1b[2J\\x1b]0;pwned\\x07 name second.jsonl: " in line
    assert not any(c in line for c in "\x1b\x07\r")
    table = cli("audit", tmp_path)
    assert table.code == 1
    listed = table.out.split("could not read 1 files:\n")[1]
    assert listed.startswith(f"  {tmp_path}/x\\x1b[2J\\x1b]0;pwned\\x07 name second.jsonl: ")
    assert "is neither JSON Lines nor a JSON document" in listed
    assert listed.count("\n") == 1
    assert not any(c in table.out for c in "\x1b\x07\r")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_bar_shows_a_file_name_on_its_line_with_control_characters_escaped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: CLI
) -> None:
    (tmp_path / ODD_NAME).write_bytes(_TORN)
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    assert cli("audit", tmp_path).code == 1
    drawn = terminal.getvalue()
    assert "x\\x1b[2J\\x1b]0;pwned\\x07 name second.jsonl\x1b[K" in drawn
    assert not any(c in drawn.replace("\x1b[K", "") for c in "\x1b\x07\n")
    assert drawn.count("\r") == 3  # the bar's own: two draws and the clearing at the end


@pytest.mark.parametrize(
    ("report", "says"),
    [
        ("folder", "HTML report '{tmp}/folder' is a directory, not a regular file"),
        ("missing/r.html", "[Errno 2] No such file or directory: '{tmp}/missing/r.html'"),
        ("{long}.html", "[Errno 36] File name too long: '{tmp}/{long}.html'"),
        (
            "/proc/self/comm",  # a file the kernel provides: never written into
            "[Errno 2] No such file or directory: no new file can be made beside it: '/proc/self/comm'",
        ),
    ],
)
def test_an_html_report_that_cannot_be_written_is_refused_before_the_audit_starts(
    tmp_path: Path, cli: CLI, report: str, says: str
) -> None:
    (tmp_path / "folder").mkdir()
    transcript = looping_claude_code(tmp_path / "loop.jsonl")
    long = "r" * 300
    run = cli("audit", transcript, "--html", tmp_path / report.format(long=long))
    assert run.clean_error(2) == "repeat-tool-guard: " + says.format(tmp=tmp_path, long=long)
    assert run.out == ""  # the table comes before the report: refused before the audit ran


def test_checking_the_html_report_leaves_no_file_and_an_old_report_whole(tmp_path: Path, cli: CLI) -> None:
    transcript = looping_claude_code(tmp_path / "loop.jsonl")
    new, old = tmp_path / "new.html", tmp_path / "old.html"
    old.write_text("an earlier report")
    for report in (new, old):  # the audit fails after the check: nothing was written
        run = cli("audit", transcript, "--session", "s", "--html", report)
        assert "--session picks a session of a Redis URL" in run.clean_error(2)
    assert not new.exists()
    assert old.read_text() == "an earlier report"
    assert cli("audit", transcript, "--html", new).code == 0
    assert new.read_text().startswith("<!DOCTYPE html>")


def test_a_report_that_does_not_fit_leaves_the_last_one_whole(
    tmp_path: Path, cli: CLI, file_size_limit: Callable[[int], None]
) -> None:
    """A full disk or a file size limit while the page is written: the
    report that was there stays whole (the page is written beside it and
    renamed over it), and nothing is left half-written."""
    transcript = looping_claude_code(tmp_path / "loop.jsonl")
    report = tmp_path / "r.html"
    assert cli("audit", transcript, "--html", report).code == 0
    before = report.read_bytes()
    file_size_limit(len(before) // 2)
    run = cli("audit", transcript, "--html", report)
    file_size_limit(1 << 30)
    assert run.clean_error(2) == f"repeat-tool-guard: [Errno 27] File too large: '{report}'"
    assert report.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loop.jsonl", "r.html"]
