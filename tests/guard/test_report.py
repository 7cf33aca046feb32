"""The audit's terminal table and its self-contained HTML page, rendered in a real browser."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import msgspec
import pytest

from guard import Config
from guard.audit import LOOP_SHARE_ANCHOR, AuditReport, FileError, Timeline, audit
from guard.report import TIMELINE_LIMIT, human_bytes, human_count, render_html, render_table
from tests.guard.importers._transcripts import ClaudeCodeSession, codex_rollout, looping_claude_code


def _team(tmp_path: Path) -> Path:
    """A session with a subagent and a repeated call in each agent."""
    main = ClaudeCodeSession("team")
    main.prompt("go")
    spawn = main.respond(("Task", {"prompt": "look"}))[0]
    main.skip_to(100)
    main.result(spawn, "done")
    for _ in range(3):
        main.call("Bash", {"command": "make"}, "ok")
    main.write(tmp_path / "team.jsonl")
    sub = ClaudeCodeSession("team", agent_id="helper", start=10)
    for _ in range(4):
        sub.call("Grep", {"pattern": "<x & y>"}, "none")
    sub.write(tmp_path / "team" / "subagents" / "agent-helper.jsonl")
    return tmp_path / "team.jsonl"


def _report(tmp_path: Path) -> tuple[AuditReport, list[Timeline]]:
    timelines: list[Timeline] = []
    looping_claude_code(tmp_path / "a" / "loop.jsonl")
    _team(tmp_path / "a")
    (tmp_path / "broken.jsonl").write_text("{oops\n")
    report = audit([tmp_path / "a", tmp_path / "broken.jsonl"], Config(), timelines=timelines)
    return report, timelines


def test_table_lists_sessions_loops_and_errors(tmp_path: Path) -> None:
    report, _ = _report(tmp_path)
    table = render_table(report)
    lines = table.splitlines()
    assert lines[0].startswith("audited 2 sessions in 3 files: 30 tool calls, 4 loops, 13 calls wasted (~220 tokens")
    assert lines[1] == "policies: remind (acted in 2)"
    assert lines[2] == f"sessions with a loop: 2 of 2 (100.0 %); published anchor: {LOOP_SHARE_ANCHOR}"
    assert lines[3] == "would have saved: remind 13 calls (~220 tokens)"
    assert lines[4] == "(tokens are estimated: bytes of the calls' arguments and output / 4)"
    header = lines[6].split()
    assert header == ["session", "format", "agents", "calls", "run", "loops", "wasted", "tokens", "output", "remind"]
    assert lines[7].split()[:9] == ["loop.jsonl", "claude-code", "1", "22", "5", "2", "12", "~213", "2.4"]
    assert lines[7].endswith("remind@3")
    assert lines[8].split()[:4] == ["team.jsonl", "claude-code", "2", "8"]
    # 12 calls of {"path":"src","pattern":"load_config"} (38 B) that returned 396 B: (12 * 38 + 396) / 4
    assert "  loop.jsonl  [main] Grep ×15 (run 5): remind remind@3; wasted 12 calls, ~213 tokens, 396 B" in lines
    assert "      would have saved: remind 12 calls (~213 tokens)" in lines
    assert "  team.jsonl  [helper] Grep ×4 (run 4): remind remind@4; wasted 1 calls, ~7 tokens, 4 B" in lines
    assert lines[-2:] == ["could not read 1 files:", f"  {tmp_path / 'broken.jsonl'}: " + report.errors[0].reason]


def test_table_of_nothing_and_of_files_that_were_not_transcripts(tmp_path: Path) -> None:
    (tmp_path / "notes.json").write_text("{}")
    table = render_table(audit([tmp_path], Config()))
    assert table == (
        "audited 0 sessions in 1 files: 0 tool calls, 0 loops, 0 calls wasted (~0 tokens; 0 B of 0 B tool output) in "
        + table.split(" in ")[2].split("\n")[0]
        + "\npolicies: remind (acted in 0)\n"
        + f"sessions with a loop: 0 of 0 (0.0 %); published anchor: {LOOP_SHARE_ANCHOR}\n"
        + "would have saved: remind 0 calls (~0 tokens)\n"
        + "(tokens are estimated: bytes of the calls' arguments and output / 4)\n"
        + "1 files found were not transcripts and were left out\n"
        + "\nleft out 1 files that are not transcripts:\n"
        + f"  {tmp_path / 'notes.json'}: {str(tmp_path / 'notes.json')!r} is not a transcript format this tool knows"
        + table.split("this tool knows", 1)[1]
    )


def _damaged_rollout(path: Path, bad: int) -> Path:
    """A Codex rollout of one call, then ``bad`` records of a field type
    Codex never writes, then two lines that are no JSON."""
    codex_rollout(path, "function_call", *[{"not": "a type"}] * bad)
    with path.open("ab") as file:
        file.write(b"<<garbage>>\n\xff not json\n")
    return path


def test_the_table_and_the_page_say_which_sessions_skipped_what_and_where(tmp_path: Path) -> None:
    looping_claude_code(tmp_path / "clean.jsonl")
    rollout = _damaged_rollout(tmp_path / "rollout.jsonl", 5)
    other = _damaged_rollout(tmp_path / "z.jsonl", 1)
    timelines: list[Timeline] = []
    report = audit([tmp_path], Config(), timelines=timelines)
    table = render_table(report)
    lines = table.splitlines()
    assert lines[5] == "skipped on import: 10 in 2 of 3 sessions (bad-record 6, invalid-json 4)"
    section = lines.index("skipped on import, by session:")
    assert lines[section + 1 :] == [
        "  rollout.jsonl: bad-record 5, invalid-json 2",
        f"      {rollout}:3: TypeError: unhashable type: 'dict'",
        f"      {rollout}:4: TypeError: unhashable type: 'dict'",
        f"      {rollout}:5: TypeError: unhashable type: 'dict'",
        "      … 2 more (see --json)",
        "  z.jsonl: bad-record 1, invalid-json 2",
        f"      {other}:3: TypeError: unhashable type: 'dict'",
    ]
    page = render_html(report, timelines)
    assert "<div class=lbl>skipped on import</div><div class=stats>10 in 2 of 3 sessions</div>" in page
    assert "<li><b>rollout.jsonl</b>: bad-record 5, invalid-json 2<br><span class=stats>" in page
    assert "… 2 more (see --json)</span></li>" in page
    assert page.count("skipped on import: bad-record 5, invalid-json 2</span>") == 1  # the session's badge
    assert f"title='{rollout}:3: TypeError: unhashable type: &#x27;dict&#x27;\n{rollout}:4" in page


def test_a_clean_audit_says_nothing_of_skipping(tmp_path: Path) -> None:
    timelines: list[Timeline] = []
    report = audit([looping_claude_code(tmp_path / "clean.jsonl")], Config(), timelines=timelines)
    assert "skipped" not in render_table(report)
    assert "skipped" not in render_html(report, timelines)


def test_human_bytes() -> None:
    assert [human_bytes(n) for n in (0, 1023, 1024, 5 * 1024**2, 3 * 1024**3, 5000 * 1024**3)] == [
        "0 B",
        "1023 B",
        "1.0 KB",
        "5.0 MB",
        "3.0 GB",
        "5000.0 GB",
    ]


def test_html_is_self_contained_and_escapes_what_it_quotes(tmp_path: Path) -> None:
    report, timelines = _report(tmp_path)
    page = render_html(report, timelines)
    assert page.startswith("<!DOCTYPE html>")
    assert not re.search(r"https?://|<script|<link|src=|@import|url\(", page)
    assert "{&quot;pattern&quot;:&quot;&lt;x &amp; y&gt;&quot;}" in page
    assert "<x & y>" not in page
    assert page.count("<section class=session>") == 2
    assert page.index("loop.jsonl") < page.index("team.jsonl")  # the most wasteful first
    assert "↳ helper" in page
    assert "title='helper (subagent of main)'" in page
    assert page.count("<i class='m0 circle remind'>") == 7 + 1 + 1
    assert "remind: remind at call 3" in page
    assert "12 calls wasted" in page
    assert "broken.jsonl</b>: " in page
    assert "No call was repeated back to back" not in page


def test_html_of_quiet_long_and_empty_sessions(tmp_path: Path) -> None:
    quiet = ClaudeCodeSession("quiet")
    for n in range(TIMELINE_LIMIT + 5):
        quiet.call("Read", {"file_path": f"f{n}"})
    quiet.write(tmp_path / "quiet.jsonl")
    empty = ClaudeCodeSession("empty")
    empty.prompt("hello")
    empty.write(tmp_path / "empty.jsonl")
    (tmp_path / "notes.json").write_text("{}")
    timelines: list[Timeline] = []
    report = audit([tmp_path], Config(), timelines=timelines)
    page = render_html(report, timelines)
    assert "5 more calls not drawn" in page
    assert "No tool calls." in page
    assert "No call was repeated back to back, and no policy stepped in." in page
    assert f"<li><b>{tmp_path / 'notes.json'}</b>: " in page
    assert " · 2.2 h" in page  # 4005 calls and their results, a second apart


def test_many_signatures_get_distinct_colors(tmp_path: Path) -> None:
    s = ClaudeCodeSession("colors")
    for n in range(23):
        s.call("Read", {"file_path": f"f{n}"})
        s.call("Read", {"file_path": f"f{n}"})
    s.write(tmp_path / "colors.jsonl")
    timelines: list[Timeline] = []
    report = audit([tmp_path / "colors.jsonl"], Config(), timelines=timelines)
    page = render_html(report, timelines)
    colors = set(re.findall(r"background-color:([^']+)'", page))
    assert len(colors) == 23
    assert any("white" in c for c in colors)
    assert any("black" in c for c in colors)
    assert " · 2 min" in page


def test_labels_keep_their_path_when_sessions_share_no_directory(tmp_path: Path) -> None:
    timelines: list[Timeline] = []
    report = audit([looping_claude_code(tmp_path / "loop.jsonl")], Config(), timelines=timelines)
    (session,) = report.sessions
    elsewhere = msgspec.structs.replace(session, label="/elsewhere/other.jsonl")
    relative = msgspec.structs.replace(session, label="relative/other.jsonl")
    for sessions, expected in (
        ([session, elsewhere], str(tmp_path / "loop.jsonl")),
        ([session, relative], str(tmp_path / "loop.jsonl")),
    ):
        table = render_table(msgspec.structs.replace(report, sessions=sessions))
        assert expected in table
    report = AuditReport(
        policies=[],
        sessions=[],
        errors=[FileError(path="x", reason="y")],
        totals=audit([], Config()).totals,
        seconds=0.0,
    )
    assert "could not read 1 files:" in render_table(report)
    assert "<b>x</b>: y" in render_html(report, [])


# -- the page in a real browser ------------------------------------------------------------------


def _pixels(png: bytes) -> tuple[int, int, list[bytes]]:
    """Decode an 8-bit RGB or RGBA PNG with the standard library: width,
    height and the unfiltered rows."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, chunks, header = 8, [], b""
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind, data = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = data
        elif kind == b"IDAT":
            chunks.append(data)
        pos += 12 + length
    width, height, depth, color = struct.unpack(">IIBB", header[:10])
    assert depth == 8, f"unsupported PNG bit depth {depth}"
    assert color in (2, 6), f"unsupported PNG color type {color}"
    step = 3 if color == 2 else 4
    raw = zlib.decompress(b"".join(chunks))
    stride = width * step
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - step] if x >= step else 0
            b = previous[x]
            c = previous[x - step] if x >= step else 0
            if kind == 1:
                line[x] = (line[x] + a) & 255
            elif kind == 2:
                line[x] = (line[x] + b) & 255
            elif kind == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        previous = line
    return width, step, rows


