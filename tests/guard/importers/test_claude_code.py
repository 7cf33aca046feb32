"""Claude Code transcripts, real and synthetic."""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bus import AgentStatus, ContextMessage, ContextSource, ToolCall, ToolResult, UserMessage
from guard import Config
from guard.audit import audit
from guard.importers import UnknownFormatError, belongs_to_session, claude_code, detect_format, open_sessions
from guard.importers._source import first_object
from guard.importers.claude_code import subagent_files
from tests.claude_cli import FakeAnthropic, text, tool_use
from tests.guard.importers._transcripts import (
    ClaudeCodeSession,
    calls,
    compactions,
    corpus_file,
    iso,
    longest_run,
    of,
    only,
    write_lines,
)

TEAM = "claude-code/ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl"


def test_session_with_nested_subagents_counts_every_agents_calls() -> None:
    evts = only(corpus_file(TEAM))
    per_agent = {a: len(calls(evts, a)) for a in {c.agent.id for c in calls(evts)}}
    assert per_agent == {
        "main": 40,
        "a36efb2a1231c41e2": 7,
        "a4ca7529859c158c2": 24,
        "a52886dc180afb356": 17,
        "a6aa8ad077d9ea083": 6,
        "ab1e6e141221a29ab": 17,
        "aef063ba534d73153": 6,
    }
    assert longest_run(evts) == 1
    started = of(evts, AgentStatus)
    assert [(s.agent.id, s.parent) for s in started][:2] == [("main", None), ("a4ca7529859c158c2", "main")]
    assert {s.parent for s in started[1:]} == {"main"}
    assert sum(r.is_error for r in of(evts, ToolResult)) == 3


def test_first_call_of_the_team_session_is_imported_exactly() -> None:
    evts = only(corpus_file(TEAM))
    first = calls(evts)[0]
    assert first == ToolCall(
        agent=first.agent,
        ts=iso("2026-04-18T13:19:12.764Z"),
        call_id="toolu_014io8Xzj9KmduZGduKZGSDL",
        step=1,
        tool="ToolSearch",
        args={"query": "select:TaskCreate,SendMessage,TaskList,TaskGet", "max_results": 4},
    )
    assert first.agent.id == "main"
    result = next(e for e in evts if type(e) is ToolResult and e.call_id == first.call_id)
    assert (result.content, result.is_error, result.denied_by, result.step) == (
        "TaskCreate\nSendMessage\nTaskList\nTaskGet",
        False,
        None,
        1,
    )


def test_parallel_calls_of_one_response_share_a_step() -> None:
    evts = only(corpus_file(TEAM))
    creates = [c for c in calls(evts, "main") if c.tool == "TaskCreate"]
    assert len(creates) == 6
    assert {c.step for c in creates} == {3}


def test_hook_additional_context_becomes_a_plugin_context_message() -> None:
    (message,) = of(only(corpus_file(TEAM)), ContextMessage)
    assert message.agent.id == "main"
    assert message.call_id == ""
    assert message.text == "clmail 6.0.10 session registered: -experiments/worktrees (kitty)"
    assert message.source == ContextSource(
        plugin="claude-code-hook:SessionStart", form="hook_additional_context", summary="SessionStart"
    )


def test_only_genuine_prompts_become_user_messages() -> None:
    evts = only(corpus_file(TEAM))
    prompts = [(m.agent.id, m.text[:40]) for m in of(evts, UserMessage)]
    assert prompts[0] == ("main", "OK, we're going to make a little experim")
    assert len(prompts) == 8  # two typed by the user, one task prompt per subagent
    assert not any(t.startswith(("<command-name>", "<local-command", "Base directory")) for _, t in prompts)


def test_old_style_flat_subagent_file_and_user_rejection() -> None:
    evts = only(corpus_file("claude-code/a7da6a22-facc-4fcd-8bab-f83c87862004.jsonl"))
    assert len(calls(evts, "main")) == 108
    assert len(calls(evts, "c8d9b115")) == 15
    assert longest_run(evts) == 1
    main_errors = [r for r in of(evts, ToolResult) if r.is_error and r.agent.id == "main"]
    assert len(main_errors) == 4
    assert [r.denied_by for r in main_errors].count("user") == 1
    assert len(of(evts, UserMessage)) == 7  # slash commands, interruptions and caveats are not prompts


def test_pomodoro_session() -> None:
    evts = only(corpus_file("claude-code/claude-code-pomodoro-timer.jsonl"))
    assert len(calls(evts)) == 37
    assert longest_run(evts) == 1
    assert [m.text[:20] for m in of(evts, UserMessage)] == [
        "Build a simple Pomod",
        "add smooth transitio",
        "add a Pause/Resume f",
    ]


def test_corpus_subagent_files_belong_to_their_sessions() -> None:
    nested = corpus_file("claude-code/ef958aa1-0e93-49f0-bb71-150f63befcd1/subagents/agent-a36efb2a1231c41e2.jsonl")
    flat = corpus_file("claude-code/agent-c8d9b115.jsonl")
    assert belongs_to_session(nested)
    assert belongs_to_session(flat)
    assert not belongs_to_session(corpus_file(TEAM))


