"""Codex CLI rollouts, real and synthetic."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from bus import ToolCall, ToolResult, UserMessage
from guard.importers import UnknownFormatError, detect_format, open_sessions
from tests.guard.importers._transcripts import (
    calls,
    compactions,
    corpus_file,
    iso,
    longest_run,
    of,
    only,
    write_lines,
)

POMODORO = "codex/codex-pomodor-timer.jsonl"


def test_rollout_calls_tools_and_prompts() -> None:
    (session,) = open_sessions(corpus_file(POMODORO))
    assert session.session == "019a085e-04c1-7f81-a09e-9555f6a1fb40"
    evts = list(session.events())
    assert Counter(c.tool for c in calls(evts)) == {"apply_patch": 11, "update_plan": 4, "shell": 3}
    assert longest_run(evts) == 1
    assert [m.text for m in of(evts, UserMessage)][1:] == [
        "add smooth transitions between states",
        "add a Pause/Resume feature",
    ]
    assert len(of(evts, UserMessage)) == 3  # each prompt once, the environment context not at all


def test_first_shell_call_and_its_output_exactly() -> None:
    evts = only(corpus_file(POMODORO))
    first = calls(evts)[0]
    assert first == ToolCall(
        agent=first.agent,
        ts=iso("2025-10-21T20:04:27.012Z"),
        call_id="call_Xadcaju55OrZk0cmKRlq1xCw",
        step=1,
        tool="shell",
        args={"command": ["zsh", "-lc", "ls"], "workdir": "/Users/yoavfarhi/dev/pomodoro/codex"},
    )
    result = of(evts, ToolResult)[0]
    assert (result.call_id, result.content, result.is_error, result.step) == (first.call_id, "", False, 1)
    patch = next(c for c in calls(evts) if c.tool == "apply_patch")
    assert isinstance(patch.args, str)
    assert patch.args.startswith("*** Begin Patch\n*** Add File: index.html")
    assert [c.step for c in calls(evts)][:4] == [1, 2, 3, 4]


def _item(payload: dict[str, Any], second: int = 0) -> dict[str, Any]:
    return {"timestamp": f"2025-01-01T00:00:{second:02d}Z", "type": "response_item", "payload": payload}


def test_synthetic_rollout(tmp_path: Path) -> None:
    lines = [
        {"timestamp": "2025-01-01T00:00:00Z", "type": "session_meta", "payload": {"id": "r1"}},
        _item(
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>"}]}
        ),
        {
            "timestamp": "2025-01-01T00:00:01Z",
            "type": "event_msg",
            "payload": {"type": "user_message", "message": "go"},
        },
        _item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}, 1),
        _item({"type": "reasoning", "summary": []}, 2),
        _item({"type": "function_call", "name": "shell", "arguments": '{"command": ["ls"]}', "call_id": "a"}, 2),
        _item({"type": "function_call", "name": "shell", "arguments": "{not json", "call_id": "b"}, 2),
        _item(
            {"type": "function_call_output", "call_id": "a", "output": '{"output": "x", "metadata": {"exit_code": 2}}'},
            3,
        ),
        _item({"type": "function_call_output", "call_id": "b", "output": "exec command rejected by user"}, 3),
        _item({"type": "local_shell_call", "call_id": "c", "action": {"type": "exec", "command": ["pwd"]}}, 4),
        _item({"type": "function_call_output", "call_id": "c", "output": {"content": "no", "success": False}}, 5),
        _item({"type": "custom_tool_call", "call_id": "d", "name": "apply_patch", "input": "*** Begin"}, 6),
        _item({"type": "custom_tool_call_output", "call_id": "d", "output": "{broken json"}, 7),
        _item({"type": "function_call", "name": "view", "arguments": "{}", "call_id": "e"}, 8),
        _item({"type": "function_call_output", "call_id": "e", "output": '{"other": 1}'}, 8),
        _item({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]}, 9),
        {
            "timestamp": "2025-01-01T00:00:10Z",
            "type": "event_msg",
            "payload": {"type": "user_message", "message": "go"},
        },
        {"type": "turn_context", "payload": {}},
        {"type": "response_item", "payload": "not an object"},
    ]
    path = write_lines(tmp_path / "rollout.jsonl", lines)
    (session,) = open_sessions(path)
    assert session.session == "r1"
    evts = list(session.events())
    assert [m.text for m in of(evts, UserMessage)] == ["go", "go"]
    by_id = {c.call_id: c for c in calls(evts)}
    assert [by_id[k].step for k in "abcde"] == [1, 1, 2, 3, 4]
    assert by_id["b"].args == "{not json"
    assert by_id["c"].tool == "local_shell"
    results = {r.call_id: r for r in of(evts, ToolResult)}
    assert (results["a"].content, results["a"].is_error) == ("x", True)
    assert (results["b"].is_error, results["b"].denied_by) == (True, "user")
    assert (results["c"].content, results["c"].is_error) == ("no", True)
    assert (results["d"].content, results["d"].is_error) == ("{broken json", False)
    assert results["e"].content == '{"other": 1}'


def test_rollout_without_session_meta_is_named_after_its_file(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "rollout-x.jsonl", [_item({"type": "reasoning"})])
    (session,) = open_sessions(path)
    assert session.session == "rollout-x"


def test_exit_codes_in_the_output_header_of_newer_shell_tools(tmp_path: Path) -> None:
    # shell/shell_command outputs open with "Exit code: N"; exec_command's
    # (unified exec) with a chunk header holding "Process exited with code N",
    # or "Process running with session ID" while the command still runs.
    outputs = {
        "shell-ok": "Exit code: 0\nWall time: 0.2 seconds\nOutput:\nok\n",
        "shell-fail": "Exit code: 1\nWall time: 0.1 seconds\nTotal output lines: 1\nOutput:\nE   assert 1 == 2\n",
        "exec-fail": "Chunk ID: 5f2a\nWall time: 1.0 seconds\nProcess exited with code 2\n"
        "Original token count: 9\nOutput:\nmake: *** [all] Error 2\n",
        "exec-running": "Chunk ID: 77aa\nWall time: 10.0 seconds\nProcess running with session ID 3\n"
        "Original token count: 4\nOutput:\nserving on :8000\n",
        "prose": "Notes\n" * 8 + "Exit code: 1\nOutput:\nnot a header",
    }
    lines: list[dict[str, object]] = []
    for second, (call_id, output) in enumerate(outputs.items()):
        arguments = json.dumps({"cmd": call_id})
        lines.append(
            _item({"type": "function_call", "name": "exec_command", "arguments": arguments, "call_id": call_id}, second)
        )
        lines.append(_item({"type": "function_call_output", "call_id": call_id, "output": output}, second))
    evts = only(write_lines(tmp_path / "rollout.jsonl", lines))
    results = {r.call_id: r for r in of(evts, ToolResult)}
    assert {k: r.is_error for k, r in results.items()} == {
        "shell-ok": False,
        "shell-fail": True,
        "exec-fail": True,
        "exec-running": False,
        "prose": False,
    }
    assert results["exec-fail"].content == outputs["exec-fail"]


def _script(state: str, *output: str) -> list[dict[str, str]]:
    """A code-mode ``exec`` output as Codex 0.144 writes it: content items,
    the first its header naming the script's state."""
    header = f"{state}\nWall time 0.1 seconds\nOutput:\n"
    return [{"type": "input_text", "text": text} for text in (header, *output)]


