"""Result normalisation and error kinds, on synthetic and real tool outputs."""

from __future__ import annotations

import pytest

from bus import ToolResult, read_log
from guard.importers import open_sessions, write_log
from guard.normalize import DEFAULT_RESULT_NORMALIZE, ResultNormalizer, error_kind
from tests.guard.importers._transcripts import corpus_file

normalize = ResultNormalizer().normalize


def test_a_clock_reads_the_same_every_time() -> None:
    outputs = {normalize(f"Tue Dec  1 00:{m:02d}:{s:02d} UTC 2026") for m in range(3) for s in range(0, 60, 7)}
    assert len(outputs) == 1
    assert normalize("Sat Jan 31 23:59:59 PST 2027") == normalize("Tue Dec  1 00:11:10 UTC 2026")


@pytest.mark.parametrize(
    ("text", "reading"),
    [
        ("Tue Dec  1 00:11:10 UTC 2026\n", True),  # date
        ("15:30:20", True),  # date '+%H:%M:%S'
        ("1764547870", True),  # date +%s
        ("2026-12-01 00:11:10.000000000 +0000", True),  # stat -c %y
        ("1234567", False),  # a long count: no clock
        ("9f86d081884c7d659a2feaa0c55ad015", False),  # an id
        ("5f0c7b2e-3c2a-4f8e-9a51-2b1f0e6c1d2a", False),
        ("12 passed in 0.31s", False),
        ("build 4 queued\nTue Dec  1 00:11:10 UTC 2026", False),  # two lines: the clock is beside the news
        ("", False),
        ("Tue Dec  1 00:11:10 UTC 2026 " * 4, False),  # longer than a reading
    ],
)
def test_one_short_line_of_nothing_but_noise_is_a_reading(text: str, reading: bool) -> None:
    assert ResultNormalizer().is_reading(text) is reading


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("12 passed in 0.31s", "12 passed in 1.07s"),
        ("2026-11-30T23:59:01.120Z started", "2026-12-01T00:00:02Z started"),
        (
            "Process running with session ID 41932\nWall time: 10.0 seconds",
            "Process running with session ID 7\nWall time: 95.5 seconds",
        ),
        ("commit 5d6e7f8a9b done", "commit 1a2b3c4d5e done"),
        ("id 3f2b9c1e-1d2c-4b5a-9e8f-0a1b2c3d4e5f", "id 00000000-1111-2222-3333-444444444444"),
        ("\x1b[32mok\x1b[0m   \n", "ok"),
        ("downloading ⠋ 10%\rdownloading ⠙ 50%\rdone", "done"),
        ("[#####     ] building", "[########  ] building"),
        ("started pid 3318", "started pid 77"),
        ("a\n\n\n\n\nb", "a\n\nb"),
        ("web-7d9f5   0/1   Pending   0   2m5s", "web-7d9f5   0/1   Pending   0   9m59s"),  # kubectl's AGE
        ("Runtime: 1m20s", "Runtime: 1h2m3.5s"),
    ],
)
def test_noise_is_stripped(a: str, b: str) -> None:
    assert normalize(a) == normalize(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("3 failed, 9 passed", "2 failed, 10 passed"),
        ("port: 8000", "port: 8080"),
        ("line 1\nline 2", "line 1"),
        ("pod web-7d9f5 ready", "pod web-8c4a1 ready"),
    ],
)
def test_meaning_is_kept(a: str, b: str) -> None:
    assert normalize(a) != normalize(b)


def test_a_long_result_is_normalised_at_both_ends_and_compared_as_is_between() -> None:
    digest = ResultNormalizer().digest
    body = "x" * 20_000
    assert digest(f"took 1.2s\n{body}\ntook 3.4s") == digest(f"took 9.9s\n{body}\ntook 0.1s")
    assert digest(f"a{body}b") != digest(f"a{body}c")
    assert digest(f"a{body[:-1]}zb") != digest(f"a{body}b")  # the middle differs: a change
    assert len(digest("short")) == 16


def test_extra_patterns_apply() -> None:
    custom = ResultNormalizer([r"build #\d+"])
    assert custom.normalize("build #41 ok") == custom.normalize("build #42 ok")