def test_synthetic_session_maps_every_kind_of_entry(tmp_path: Path) -> None:
    s = ClaudeCodeSession("s1")
    s.lines.append({"type": "permission-mode", "permissionMode": "default", "sessionId": "s1"})
    s.prompt("fix the tests")
    s.prompt("<command-name>/model</command-name>")
    s.prompt("caveat", isMeta=True)
    a, b = s.respond(("Read", {"file_path": "a.py"}), ("Read", {"file_path": "b.py"}), text="Reading both.")
    s.result(a, [{"type": "text", "text": "print(1)"}, {"type": "image", "source": {}}])
    s.result(b, "boom", is_error=True)
    s.attachment(
        type="hook_additional_context",
        content=["lint ok"],
        hookName="PostToolUse:Read",
        toolUseID=b,
        hookEvent="PostToolUse",
    )
    s.respond(text="Thinking out loud.")
    denied = s.call(
        "Bash", {"command": "rm -rf /"}, "The user doesn't want to proceed with this tool use.", is_error=True
    )
    permission = s.call(
        "Bash", {"command": "curl x"}, "Permission to use Bash with command curl x has been denied.", is_error=True
    )
    s.attachment(type="queued_command", prompt="also check the logs", commandMode="prompt", origin={"kind": "human"})
    s.attachment(type="queued_command", prompt="<task-notification/>", commandMode="task-notification")
    s.attachment(type="hook_success", content="")
    s.attachment(type="queued_command", prompt="   ")
    s.lines.append({"type": "attachment", "sessionId": "s1", "attachment": "junk"})
    s.lines.append({"type": "user", "sessionId": "s1", "message": {"role": "user", "content": None}})
    s.lines.append({"type": "assistant", "sessionId": "s1", "message": {"model": "<synthetic>", "content": []}})
    s.lines.append(
        {
            "type": "assistant",
            "sessionId": "s1",
            "isSidechain": True,
            "agentId": "old",
            "timestamp": "2026-01-01T01:00:00Z",
            "message": {"id": "m9", "content": [{"type": "tool_use", "id": "t9", "name": "Grep", "input": {}}]},
        }
    )
    s.lines.append(dict(s.lines[-1]))  # the same entry written twice
    s.result("never-called", "lost")
    path = s.write(tmp_path / "s1.jsonl", torn='{"type": "user", "mess')

    (session,) = open_sessions(path)
    evts = list(session.events())
    assert session.report.skipped == {"torn": 1, "duplicate-call": 1, "orphan-result": 1}
    assert [m.text for m in of(evts, UserMessage)] == ["fix the tests", "also check the logs"]
    by_id = {c.call_id: c for c in calls(evts)}
    assert (by_id[a].step, by_id[b].step, by_id[denied].step, by_id[permission].step) == (1, 1, 3, 4)
    results = {r.call_id: r for r in of(evts, ToolResult)}
    assert results[a].content == "print(1)\n[image]"
    assert (results[b].is_error, results[b].denied_by) == (True, None)
    assert results[denied].denied_by == "user"
    assert results[permission].denied_by == "permissions"
    (hook,) = of(evts, ContextMessage)
    assert (hook.call_id, hook.text, hook.source.plugin) == (b, "lint ok", "claude-code-hook:PostToolUse:Read")
    old = by_id["t9"]
    assert (old.agent.id, old.agent.parent_id, old.step) == ("old", "main", 1)


def test_subagent_file_on_its_own_is_its_own_root_agent(tmp_path: Path) -> None:
    sub = ClaudeCodeSession("s2", agent_id="abc")
    sub.prompt("You are a helper; list the files")
    sub.call("Bash", {"command": "ls"})
    path = sub.write(tmp_path / "agent-abc.jsonl")
    assert detect_format(path) == "claude-code"
    assert not belongs_to_session(path)
    evts = only(path)
    assert [(s.agent.id, s.parent) for s in of(evts, AgentStatus)] == [("abc", None)]
    assert of(evts, UserMessage)[0].text == "You are a helper; list the files"


def test_subagents_beside_and_under_the_session_are_merged_by_time(tmp_path: Path) -> None:
    main = ClaudeCodeSession("s3")
    main.prompt("research this")
    spawn = main.respond(("Task", {"prompt": "look"}))[0]
    main.skip_to(100)  # the subagent works in between
    main.result(spawn, "found it")
    main.write(tmp_path / "s3.jsonl")
    nested = ClaudeCodeSession("s3", agent_id="n1", start=5)
    nested.call("Grep", {"pattern": "x"})
    nested.write(tmp_path / "s3" / "subagents" / "agent-n1.jsonl")
    flat = ClaudeCodeSession("s3", agent_id="f1", start=10)
    flat.call("Read", {"file_path": "y"})
    flat.write(tmp_path / "agent-f1.jsonl")
    write_lines(tmp_path / "agent-other.jsonl", [{"type": "user", "sessionId": "elsewhere"}])
    (tmp_path / "agent-broken.jsonl").write_text("not json\n")

    evts = only(tmp_path / "s3.jsonl")
    assert [(c.agent.id, c.tool) for c in calls(evts)] == [("main", "Task"), ("n1", "Grep"), ("f1", "Read")]
    assert [e.agent.id for e in of(evts, ToolResult)] == ["n1", "f1", "main"]
    assert {s.agent.id: s.parent for s in of(evts, AgentStatus)} == {"main": None, "n1": "main", "f1": "main"}
    assert belongs_to_session(tmp_path / "s3" / "subagents" / "agent-n1.jsonl")
    assert belongs_to_session(tmp_path / "agent-f1.jsonl")
    assert not belongs_to_session(tmp_path / "agent-other.jsonl")
    assert not belongs_to_session(tmp_path / "agent-broken.jsonl")