def test_a_code_mode_script_that_failed_is_an_error(tmp_path: Path) -> None:
    """Code mode runs the model's JavaScript in ``exec`` (a custom tool) and
    ``wait``; a script that threw (an ``apply_patch`` that did not verify
    included) is headed ``Script failed``, which Codex reports as no success,
    and only that state line says so."""
    patch_error = "Script error:\napply_patch verification failed: Failed to find expected lines in src/engine.rs"
    outputs: dict[str, Any] = {
        "failed": _script("Script failed", patch_error),
        "completed": _script("Script completed", "Script failed\nis what the script printed"),
        "running": "Script running with cell ID 7\nWall time 10.0 seconds\nOutput:\n",
        "terminated": _script("Script terminated"),
    }
    lines: list[dict[str, object]] = []
    for second, (call_id, output) in enumerate(outputs.items()):
        script = "const r = await tools.exec_command({cmd: 'cargo test'}); text(r.output);"
        lines.append(_item({"type": "custom_tool_call", "name": "exec", "input": script, "call_id": call_id}, second))
        lines.append(_item({"type": "custom_tool_call_output", "call_id": call_id, "output": output}, second))
    waited = {"type": "function_call", "name": "wait", "arguments": '{"cell_id": "7"}', "call_id": "waited"}
    lines.append(_item(waited, 9))
    lines.append(_item({"type": "function_call_output", "call_id": "waited", "output": _script("Script failed")}, 9))
    results = {r.call_id: r for r in of(only(write_lines(tmp_path / "rollout.jsonl", lines)), ToolResult)}
    assert {k: r.is_error for k, r in results.items()} == {
        "failed": True,
        "completed": False,
        "running": False,
        "terminated": False,
        "waited": True,
    }
    assert results["failed"].content == "Script failed\nWall time 0.1 seconds\nOutput:\n\n" + patch_error