def test_pytest_runs_of_a_real_session_differ_only_in_their_timing() -> None:
    """Claude Code session: test runs reporting the same count in different
    times normalise alike; a different count does not."""
    (session,) = open_sessions(corpus_file("claude-code/a7da6a22-facc-4fcd-8bab-f83c87862004.jsonl"))
    summaries: dict[str, set[str]] = {}
    for text in _results(session):
        for line in text.splitlines():
            if " passed in " in line:
                summaries.setdefault(normalize(line), set()).add(line.strip())
    by_count = {next(iter(lines)).split()[0]: norm for norm, lines in summaries.items() if lines}
    same_count = [lines for lines in summaries.values() if len(lines) > 1]
    assert same_count, summaries
    assert len(set(by_count.values())) == len(by_count)


def test_a_real_directory_listing_loses_its_dates() -> None:
    sessions = open_sessions(corpus_file("openhands/output.jsonl"))
    listing = next(t for s in sessions for t in _results(s) if t.startswith("total ") and " root root " in t)
    assert "Apr 30 08:32" in listing
    assert "Apr 30" not in normalize(listing)
    assert "08:32" not in normalize(listing)


def _results(session: object) -> list[str]:
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "log.jsonl"
        write_log(session, path)  # type: ignore[arg-type]
        return [e.content for e in read_log(path) if isinstance(e, ToolResult)]


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (
            "ERROR:\nNo replacement was performed, old_str `x = 1` did not appear verbatim in /w/a.py.",
            "ERROR:\nNo replacement was performed, old_str `y(2)` did not appear verbatim in /w/b.py.",
        ),
        ("Error: tool 'search' not found (request 3)", "Error: tool 'grep_x' not found (request 9)"),
        ("/bin/sh: 1: cd: can't cd to /w/build\nmake: Error 2", "/bin/sh: 1: cd: can't cd to /x/y"),
        ('Traceback (most recent call last):\n  File "a.py", line 3', 'Traceback:\n  File "b.py", line 9'),
    ],
)
def test_one_kind_of_error_with_other_values(a: str, b: str) -> None:
    assert error_kind(a) == error_kind(b)
    assert error_kind(a)


def test_different_errors_are_different_kinds() -> None:
    assert error_kind("Request failed with status code 404") != error_kind("Permission denied")
    assert error_kind("") == error_kind("\n\n") == ""


def test_the_kind_is_the_line_that_reads_like_an_error() -> None:
    pytest_output = "Exit code 1\n===== test session starts =====\nplatform linux -- Python 3.12\nE   KeyError: 'x'"
    assert error_kind(pytest_output) == "e keyerror: #"
    assert error_kind("<returncode>1</returncode>\n<output>\nrm: cannot remove 'x': No such file") == (
        "rm: cannot remove #: no such file"
    )
    assert error_kind("Exit code 1\nsome output\nmore output") == "some output"


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ('{"error": "no route to u7"}', "no route to u#"),
        ('{"error": {"message": "Permission denied: /a/b", "code": 13}}', "permission denied: #"),
        ('{"output": "grep: src: No such file or directory", "exit_code": 2}', "grep: src: no such file or directory"),
        ('{"output": "", "exit_code": 1}', ""),  # a search that found nothing says nothing
        ('{"status": 1}', ""),
        ("{not json: at all}", "{not json: at all}"),
        ('{"error": "Bad Request", "message": "name must not be blank", "status": 400}', "name must not be blank"),
        ('{"errors": [{"message": "Cannot query field x"}]}', "cannot query field x"),
        ('{"detail": [{"msg": "value is not a valid integer", "loc": ["q"]}]}', "value is not a valid integer"),
        ('{"content": [{"type": "text", "text": "Not found: repo"}], "isError": true}', "not found: repo"),
        ('{"level": "error", "msg": "dial tcp: connection refused"}', "dial tcp: connection refused"),  # zap, pino
        ('{"msg": "Reconciler error", "error": "secret gone"}', "secret gone"),  # a record's error says more
        ('{"level": "ERROR", "msg": "request failed", "err": "dial tcp: refused"}', "dial tcp: refused"),  # slog
        ('{"level": 50, "msg": "failed", "err": {"type": "Error", "message": "ECONNREFUSED"}}', "econnrefused"),
        ('{"level": "error", "error": "disk full", "message": "request failed"}', "disk full"),  # zerolog
        ('{"code": 500, "msg": "internal error", "error": "duplicate key"}', "duplicate key"),
        ('{"error": "bad \ud800"}', "{#: #}"),  # a lone surrogate no JSON decoder takes: read as text
        ('{"a":' * 1100 + "1" + "}" * 1100, ("{#:" * 60)[:160]),  # nested past the decoder: read as text
    ],
)
def test_an_error_written_as_json_is_of_its_messages_kind(text: str, kind: str) -> None:
    assert error_kind(text) == kind