def _session_with_subagents(folder: Path, *names: str) -> Path:
    """A session with one ``Grep`` of its own and a subagent file under it
    for each of ``names``, each reading a file named after it."""
    main = ClaudeCodeSession("s4")
    main.call("Grep", {"pattern": "x"})
    for n, name in enumerate(names):
        sub = ClaudeCodeSession("s4", agent_id=name, start=10 + n)
        sub.call("Read", {"file_path": name})
        sub.write(folder / "s4" / "subagents" / f"agent-{name}.jsonl")
    return main.write(folder / "s4.jsonl")


@pytest.mark.parametrize("kind", ["dangling link", "directory", "fifo", "deleted after listing"])
def test_an_unreadable_subagent_file_costs_only_itself(tmp_path: Path, kind: str) -> None:
    path = _session_with_subagents(tmp_path, "ok", "bad")
    bad = tmp_path / "s4" / "subagents" / "agent-bad.jsonl"
    if kind != "deleted after listing":
        bad.unlink()
        make: dict[str, Callable[[], None]] = {
            "dangling link": lambda: bad.symlink_to("gone.jsonl"),
            "directory": bad.mkdir,
            "fifo": lambda: os.mkfifo(bad),
        }
        make[kind]()
    (session,) = open_sessions(path)  # the subagent files are listed here
    if kind == "deleted after listing":
        bad.unlink()
    evts = list(session.events())
    assert [(c.agent.id, c.tool) for c in calls(evts)] == [("main", "Grep"), ("ok", "Read")]
    assert session.report.skipped == {"unreadable-subagent": 1}
    (problem,) = session.report.problems
    assert problem.startswith("subagent not read: ")
    assert str(bad) in problem


def test_an_unreadable_subagent_is_named_once_however_often_the_import_runs_again(tmp_path: Path) -> None:
    path = _session_with_subagents(tmp_path, "ok", "bad")
    (tmp_path / "s4" / "subagents" / "agent-bad.jsonl").unlink()
    (tmp_path / "s4" / "subagents" / "agent-bad.jsonl").symlink_to("gone.jsonl")
    lines = path.read_text().splitlines()
    lines.insert(1, '{"type": "user", "sessionId": "s4", "isSidechain": true, "parentUuid": [1]}')
    path.write_text("\n".join(lines) + "\n")  # a record the importer cannot use: the import runs again
    (session,) = open_sessions(path)
    evts = list(session.events())
    assert [(c.agent.id, c.tool) for c in calls(evts)] == [("main", "Grep"), ("ok", "Read")]
    assert session.report.skipped == {"unreadable-subagent": 1, "bad-record": 1}
    assert [p.split(": ")[0] for p in session.report.problems] == ["subagent not read", f"{path}:2"]


def _flat_project(folder: Path, sessions: int) -> None:
    """A Claude Code 2.0 project: session files, each with one flat
    subagent file beside it naming it."""
    for n in range(sessions):
        main = ClaudeCodeSession(f"s{n}")
        main.call("Bash", {"command": "ls"})
        main.write(folder / f"s{n}.jsonl")
        sub = ClaudeCodeSession(f"s{n}", agent_id=f"a{n}", start=5)
        sub.call("Read", {"file_path": f"f{n}"})
        sub.write(folder / f"agent-a{n}.jsonl")