def test_local_shell_calls_without_a_call_id_are_each_a_call(tmp_path: Path) -> None:
    # Through the chat completions API a local_shell_call has call_id null
    # (its id is not written to the rollout).
    def shell(command: str, second: int) -> dict[str, object]:
        action = {"type": "exec", "command": ["bash", "-lc", command]}
        return _item({"type": "local_shell_call", "call_id": None, "status": "completed", "action": action}, second)

    session = next(open_sessions(write_lines(tmp_path / "rollout.jsonl", [shell("ls", 1), shell("pwd", 1)])))
    evts = list(session.events())
    assert [(c.call_id, c.args["command"][-1]) for c in calls(evts)] == [("unnamed-1", "ls"), ("unnamed-2", "pwd")]
    assert not session.report.skipped


def test_bare_layout_rollout_before_the_payload_envelope(tmp_path: Path) -> None:
    # Rollouts written before September 2025: a header line without a type,
    # response items without the {timestamp, type, payload} envelope, and
    # state markers; no per-line times.
    shell = {"type": "function_call", "name": "shell", "arguments": '{"command": ["bash", "-lc", "ls"]}'}
    lines = [
        {"id": "0198f1c2-aaaa", "timestamp": "2025-08-20T10:00:00.000Z", "instructions": None, "git": {}},
        {"record_type": "state"},
        {
            "type": "message",
            "id": None,
            "role": "user",
            "content": [{"type": "input_text", "text": "<environment_context>"}],
        },
        {"type": "message", "id": None, "role": "user", "content": [{"type": "input_text", "text": "list files"}]},
        {"record_type": "state"},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "x"},
        shell | {"call_id": "call_1"},
        {"type": "function_call_output", "call_id": "call_1", "output": {"content": "a.py", "success": True}},
        shell | {"call_id": "call_2"},
        {"type": "function_call_output", "call_id": "call_2", "output": {"content": "boom", "success": False}},
    ]
    path = write_lines(tmp_path / "rollout-2025-08-20T10-00-00-0198f1c2.jsonl", lines)
    assert detect_format(path) == "codex"
    (session,) = open_sessions(path)
    assert session.session == "0198f1c2-aaaa"
    evts = list(session.events())
    assert [m.text for m in of(evts, UserMessage)] == ["list files"]
    assert [(c.call_id, c.step, c.ts) for c in calls(evts)] == [
        ("call_1", 1, iso("2025-08-20T10:00:00Z")),
        ("call_2", 2, iso("2025-08-20T10:00:00Z")),
    ]
    assert [(r.content, r.is_error) for r in of(evts, ToolResult)] == [("a.py", False), ("boom", True)]
    assert not session.report.skipped