def test_a_logfmt_error_is_of_its_messages_kind() -> None:
    """golangci-lint, logrus and slog quote the message, which the quoted
    text stripped from every kind would leave as ``msg=#``: every such
    error one kind, whatever it says."""
    lint = 'Process exited with code 5\nOutput:\nlevel=error msg="Running error: context loading failed: no go files"'
    assert error_kind(lint) == "running error: context loading failed: no go files"
    typecheck = 'level=error msg="Running error: typecheck failed in package api"'
    assert error_kind(typecheck) != error_kind(lint)
    assert error_kind('time="2026-12-05T10:00:00Z" level=fatal msg="can\\"t open db"') == 'can"t open db'
    failed = 'level=error msg="request failed" error="{}"'  # logrus' WithError, slog: the message says little
    assert error_kind(failed.format("dial tcp: refused")) != error_kind(failed.format("pq: password failed"))
    assert error_kind("level=error msg=shutdown_failed") == "shutdown_failed"
    assert error_kind('level=info msg="starting"\nerror: port in use') == "error: port in use"
    assert error_kind("level=error code=E500 component=api") == "level=error code=e# component=api"  # no message
    migration = 'level=error message="migration failed" error="{}"'
    assert error_kind(migration.format("duplicate column")) != error_kind(migration.format("no such table"))


def test_the_kind_is_read_from_the_head_of_a_long_error() -> None:
    noise = "\n".join(f"line {n}" for n in range(500))
    assert error_kind(noise + "\nfatal: boom") == "line #"


@pytest.mark.parametrize(
    ("first", "again"),
    [
        (  # Codex CLI's shell output as the model reads it
            "Chunk ID: 6e403a\nWall time: 0.0000 seconds\nProcess exited with code 0\nOutput:\nsame\n",
            "Chunk ID: b1ea8e\nWall time: 0.0031 seconds\nProcess exited with code 0\nOutput:\nsame\n",
        ),
        (  # Gemini CLI's
            "<untrusted_context>\nOutput: same\nProcess Group PGID: 13654\n</untrusted_context>",
            "<untrusted_context>\nOutput: same\nProcess Group PGID: 3720\n</untrusted_context>",
        ),
        (  # Gemini CLI's large output, masked in its recording
            "<tool_output_masked>\nsame\n... [TRUNCATED] ...\nsame\n\nOutput too large. Full output available at:"
            " /h/.gemini/tmp/p/tool-outputs/session-1/run_shell_command_c1_k3j2q.txt\n</tool_output_masked>",
            "<tool_output_masked>\nsame\n... [TRUNCATED] ...\nsame\n\nOutput too large. Full output available at:"
            " /h/.gemini/tmp/p/tool-outputs/session-1/run_shell_command_c2_z9x8w.txt\n</tool_output_masked>",
        ),
        (  # Claude Code's hook payload of an output too large to show: a new file for it each time
            '{"stdout":"same","stderr":"","interrupted":false,"persistedOutputPath":'
            '"/h/.claude/projects/p/s/tool-results/bhb7lozwe.txt","persistedOutputSize":200000}',
            '{"stdout":"same","stderr":"","interrupted":false,"persistedOutputPath":'
            '"/h/.claude/projects/p/s/tool-results/b1mi4h822.txt","persistedOutputSize":200000}',
        ),
        (  # and its transcript's
            "<persisted-output>\nOutput too large (195.3KB). Full output saved to: /h/.claude/projects/p/s/"
            "tool-results/bhb7lozwe.txt\n\nPreview (first 2KB):\nsame\n</persisted-output>",
            "<persisted-output>\nOutput too large (195.3KB). Full output saved to: /h/.claude/projects/p/s/"
            "tool-results/b1mi4h822.txt\n\nPreview (first 2KB):\nsame\n</persisted-output>",
        ),
        (  # a run's time as a bare number under a key that names it
            '{"Output": "same\\n", "duration_seconds": 0.83}',
            '{"Output": "same\\n", "duration_seconds": 1.2}',
        ),
        ("Output: same\nelapsed_ms=12", "Output: same\nelapsed_ms=97"),
        ('{"took": 35, "Output": "same"}', '{"took": 4, "Output": "same"}'),
        ('{"duration_ms": 3, "Output": "same"}', '{"duration_ms": 9, "Output": "same"}'),
    ],
)
def test_an_agent_clis_decorations_of_one_output_normalise_alike(first: str, again: str) -> None:
    normalizer = ResultNormalizer()
    assert normalizer.digest(first) == normalizer.digest(again)
    assert normalizer.digest(first) != normalizer.digest(first.replace("same", "other"))
    assert normalizer.digest(first) != normalizer.digest(first.replace("Output", "Error"))


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("Processed 1 of 6 files", "Processed 2 of 6 files"),
        ("state: processing, processed 1/6", "state: processing, processed 2/6"),
        ("epoch 3 out of 10 done", "epoch 4 out of 10 done"),
        ("upload 45% done", "upload 46% done"),
        ('{"processed": 1, "total": 6}', '{"processed": 2, "total": 6}'),
    ],
)
def test_a_number_counted_toward_a_total_is_work_done(before: str, after: str) -> None:
    shape = ResultNormalizer().shape
    assert not shape(after).counts_on(shape(before))