def _counting_first_lines(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The agent files whose first line the importer reads, from now on."""
    read: list[Path] = []

    def counted(path: Path) -> dict[str, Any]:
        read.append(path)
        return first_object(path)

    monkeypatch.setattr(claude_code, "first_object", counted)
    return read


def test_flat_subagent_files_are_read_once_per_walk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _flat_project(tmp_path, 30)
    read = _counting_first_lines(monkeypatch)
    report = audit([tmp_path], Config())
    assert len(report.sessions) == 30
    assert all(s.agents == 2 and s.calls == 2 for s in report.sessions)
    assert sorted(p.name for p in read) == sorted(f"agent-a{n}.jsonl" for n in range(30))


def test_the_flat_subagent_index_follows_the_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _flat_project(tmp_path, 2)
    broken = tmp_path / "agent-broken.jsonl"
    broken.write_text("not json\n")
    read = _counting_first_lines(monkeypatch)
    assert subagent_files(tmp_path / "s0.jsonl") == [tmp_path / "agent-a0.jsonl"]
    assert subagent_files(tmp_path / "s1.jsonl") == [tmp_path / "agent-a1.jsonl"]
    assert [p.name for p in read] == ["agent-a0.jsonl", "agent-a1.jsonl", "agent-broken.jsonl", "agent-broken.jsonl"]
    old = time.time() - 60  # a file and a folder nobody has touched for a minute: taken as they are
    os.utime(broken, (old, old))
    os.utime(tmp_path, (old, old))
    read.clear()
    assert subagent_files(tmp_path / "s1.jsonl") == [tmp_path / "agent-a1.jsonl"]
    assert subagent_files(tmp_path / "s0.jsonl") == [tmp_path / "agent-a0.jsonl"]
    assert belongs_to_session(tmp_path / "agent-a0.jsonl")
    assert not belongs_to_session(broken)
    assert read == [broken]
    sub = ClaudeCodeSession("s0", agent_id="late", start=50)
    sub.call("Read", {"file_path": "z"})
    sub.write(tmp_path / "agent-late.jsonl")  # the folder changed
    assert subagent_files(tmp_path / "s0.jsonl") == [tmp_path / "agent-a0.jsonl", tmp_path / "agent-late.jsonl"]
    assert read == [broken, tmp_path / "agent-late.jsonl"]


def test_an_agent_file_that_cannot_be_read_yet_is_asked_again(tmp_path: Path) -> None:
    _flat_project(tmp_path / "project", 1)
    (tmp_path / "project" / "agent-x.jsonl").symlink_to(tmp_path / "elsewhere" / "agent-x.jsonl")
    old = time.time() - 60
    os.utime(tmp_path / "project", (old, old))
    assert subagent_files(tmp_path / "project" / "s0.jsonl") == [tmp_path / "project" / "agent-a0.jsonl"]
    sub = ClaudeCodeSession("s0", agent_id="x", start=50)
    sub.call("Read", {"file_path": "z"})
    sub.write(tmp_path / "elsewhere" / "agent-x.jsonl")  # the folder the link is in is left as it was
    assert subagent_files(tmp_path / "project" / "s0.jsonl")[-1] == tmp_path / "project" / "agent-x.jsonl"


def test_a_file_in_a_folder_that_cannot_be_listed_is_no_subagent(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("")
    assert not belongs_to_session(tmp_path / "gone" / "agent-x.jsonl")
    assert not belongs_to_session(tmp_path / "notes.txt" / "agent-x.jsonl")


def _v1_0_session() -> list[dict[str, Any]]:
    """A Claude Code 1.0 session file: five ``Task`` subagents recorded in
    the file itself as sidechains (``isSidechain``, no ``agentId``), each a
    thread of ``parentUuid`` links; three of them run at the same time, so
    their entries interleave."""
    lines: list[dict[str, Any]] = []
    clock = itertools.count()

    def entry(kind: str, parent: str | None, uuid: str, message: dict[str, Any], *, side: bool) -> str:
        moment = 1_750_000_000 + next(clock)
        stamp = datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        lines.append(
            {
                "parentUuid": parent,
                "isSidechain": side,
                "userType": "external",
                "cwd": "/work",
                "sessionId": "s10",
                "version": "1.0.35",
                "type": kind,
                "message": message,
                "uuid": uuid,
                "timestamp": stamp,
            }
        )
        return uuid

    def tool_use(uuid: str, parent: str, call: str, name: str, args: dict[str, Any], *, side: bool) -> str:
        block = {"type": "tool_use", "id": call, "name": name, "input": args}
        message = {"id": f"msg-{uuid}", "role": "assistant", "model": "claude-sonnet-4", "content": [block]}
        return entry("assistant", parent, uuid, message, side=side)

    def tool_result(uuid: str, parent: str, call: str, text: str, *, side: bool) -> str:
        block = {"tool_use_id": call, "type": "tool_result", "content": text}
        return entry("user", parent, uuid, {"role": "user", "content": [block]}, side=side)

    last = entry("user", None, "u0", {"role": "user", "content": "audit the repo"}, side=False)
    tasks = [f"toolu_task{n}" for n in range(5)]
    # Three Tasks in one response: their subagents run concurrently.
    for n in range(3):
        prompt = {"description": f"part {n}", "prompt": f"look at part {n}"}
        last = tool_use(f"a{n}", last, tasks[n], "Task", prompt, side=False)
    heads = {
        n: entry("user", None, f"r{n}", {"role": "user", "content": f"look at part {n}"}, side=True) for n in range(3)
    }
    for turn in range(2):
        for n in range(3):
            call = f"toolu_s{n}_{turn}"
            heads[n] = tool_use(f"s{n}c{turn}", heads[n], call, "Grep", {"pattern": "TODO"}, side=True)
        for n in range(3):
            heads[n] = tool_result(f"s{n}r{turn}", heads[n], f"toolu_s{n}_{turn}", "src/a.py:1: TODO", side=True)
    for n in range(3):
        last = tool_result(f"t{n}", last, tasks[n], f"part {n} done", side=False)
    # Then two more, one after the other.
    for n in (3, 4):
        last = tool_use(f"a{n}", last, tasks[n], "Task", {"description": "more", "prompt": "look again"}, side=False)
        head = entry("user", None, f"r{n}", {"role": "user", "content": "look again"}, side=True)
        head = tool_use(f"s{n}c", head, f"toolu_s{n}", "Read", {"file_path": "/work/a.py"}, side=True)
        tool_result(f"s{n}r", head, f"toolu_s{n}", "print(1)", side=True)
        last = tool_result(f"t{n}", last, tasks[n], "done", side=False)
    return lines


def test_1_0_inline_sidechains_are_one_agent_each(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "s10.jsonl", _v1_0_session())
    (session,) = open_sessions(path)
    evts = list(session.events())
    agents = {e.agent.id: e.agent.parent_id for e in evts if e.agent is not None}
    assert agents == {
        "main": None,
        "sidechain-1": "main",
        "sidechain-2": "main",
        "sidechain-3": "main",
        "sidechain-4": "main",
        "sidechain-5": "main",
    }
    assert [len(calls(evts, a)) for a in sorted(agents)] == [5, 2, 2, 2, 1, 1]
    assert [c.args["pattern"] for c in calls(evts, "sidechain-2")] == ["TODO", "TODO"]
    assert longest_run(evts) == 2  # each subagent grepped twice; merged, it would be six in a row
    assert [m.text for m in of(evts, UserMessage) if m.agent.id == "sidechain-3"] == ["look at part 2"]
    assert not session.report.skipped


def test_prompt_blocks_tool_references_and_a_hook_for_no_call(tmp_path: Path) -> None:
    s = ClaudeCodeSession("blocks")
    s.attachment(type="hook_additional_context", content=["project rules"], hookName="SessionStart", toolUseID="x")
    s.prompt([{"type": "text", "text": "look at this"}, {"type": "image", "source": {"data": "iVBOR"}}])
    (search,) = s.respond(("ToolSearch", {"query": "grep"}))
    s.result(search, [{"type": "tool_reference", "tool_name": "Grep"}])
    evts = only(s.write(tmp_path / "blocks.jsonl"))
    assert [m.text for m in of(evts, UserMessage)] == ["look at this"]
    (result,) = of(evts, ToolResult)
    assert result.content == "Grep"
    (hook,) = of(evts, ContextMessage)
    assert (hook.call_id, hook.text) == ("", "project rules")  # SessionStart answers no call


def test_a_compaction_is_imported_as_the_live_hooks_publish_it(tmp_path: Path) -> None:
    s = ClaudeCodeSession("compact")
    s.prompt("fix it")
    for _ in range(2):
        s.call("Read", {"file_path": "a.py"}, "x = 1")
    s._entry("system", subtype="compact_boundary", content="Conversation compacted", level="info")
    s.prompt("This session is being continued from a previous conversation...", isCompactSummary=True)
    s.call("Read", {"file_path": "a.py"}, "x = 1")
    assert compactions(only(s.write(tmp_path / "s.jsonl"))) == ["Read", "Read", "compacted", "Read"]


def test_a_compaction_in_a_log_of_the_agent_sdks_messages_is_no_user_turn(tmp_path: Path) -> None:
    """A program that logs the Claude Agent SDK's messages as ``{type,
    message, timestamp}`` (OpenAgentsInc/openagents' autopilot logs) keeps
    the boundary's subtype inside ``message`` and its summary without the
    flag a transcript gives it: the compaction is one, the summary no
    instruction of the user's."""
    grep = {"type": "tool_use", "id": "toolu_1", "name": "mcp__issues__issue_ready", "input": {}}
    answer = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "No ready issues available"}
    summary = "This session is being continued from a previous conversation that ran out of context. Call it again."
    lines = [
        {"type": "system", "message": {"subtype": "init", "claude_code_version": "2.0.75", "session_id": "s-1"}},
        {"type": "assistant", "message": {"id": "m1", "role": "assistant", "content": [grep], "model": "opus"}},
        {"type": "user", "message": {"role": "user", "content": [answer]}},
        {"type": "system", "message": {"subtype": "compact_boundary", "compact_metadata": {"trigger": "auto"}}},
        {"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": summary}]}},
        {"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": "and then the docs"}]}},
    ]
    for line in lines:
        line["timestamp"] = "2025-12-23T03:01:35.215079254+00:00"
    path = tmp_path / "sdk.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    evts = only(path)
    assert compactions(evts) == ["mcp__issues__issue_ready", "compacted"]
    assert [m.text for m in of(evts, UserMessage)] == ["and then the docs"]