@pytest.mark.slow
def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium); the report was not rendered")
    report, timelines = _report(tmp_path)
    page = tmp_path / "report.html"
    page.write_text(render_html(report, timelines), encoding="utf-8")
    shot = tmp_path / "shot.png"
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={shot}",
            "--window-size=1280,1400",
            page.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    width, step, rows = _pixels(shot.read_bytes())
    assert (width, len(rows)) == (1280, 1400)
    colors = {row[x : x + 3] for row in rows[::7] for x in range(0, width * step, step * 5)}
    assert len(colors) > 200, "the screenshot is nearly uniform: the page did not render"
    # The signature colors and the reminder markers made it onto the page.
    assert any(abs(c[0] - 0x2F) < 8 and abs(c[1] - 0x7D) < 8 and abs(c[2] - 0xE1) < 8 for c in colors)
    assert any(abs(c[0] - 0xE6) < 8 and abs(c[1] - 0x9B) < 8 and c[2] < 16 for c in colors)


def test_human_count() -> None:
    assert [human_count(n) for n in (0, 999, 1000, 12_345, 4_100_000)] == ["0", "999", "1.0k", "12.3k", "4.1M"]


def test_html_shows_estimated_tokens_and_each_policys_savings(tmp_path: Path) -> None:
    report, timelines = _report(tmp_path)
    page = render_html(report, timelines)
    assert "<div class=lbl>tokens wasted</div>" in page
    assert "estimated: (argument + output bytes) / 4; 400 B of 2.5 KB output" in page
    assert "12 calls wasted, ~213 tokens</span>" in page
    assert "would have saved 13 calls (~220 tokens)" in page  # remind's card
    assert "wasted: 12 calls, ~213 tokens, 396 B of output" in page
    assert "would have saved: remind 12 calls (~213 tokens)" in page
