"""``repeat-tool-guard import``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bus import read_log
from guard.cli import main
from guard.importers import FORMATS
from tests.guard.importers._transcripts import ClaudeCodeSession, codex_rollout, corpus_file, write_lines


def test_import_detects_the_format_and_writes_a_replayable_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "team.jsonl"
    code = main(["import", str(corpus_file("claude-code/ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl")), "-o", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert printed == (
        f"{out}: claude-code session ef958aa1-0e93-49f0-bb71-150f63befcd1: 250 events, 117 tool calls, 7 agents; "
        "skipped nothing\n"
    )
    reader = read_log(out)
    assert sum(1 for _ in reader) == 7 + 8 + 117 + 117 + 1  # started, prompts, calls, results, hook context
    assert reader.report.skipped == 0
    assert main(["replay", str(out)]) == 0


def test_import_of_an_evaluation_output_writes_one_log_per_instance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "oh.jsonl"
    assert main(["import", str(corpus_file("openhands/output.jsonl")), "--from", "openhands", "-o", str(out)]) == 0
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == [
        "oh.ponylang__ponyc-4588.jsonl",
        "oh.ponylang__ponyc-4593.jsonl",
        "oh.ponylang__ponyc-4595.jsonl",
    ]
    assert "32 tool calls" in capsys.readouterr().out


def test_import_says_where_and_why_it_skipped_a_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = codex_rollout(tmp_path / "rollout.jsonl", "function_call", {"not": "a type"}, "function_call")
    assert main(["import", str(src), "-o", str(tmp_path / "out.jsonl")]) == 0
    captured = capsys.readouterr()
    assert captured.out.endswith("; skipped bad-record 1\n")
    assert captured.err == f"  {src}:3: TypeError: unhashable type: 'dict'\n"


def test_import_names_the_first_twenty_problems(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = codex_rollout(tmp_path / "rollout.jsonl", "function_call", *({"bad": n} for n in range(25)))
    assert main(["import", str(src), "-o", str(tmp_path / "out.jsonl")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"  {src}:3: TypeError: unhashable type: 'dict'"
    assert len(err) == 21  # the first twenty, then where the import stopped, which the counts also say
    assert err[-1].endswith(": the rest of the session is not read")


def test_each_session_of_a_file_names_its_own_problems(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = {"id": 1, "source": "agent", "action": "run", "tool_call_metadata": {"model_response": {"choices": 5}}}
    lines = [{"instance_id": i, "history": [bad] if i in "ac" else []} for i in "abc"]
    src = write_lines(tmp_path / "output.jsonl", lines)
    assert main(["import", str(src), "-o", str(tmp_path / "o.jsonl")]) == 0
    captured = capsys.readouterr()
    assert [line.split("; ")[-1] for line in captured.out.splitlines()] == [
        "skipped bad-record 1",
        "skipped bad-record 1",  # the sessions of a file share one report, its counts so far
        "skipped bad-record 2",
    ]
    bad_event = "TypeError: 'int' object is not iterable"
    assert captured.err == f"  {src}:1#history[0]: {bad_event}\n  {src}:3#history[0]: {bad_event}\n"


def test_import_of_an_unknown_format_lists_what_was_tried(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write_lines(tmp_path / "x.jsonl", [{"a": 1}])
    assert main(["import", str(src), "-o", str(tmp_path / "out.jsonl")]) == 2
    err = capsys.readouterr().err
    head, *tried = err.splitlines()
    assert head == f"repeat-tool-guard: {str(src)!r} is not a transcript format this tool knows; tried:"
    assert [line.split(":")[0] for line in tried] == [f"  {name}" for name in FORMATS]
    assert "  mini-swe-agent: not a document with trajectory_format" in err
    assert not (tmp_path / "out.jsonl").exists()


def test_import_never_overwrites(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s = ClaudeCodeSession("s")
    s.prompt("hi")
    src = s.write(tmp_path / "s.jsonl")
    out = tmp_path / "out.jsonl"
    out.write_text("precious\n")
    assert main(["import", str(src), "-o", str(out)]) == 2
    assert "already exists; choose another -o" in capsys.readouterr().err
    assert out.read_text() == "precious\n"


def test_a_multi_session_import_that_meets_an_existing_log_leaves_no_partial_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = write_lines(tmp_path / "output.jsonl", [{"instance_id": i, "history": []} for i in "abc"])
    (tmp_path / "o.c.jsonl").write_text("precious\n")
    assert main(["import", str(src), "-o", str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "o.c.jsonl' already exists; choose another -o (the 2 logs written before it removed)" in err
    assert sorted(p.name for p in tmp_path.glob("o.*")) == ["o.c.jsonl"]
    assert (tmp_path / "o.c.jsonl").read_text() == "precious\n"
    assert main(["import", str(src), "-o", str(tmp_path / "p.jsonl")]) == 0
    assert sorted(p.name for p in tmp_path.glob("p.*")) == ["p.a.jsonl", "p.b.jsonl", "p.c.jsonl"]


def test_an_empty_output_name_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s = ClaudeCodeSession("s")
    s.prompt("hi")
    src = s.write(tmp_path / "s.jsonl")
    assert main(["import", str(src), "-o", ""]) == 2
    assert capsys.readouterr().err == "repeat-tool-guard: -o '': an empty value names nothing\n"


def test_multi_session_names_are_made_safe_for_files_and_stay_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = ["a/b c", "a b\nc", "d", "d", "x" * 300, "..", "e"]
    src = write_lines(tmp_path / "output.jsonl", [{"instance_id": i, "history": []} for i in ids])
    assert main(["import", str(src), "-o", str(tmp_path / "o")]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == len(ids)  # one line each: an id's newline is not the terminal's
    logs = sorted(tmp_path.glob("o.*.jsonl"))
    assert len(logs) == len(ids)  # every session kept: none overwrote or stopped another
    assert sorted(json.loads(p.read_text().splitlines()[0])["session"] for p in logs) == sorted(ids)
    assert (tmp_path / "o.d.jsonl").exists()
    assert (tmp_path / "o.d-2.jsonl").exists()
    assert (tmp_path / "o.e.jsonl").exists()  # a plain id is its own name
    assert all(len(p.name) < 128 for p in logs)
    assert len(list(tmp_path.glob("o.a_b_c-*.jsonl"))) == 2