def _stream_json_line(kind: str, blocks: list[dict[str, Any]], *, subagent: str | None = None) -> dict[str, Any]:
    """A ``claude -p --output-format stream-json`` line as older Claude Code
    versions print it: ``session_id`` and ``parent_tool_use_id``, no
    ``uuid``, no ``timestamp``."""
    role = "assistant" if kind == "assistant" else "user"
    message = {"id": f"msg_{len(blocks)}_{subagent}", "role": role, "content": blocks, "model": "claude-sonnet-4-6"}
    return {"type": kind, "message": message, "parent_tool_use_id": subagent, "session_id": "s-1"}


def test_stream_json_output_imports_with_subagents_apart(tmp_path: Path) -> None:
    task = {"type": "tool_use", "id": "toolu_task", "name": "Task", "input": {"prompt": "find HELLO"}}
    grep = {"type": "tool_use", "id": "toolu_grep", "name": "Grep", "input": {"pattern": "HELLO"}}
    lines = [
        {"type": "system", "subtype": "init", "session_id": "s-1", "tools": ["Bash", "Task"]},
        _stream_json_line("assistant", [task]),
        _stream_json_line("assistant", [grep], subagent="toolu_task"),
        _stream_json_line(
            "user",
            [{"type": "tool_result", "tool_use_id": "toolu_grep", "content": "No matches"}],
            subagent="toolu_task",
        ),
        _stream_json_line("user", [{"type": "tool_result", "tool_use_id": "toolu_task", "content": "none found"}]),
        {"type": "result", "subtype": "success", "session_id": "s-1", "result": "done"},
    ]
    path = write_lines(tmp_path / "run.jsonl", lines)
    assert detect_format(path) == "claude-code"
    (session,) = open_sessions(path)
    evts = list(session.events())
    assert [(c.agent.id, c.agent.parent_id, c.tool) for c in calls(evts)] == [
        ("main", None, "Task"),
        ("toolu_task", "main", "Grep"),
    ]
    assert [r.content for r in of(evts, ToolResult)] == ["No matches", "none found"]