def test_mcp_results_of_older_versions_are_their_text_and_their_failures_fail(tmp_path: Path) -> None:
    lines = [
        {"id": "0199-mcp", "timestamp": "2025-09-10T18:58:38.331Z", "instructions": "", "git": {}},
        {"record_type": "state"},
        {"type": "function_call", "name": "memory__add_observations", "arguments": "{}", "call_id": "a"},
        {"type": "function_call_output", "call_id": "a", "output": "tool call error: tool call failed for `m/add`"},
        {"type": "function_call", "name": "tasks__add_task", "arguments": "{}", "call_id": "b"},
        {"type": "function_call_output", "call_id": "b", "output": '[{"text":"Added task 7","type":"text"}]'},
        {"type": "function_call", "name": "tasks__list", "arguments": "{}", "call_id": "c"},
        {"type": "function_call_output", "call_id": "c", "output": '[1, "not content items"]'},
    ]
    (session,) = open_sessions(write_lines(tmp_path / "rollout-2025-09-10T18-58-38-0199.jsonl", lines))
    assert [(r.content, r.is_error) for r in of(list(session.events()), ToolResult)] == [
        ("tool call error: tool call failed for `m/add`", True),
        ("Added task 7", False),
        ('[1, "not content items"]', False),
    ]


@pytest.mark.parametrize(
    ("output", "failed"),
    [
        ("failed in sandbox: ", True),
        ("failed in sandbox:  MISSING DEPENDENCY  Cannot find dependency 'jsdom'", True),
        ("Total output lines: 282\n\nfailed in sandbox: stderr | src/App.test.tsx > renders", True),
        ('execution error: Io(Os { code: 2, kind: NotFound, message: "No such file or directory" })', True),
        ("the test failed in sandbox: a.py", False),  # only a line that opens with it says so
    ],
)
def test_a_command_the_sandbox_stopped_is_a_failure(tmp_path: Path, output: str, failed: bool) -> None:
    """Codex 0.45 writes a command its sandbox stopped as plain text, with
    no exit code."""
    lines = [
        {"id": "0199-sbx", "timestamp": "2025-10-10T10:00:00.000Z", "instructions": "", "git": {}},
        {"record_type": "state"},
        {
            "type": "function_call",
            "name": "shell",
            "arguments": '{"command": ["bash", "-lc", "pnpm test"]}',
            "call_id": "a",
        },
        {"type": "function_call_output", "call_id": "a", "output": output},
    ]
    (session,) = open_sessions(write_lines(tmp_path / "rollout-2025-10-10T10-00-00-0199.jsonl", lines))
    assert [(r.content, r.is_error) for r in of(list(session.events()), ToolResult)] == [(output, failed)]


def test_a_patch_that_does_not_apply_is_a_failure(tmp_path: Path) -> None:
    """Codex answers a freeform ``apply_patch`` whose hunks it cannot find
    with plain text and no success flag."""
    patch = "*** Begin Patch\n*** Update File: /repo/a.ts\n@@\n-old\n+new\n*** End Patch"
    failed = "apply_patch verification failed: Failed to find expected lines in /repo/a.ts:\nold"
    lines = [
        {"timestamp": "2026-04-21T17:00:00Z", "type": "session_meta", "payload": {"id": "019db04b"}},
        *(
            {"timestamp": "2026-04-21T17:00:01Z", "type": "response_item", "payload": payload}
            for payload in (
                {"type": "custom_tool_call", "call_id": "p1", "name": "apply_patch", "input": patch},
                {"type": "custom_tool_call_output", "call_id": "p1", "output": failed},
                {"type": "custom_tool_call", "call_id": "p2", "name": "apply_patch", "input": patch},
                {"type": "custom_tool_call_output", "call_id": "p2", "output": "Success. Updated: M /repo/a.ts"},
            )
        ),
    ]
    (session,) = open_sessions(write_lines(tmp_path / "rollout-2026-04-21T17-00-00-019db04b.jsonl", lines))
    assert [r.is_error for r in of(list(session.events()), ToolResult)] == [True, False]


def test_a_header_line_alone_is_not_a_rollout(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "x.jsonl", [{"id": "1", "timestamp": "2025-08-20T10:00:00Z"}, {"note": 1}])
    with pytest.raises(UnknownFormatError):
        detect_format(path)
    lonely = write_lines(tmp_path / "y.jsonl", [{"id": "1", "timestamp": "2025-08-20T10:00:00Z"}])
    with pytest.raises(UnknownFormatError):
        detect_format(lonely)