@pytest.mark.parametrize(
    ("before", "after"),
    [('{"runtime_errors": 3}', '{"runtime_errors": 0}'), ('{"min_duration_days": 1}', '{"min_duration_days": 30}')],
)
def test_a_number_under_a_key_that_only_mentions_a_duration_is_not_noise(before: str, after: str) -> None:
    normalizer = ResultNormalizer()
    assert normalizer.digest(before) != normalizer.digest(after)


def test_a_counter_is_one_number_grown_by_one() -> None:
    shape = ResultNormalizer().shape
    assert shape("tick 6, retry in 9").counts_on(shape("tick 5, retry in 9"))
    assert not shape("tick 6, retry in 10").counts_on(shape("tick 5, retry in 9"))
    assert not shape("tick 5, retry in 9").counts_on(shape("tick 5, retry in 9"))
    assert not shape("tock 6").counts_on(shape("tick 5"))
    assert not shape("1 2").counts_on(shape("1"))
    long = "x" * 3000  # a long result is compared whole: no counter in it
    assert not shape(f"tick 2\n{long}").counts_on(shape(f"tick 1\n{long}"))
    big = "x" * 9000
    assert shape(f"took 1s\n{big}\nend").digest == shape(f"took 2s\n{big}\nend").digest
    assert not shape(f"tick 2\n{big}\nend").counts_on(shape(f"tick 1\n{big}\nend"))


def test_an_error_report_is_cut_after_what_failed() -> None:
    from guard.normalize import error_head

    noisy = "fatal: not a git repository\nhint: run git init\n"
    assert error_head(noisy) == "fatal: not a git repository\n"
    assert (
        error_head("Traceback (most recent call last):\n  File 'x'\n")
        == "Traceback (most recent call last):\n  File 'x'\n"
    )
    skipped = "---\n" * 250 + "error: late"
    assert error_head(skipped) == skipped
    assert error_head("all good\nerror: later") == "all good\nerror: later"


def test_normalisers_with_the_same_patterns_share_one_compiled_set() -> None:
    """A server holds a guard, so a normaliser, per session: the compiled
    patterns are held once."""
    first, second = ResultNormalizer(), ResultNormalizer(list(DEFAULT_RESULT_NORMALIZE))
    own = ResultNormalizer([r"build \d+"])
    assert first._patterns is second._patterns
    assert own._patterns is not first._patterns
    assert own.normalize("build 41 done") == own.normalize("build 42 done") != first.normalize("build 41 done")