def test_agent_sdk_messages_a_program_logged_in_its_own_wrapper_import() -> None:
    """A headless run's Agent SDK messages, each logged as ``{type, message,
    timestamp}``: no ``sessionId`` or ``uuid`` beside them, the session id
    inside the ``init`` message. Its 26 identical polls of an empty queue at
    the end are the loop the guard is for."""
    path = corpus_file("claude-code/openagents-autopilot-issue-ready.jsonl")
    assert detect_format(path) == "claude-code"
    evts = only(path)
    assert len(calls(evts)) == 46
    assert len([r for r in of(evts, ToolResult) if r.is_error]) == 1
    assert longest_run(evts) == 26
    assert {c.agent.id for c in calls(evts)} == {"main"}


@pytest.mark.parametrize(
    "line",
    [
        {"type": "system", "message": {"subtype": "init", "session_id": "s-1", "tools": ["Bash"]}},
        {"type": "assistant", "message": {"role": "assistant", "content": [{"type": "tool_use", "id": "t1"}]}},
        {"type": "user", "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1"}]}},
    ],
    ids=["init", "tool_use", "tool_result"],
)
def test_one_wrapped_sdk_message_is_enough_to_tell_the_format(tmp_path: Path, line: dict[str, Any]) -> None:
    prompt = {"type": "user", "message": {"role": "user", "content": "fix the test"}}
    assert detect_format(write_lines(tmp_path / "run.jsonl", [prompt, line])) == "claude-code"


def test_wrapped_messages_without_tool_blocks_or_init_are_not_claude_code(tmp_path: Path) -> None:
    lines = [
        {"type": "user", "message": {"role": "user", "content": "hello"}},
        {"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": "hi"}]}},
        {"type": "system", "message": {"subtype": "status", "session_id": "s-1"}},
    ]
    with pytest.raises(UnknownFormatError, match="an Agent SDK message"):
        detect_format(write_lines(tmp_path / "chat.jsonl", lines))


@pytest.mark.slow
def test_the_real_clis_stream_json_output_imports_with_its_subagent(fake_anthropic: FakeAnthropic) -> None:
    """``claude -p --output-format stream-json --verbose``, as an Agent SDK
    user logs it: a subagent's calls are its own, not the main agent's."""
    fake_anthropic.script(
        [tool_use("Bash", {"command": "ls"})],
        [
            tool_use(
                "Task", {"description": "look", "prompt": "find the word HELLO", "subagent_type": "general-purpose"}
            )
        ],
        [text("done")],
    )
    fake_anthropic.script_subagent("find the word HELLO", [tool_use("Bash", {"command": "grep -r HELLO ."})])
    done = fake_anthropic.run_cli("list the files")
    assert done.returncode == 0, done.stderr
    path = fake_anthropic.home / "stream.jsonl"
    path.write_text(done.stdout)
    (session,) = open_sessions(path)
    evts = list(session.events())
    made = [(c.agent.id == "main", c.agent.parent_id, c.tool) for c in calls(evts)]
    assert made == [(True, None, "Bash"), (True, None, "Task"), (False, "main", "Bash")]
    assert all(r.agent.id == c.agent.id for c, r in zip(calls(evts), of(evts, ToolResult), strict=False))