def test_a_prompt_recorded_as_item_then_event_is_one_message(tmp_path: Path) -> None:
    """Some versions write the response item first and the event second."""
    lines = [
        {"timestamp": "2025-01-01T00:00:00Z", "type": "session_meta", "payload": {"id": "r2"}},
        _item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix it"}]}, 1),
        {
            "timestamp": "2025-01-01T00:00:01Z",
            "type": "event_msg",
            "payload": {"type": "user_message", "message": "fix it"},
        },
        {"timestamp": "2025-01-01T00:00:02Z", "type": "event_msg", "payload": {"type": "token_count", "info": None}},
        {"timestamp": "2025-01-01T00:00:03Z", "type": "event_msg", "payload": {"type": "user_message", "message": " "}},
    ]
    evts = only(write_lines(tmp_path / "rollout.jsonl", lines))
    assert [m.text for m in of(evts, UserMessage)] == ["fix it"]


def test_a_compaction_is_imported_as_the_live_hooks_publish_it(tmp_path: Path) -> None:
    def read(n: int) -> list[dict[str, Any]]:
        args = json.dumps({"command": ["cat", "a.py"]})
        return [
            _item({"type": "function_call", "name": "shell", "arguments": args, "call_id": f"c{n}"}, n),
            _item({"type": "function_call_output", "call_id": f"c{n}", "output": "x = 1"}, n),
        ]

    compacted = {"timestamp": "2025-01-01T00:00:05Z", "type": "compacted", "payload": {"message": "summary"}}
    lines = [{"type": "session_meta", "payload": {"id": "r1"}}, *read(1), *read(2), compacted, *read(6)]
    assert compactions(only(write_lines(tmp_path / "rollout.jsonl", lines))) == ["shell", "shell", "compacted", "shell"]
    bare = {"timestamp": "2025-01-01T00:00:05Z", "type": "compacted"}  # no payload: still a compaction
    lines = [{"type": "session_meta", "payload": {"id": "r1"}}, *read(1), bare, *read(6)]
    assert compactions(only(write_lines(tmp_path / "bare.jsonl", lines))) == ["shell", "compacted", "shell"]
    lines = [
        {"type": "session_meta", "payload": {"id": "r1"}},
        {"type": "response_item", "payload": [1]},
        {"type": "a_later_kind"},  # a line type this importer does not know: no payload expected of it
        *read(1),
    ]
    (session,) = open_sessions(write_lines(tmp_path / "odd.jsonl", lines))
    assert len(list(session.events())) == 3
    assert session.report.skipped == {"no-payload": 1}


def _shell(call_id: Any, second: int, output: str = "same") -> list[dict[str, Any]]:
    """A shell call and its output, both at ``second``."""
    call = {"type": "function_call", "name": "shell", "arguments": '{"command": ["ls"]}', "call_id": call_id}
    return [_item(call, second), _item({"type": "function_call_output", "call_id": call_id, "output": output}, second)]


def test_a_call_id_reused_after_its_call_was_answered_is_a_new_call(tmp_path: Path) -> None:
    """A model server that names every call ``call_0``: each call answered
    before the next is its own call, so a loop of them is seen."""
    lines = [{"type": "session_meta", "payload": {"id": "r1"}}, *_shell("call_0", 1), *_shell("call_0", 2)]
    lines += _shell("call_0", 3, "changed")
    (session,) = open_sessions(write_lines(tmp_path / "rollout.jsonl", lines))
    evts = list(session.events())
    assert [(c.call_id, c.step) for c in calls(evts)] == [("call_0", 1), ("call_0@2", 2), ("call_0@3", 3)]
    assert [(r.call_id, r.step, r.content) for r in of(evts, ToolResult)] == [
        ("call_0", 1, "same"),
        ("call_0@2", 2, "same"),
        ("call_0@3", 3, "changed"),
    ]
    assert longest_run(evts) == 3
    assert not session.report.skipped


def test_a_copied_line_is_a_duplicate_not_a_new_call(tmp_path: Path) -> None:
    """A line written again, its time with it, is a copy: counted, not one
    more call that would make a loop of one call."""
    call, output = _shell("call_0", 1)
    lines = [{"type": "session_meta", "payload": {"id": "r1"}}, call, output, call, output]
    (session,) = open_sessions(write_lines(tmp_path / "rollout.jsonl", lines))
    evts = list(session.events())
    assert [c.call_id for c in calls(evts)] == ["call_0"]
    assert [r.call_id for r in of(evts, ToolResult)] == ["call_0"]
    assert session.report.skipped == {"duplicate-call": 1, "orphan-result": 1}


@pytest.mark.parametrize("call_id", [0, ""])
def test_a_call_id_of_zero_or_empty_pairs_with_its_output(tmp_path: Path, call_id: object) -> None:
    lines = [{"type": "session_meta", "payload": {"id": "r1"}}, *_shell(call_id, 1)]
    (session,) = open_sessions(write_lines(tmp_path / "rollout.jsonl", lines))
    evts = list(session.events())
    assert [c.call_id for c in calls(evts)] == [str(call_id)]
    assert [r.call_id for r in of(evts, ToolResult)] == [str(call_id)]
    assert not session.report.skipped


def test_tool_searches_are_calls_and_a_named_skill_is_no_prompt(tmp_path: Path) -> None:
    """Codex 0.140 runs the model's search for tools itself (``tool_search_call``,
    answered by ``tool_search_output`` listing the tools found), and puts a
    skill the user named (``<skill>`` and its SKILL.md) in the user's role:
    a search made again is a call like any other, and the skill's text is
    no message of the user's, which would make every repeat look asked for."""
    found = [{"type": "namespace", "name": "mcp__codex_apps__github", "tools": [{"name": "list_issues"}]}]
    search = {"query": "GitHub issues list", "limit": 8}
    lines = [
        {"timestamp": "2026-06-18T02:33:46Z", "type": "session_meta", "payload": {"id": "r2"}},
        {
            "timestamp": "2026-06-18T02:33:47Z",
            "type": "event_msg",
            "payload": {"type": "user_message", "message": "go"},
        },
        _item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<skill>\n<name>x"}]}),
    ]
    for n in range(2):
        lines.append(
            _item({"type": "tool_search_call", "call_id": f"s{n}", "execution": "client", "arguments": search})
        )
        lines.append(_item({"type": "tool_search_output", "call_id": f"s{n}", "execution": "client", "tools": found}))
    (session,) = open_sessions(write_lines(tmp_path / "rollout.jsonl", lines))
    evts = list(session.events())
    assert [m.text for m in of(evts, UserMessage)] == ["go"]
    assert [(c.call_id, c.tool, c.args, c.step) for c in calls(evts)] == [
        ("s0", "tool_search", search, 1),
        ("s1", "tool_search", search, 2),
    ]
    assert [json.loads(r.content) for r in of(evts, ToolResult)] == [found, found]


def test_a_tool_of_a_namespace_is_named_as_the_hooks_name_it(tmp_path: Path) -> None:
    """Codex 0.124 and later write an app's MCP tool and a multi-agent tool
    as a name within a namespace (as real rollouts hold them); its hooks
    name the tool with the namespace before it, and so does the import."""
    lines = [
        {"timestamp": "2026-04-24T00:19:26Z", "type": "session_meta", "payload": {"id": "r3"}},
        _item(
            {
                "type": "function_call",
                "name": "_fetch_pr",
                "namespace": "mcp__codex_apps__github",
                "arguments": '{"pr_number": 13}',
                "call_id": "c1",
            }
        ),
        _item({"type": "function_call_output", "call_id": "c1", "output": "PR 13"}),
        _item(
            {
                "type": "function_call",
                "name": "wait_agent",
                "namespace": "multi_agent_v1",
                "arguments": '{"targets": ["a1"], "timeout_ms": 10000}',
                "call_id": "c2",
            }
        ),
        _item({"type": "function_call_output", "call_id": "c2", "output": '{"timed_out": true}'}),
        _item({"type": "function_call", "name": "exec_command", "arguments": '{"cmd": "ls"}', "call_id": "c3"}),
        _item({"type": "function_call", "name": "odd", "namespace": 7, "arguments": "{}", "call_id": "c4"}),
    ]
    (session,) = open_sessions(write_lines(tmp_path / "rollout.jsonl", lines))
    assert [c.tool for c in calls(list(session.events()))] == [
        "mcp__codex_apps__github_fetch_pr",
        "multi_agent_v1wait_agent",
        "exec_command",
        "odd",  # a namespace that is no name: the tool's own name
    ]