def _written_before_its_call(s: ClaudeCodeSession) -> None:
    """Put the session's last line, a result, before the line above it, its
    call, as Claude Code 2.1 sometimes writes them: the result's timestamp
    stays the later one, and its ``parentUuid`` names the call's line."""
    call, result = s.lines[-2:]
    result["parentUuid"] = call["uuid"]
    s.lines[-2:] = [result, call]


def _early_result(call_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": "ok"}


def _tool_use(call_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": "Read", "input": {"file_path": call_id}}


def test_a_result_written_before_its_call_still_answers_it(tmp_path: Path) -> None:
    s = ClaudeCodeSession("early")
    s.prompt("update issues.md")
    edit = s.call("Edit", {"file_path": "issues.md", "old_string": "a", "new_string": "b"}, "issues.md updated")
    _written_before_its_call(s)
    read = s.call("Read", {"file_path": "issues.md"}, "b")
    (session,) = open_sessions(s.write(tmp_path / "early.jsonl"))
    evts = list(session.events())
    assert not session.report.skipped
    steps = [(type(e).__name__, e.call_id) for e in evts if isinstance(e, ToolCall | ToolResult)]
    assert steps == [("ToolCall", edit), ("ToolResult", edit), ("ToolCall", read), ("ToolResult", read)]
    call, result = calls(evts)[0], of(evts, ToolResult)[0]
    assert (result.tool, result.args, result.content, result.step) == (call.tool, call.args, "issues.md updated", 1)
    assert result.ts > call.ts


def test_a_result_waits_for_its_call_only_a_bounded_number_of_entries(tmp_path: Path) -> None:
    window = claude_code._EARLY_ENTRIES
    s = ClaudeCodeSession("late")
    s.result("toolu_in_time", "ok")
    for _ in range(window - 1):
        s._entry("progress")
    s.respond(("Read", {"file_path": "a.py"}))
    s.lines[-1]["message"]["content"][0]["id"] = "toolu_in_time"
    s.result("toolu_too_late", "ok")
    for _ in range(window):
        s._entry("progress")
    s.respond(("Read", {"file_path": "b.py"}))
    s.lines[-1]["message"]["content"][0]["id"] = "toolu_too_late"
    s.result("toolu_never_called", "ok")
    (session,) = open_sessions(s.write(tmp_path / "late.jsonl"))
    evts = list(session.events())
    assert [r.call_id for r in of(evts, ToolResult)] == ["toolu_in_time"]
    assert [c.call_id for c in calls(evts)] == ["toolu_in_time", "toolu_too_late"]
    assert session.report.skipped == {"orphan-result": 2}


def test_at_most_a_bounded_number_of_results_wait_for_their_calls(tmp_path: Path) -> None:
    ids = [f"toolu_{n}" for n in range(claude_code._EARLY_MAX + 1)]
    s = ClaudeCodeSession("many")
    s._entry("user", message={"role": "user", "content": [_early_result(i) for i in ids]})
    s._entry("assistant", message={"id": "m1", "role": "assistant", "model": "m", "content": list(map(_tool_use, ids))})
    (session,) = open_sessions(s.write(tmp_path / "many.jsonl"))
    evts = list(session.events())
    assert [r.call_id for r in of(evts, ToolResult)] == ids[1:]  # the oldest gave way
    assert session.report.skipped == {"orphan-result": 1}


def test_a_second_result_for_a_call_still_awaited_is_an_orphan(tmp_path: Path) -> None:
    s = ClaudeCodeSession("twice")
    s._entry("user", message={"role": "user", "content": [_early_result("toolu_1")]})
    s._entry("user", message={"role": "user", "content": [_early_result("toolu_1")]})
    s._entry("assistant", message={"id": "m1", "role": "assistant", "model": "m", "content": [_tool_use("toolu_1")]})
    (session,) = open_sessions(s.write(tmp_path / "twice.jsonl"))
    evts = list(session.events())
    assert [r.call_id for r in of(evts, ToolResult)] == ["toolu_1"]
    assert session.report.skipped == {"orphan-result": 1}


def _command(s: ClaudeCodeSession, typed: str, expansion: str | None, *, built_in: bool = False) -> None:
    """A slash command as Claude Code records it: an entry of
    ``<command-…>`` tags, then, for a command whose prompt reaches the model
    (a custom command, a skill, ``/init``), that prompt as an ``isMeta``
    entry whose parent is the command's entry; for one that runs in the CLI
    (``built_in``), its ``<local-command-stdout>``."""
    name, _, args = typed.partition(" ")
    if built_in:  # 2.x writes a built-in command's tags name first, indented
        tags = (
            f"<command-name>{name}</command-name>\n            <command-message>{name[1:]}</command-message>\n"
            f"            <command-args>{args}</command-args>"
        )
    else:
        tags = f"<command-message>{name[1:]}</command-message>\n<command-name>{name}</command-name>"
        tags += f"\n<command-args>{args}</command-args>" if args else ""
    s.prompt(tags)
    command = s.lines[-1]["uuid"]
    if expansion is not None:
        s.prompt([{"type": "text", "text": expansion}], isMeta=True, parentUuid=command)
    else:
        s.prompt("<local-command-stdout>done</local-command-stdout>", parentUuid=command)


def test_a_slash_command_whose_prompt_reaches_the_model_is_what_the_user_typed(tmp_path: Path) -> None:
    s = ClaudeCodeSession("commands")
    _command(s, "/deploy-check staging", "Check whether the deploy is healthy.\n\nARGUMENTS: staging")
    typed_at = iso(s.lines[-2]["timestamp"])
    s.call("Bash", {"command": "./smoke.sh staging"}, "FAIL", is_error=True)
    _command(s, "/model claude-opus-4-6-thinking", None, built_in=True)
    _command(s, "/clear", None, built_in=True)
    _command(s, "/init", "Please analyze this codebase and create a CLAUDE.md file.")
    s.call("Write", {"file_path": "CLAUDE.md", "content": "# Notes"})
    evts = only(s.write(tmp_path / "commands.jsonl"))
    prompts = of(evts, UserMessage)
    assert [m.text for m in prompts] == ["/deploy-check staging", "/init"]
    assert prompts[0].ts == typed_at
    assert evts.index(prompts[0]) < evts.index(calls(evts)[0])


def test_a_command_message_without_a_command_name_is_no_prompt(tmp_path: Path) -> None:
    s = ClaudeCodeSession("nameless")
    s.prompt("<command-message>deploy-check is running…</command-message>\n<command-args>staging</command-args>")
    s.call("Bash", {"command": "./smoke.sh staging"}, "ok")
    assert of(only(s.write(tmp_path / "nameless.jsonl")), UserMessage) == []


def test_an_ides_context_blocks_are_not_the_users_words(tmp_path: Path) -> None:
    opened = (
        "<ide_opened_file>The user opened the file /w/retry.py in the IDE."
        " This may or may not be related to the current task.</ide_opened_file>"
    )
    selected = (
        "<ide_selection>The user selected the lines 10 to 13 from /w/retry.py:\nfor attempt in range(5):\n"
        "    # retry 5 times, poll the server until it answers\n    poll()\n\n"
        "This may or may not be related to the current task.</ide_selection>"
    )
    s = ClaudeCodeSession("ide")
    s.prompt([{"type": "text", "text": selected}, {"type": "text", "text": "why does bench.py fail?"}])
    s.prompt([{"type": "text", "text": opened}])
    s.prompt(f"{opened}\nkeep the <idea> tag as I wrote it")
    s.attachment(type="queued_command", prompt=f"{opened}\nalso run the linter", commandMode="prompt")
    s.prompt([{"type": "text", "text": opened}, {"type": "text", "text": "<command-name>/review</command-name>"}])
    s.prompt([{"type": "text", "text": "Review this change."}], isMeta=True, parentUuid=s.lines[-1]["uuid"])
    evts = only(s.write(tmp_path / "ide.jsonl"))
    assert [m.text for m in of(evts, UserMessage)] == [
        "why does bench.py fail?",
        "keep the <idea> tag as I wrote it",
        "also run the linter",
        "/review",
    ]


@pytest.mark.parametrize("filed", [False, True])
def test_a_subagent_copied_into_the_session_file_is_read_when_its_own_file_is_missing(
    tmp_path: Path, filed: bool
) -> None:
    """Claude Code 2.1 copies each message of a subagent into the session
    file as a ``progress`` entry (``agent_progress``): a session file copied
    alone keeps its subagents' calls, and with the subagent's own file
    beside it they are read once."""
    main = ClaudeCodeSession("s5")
    main.prompt("find why the build fails")
    (task,) = main.respond(("Task", {"prompt": "run the build"}))
    sub = ClaudeCodeSession("s5", agent_id="a1", start=5)
    sub.prompt("run the build")
    for _ in range(3):
        sub.call("Bash", {"command": "make build"}, "make: *** No rule to make target 'build'.", is_error=True)
    copies = [
        {
            "type": "progress",
            "sessionId": "s5",
            "timestamp": line["timestamp"],
            "parentToolUseID": task,
            "data": {"type": "agent_progress", "agentId": "a1", "message": {**line, "isSidechain": False}},
        }
        for line in sub.lines
    ]
    main.skip_to(30)
    main.result(task, "the Makefile has no build target")
    main.lines[2:2] = copies
    path = main.write(tmp_path / "s5.jsonl")
    if filed:
        sub.write(tmp_path / "s5" / "subagents" / "agent-a1.jsonl")
    evts = only(path)
    assert [(c.agent.id, c.tool) for c in calls(evts)] == [("main", "Task")] + [("a1", "Bash")] * 3
    assert [r.is_error for r in of(evts, ToolResult) if r.agent.id == "a1"] == [True] * 3
    assert {s.agent.id: s.parent for s in of(evts, AgentStatus)} == {"main": None, "a1": "main"}
    assert [(m.agent.id, m.text) for m in of(evts, UserMessage)] == [
        ("main", "find why the build fails"),
        ("a1", "run the build"),
    ]
