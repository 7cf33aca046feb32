"""Gemini CLI's subagents on the hook core. The main agent delegates through
its ``invoke_agent`` tool, and a subagent's ``BeforeTool`` / ``AfterTool``
carry the main agent's ``session_id`` and ``transcript_path`` and no agent
id (Gemini CLI 0.61): the guard takes its calls for a child of the main
agent named after the invoked agent, as Claude Code's and Codex's
subagents are (``GeminiRuntime.attribute``)."""

from __future__ import annotations

import os
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bus import AgentStatus, ContextMessage, ToolCall, ToolResult, read_log
from bus.testing import Capture
from guard import GENTLE_REMINDER, RECOMMENDED, Config, RemindConfig
from guard.adapters.claude_hooks import ClaudeHooks, answer_hook
from guard.adapters.gemini_hooks import GEMINI_CLI, fired_at, subagents_started
from guard.sessions.link import GuardLink

pytestmark = pytest.mark.anyio

SESSION = "d5b5bb13-724f-4579-a7a7-18308c39368a"
SAME = "echo same >> ran.txt; echo same"


def stamp(at: float) -> str:
    """``at`` as Gemini CLI writes a hook's ``timestamp``."""
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Session:
    """Hook payloads of one Gemini CLI session as 0.61 sends them, and its
    chats folder: the session's transcript, and a subagent's recording
    (``chats/<session id>/<id>.jsonl``) made as it starts. ``recorded``
    false sends no ``transcript_path`` (the folder cannot be seen)."""

    def __init__(self, tmp_path: Path, *, recorded: bool = True) -> None:
        self.chats = tmp_path / ".gemini" / "tmp" / "project" / "chats"
        self.chats.mkdir(parents=True, exist_ok=True)
        self.transcript = self.chats / "session-2026-12-05T14-23-d5b5bb13.jsonl"
        self.transcript.write_text(f'{{"sessionId": "{SESSION}", "kind": "main"}}\n')
        self.recorded = recorded

    def payload(self, event: str, fired: float | None = None, **fields: Any) -> dict[str, Any]:
        base: dict[str, Any] = {
            "session_id": SESSION,
            "transcript_path": str(self.transcript) if self.recorded else "",
            "cwd": "/w",
            "hook_event_name": event,
        }
        if fired is not None:
            base["timestamp"] = stamp(fired)
        return {**base, **fields}

    def before(self, tool: str, args: dict[str, Any], fired: float | None = None) -> dict[str, Any]:
        return self.payload("BeforeTool", fired, tool_name=tool, tool_input=args)

    def after(self, tool: str, args: dict[str, Any], output: str = "same") -> dict[str, Any]:
        content = f"<untrusted_context>\nOutput: {output}\nProcess Group PGID: 4242\n</untrusted_context>"
        response = {"llmContent": content, "returnDisplay": output}
        return self.payload("AfterTool", time.time(), tool_name=tool, tool_input=args, tool_response=response)

    def subagent_starts(self) -> None:
        """Gemini CLI starts a subagent: its recording is written (a second
        on, so a coarse file clock cannot put it before the guard's record)."""
        folder = self.chats / SESSION
        folder.mkdir(exist_ok=True)
        recording = folder / f"{uuid.uuid4()}.jsonl"
        recording.write_text('{"kind": "subagent"}\n')
        later = time.time() + 1
        os.utime(recording, (later, later))


def shell(command: str = SAME) -> tuple[str, dict[str, Any]]:
    return "run_shell_command", {"command": command}


def delegate(prompt: str = "SUBTASK", agent: str = "generalist") -> tuple[str, dict[str, Any]]:
    return "invoke_agent", {"agent_name": agent, "prompt": prompt}


DONE = ("complete_task", {"result": {"response": "ok"}})


def who(events: Capture) -> list[tuple[str, str]]:
    """Each call's agent (``main``, or its id up to ``@``) and tool."""
    return [
        (
            "main"
            if c.agent is not None and c.agent.id == SESSION
            else (c.agent.id.partition("@")[0] if c.agent else ""),
            c.tool,
        )
        for c in events.of(ToolCall)
    ]


@pytest.fixture(autouse=True)
def gemini_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Gemini CLI's home: the recordings the guard reads are under its ``.gemini``."""
    monkeypatch.setenv("GEMINI_CLI_HOME", str(tmp_path))
    return tmp_path / ".gemini"


@pytest.fixture
def recommended() -> GuardLink:
    return GuardLink(config=RECOMMENDED)


async def test_a_subagents_calls_are_a_child_of_the_main_agent_named_after_the_invoked_agent(
    recommended: GuardLink, tmp_path: Path
) -> None:
    """The main agent runs a command, then delegates to a subagent that runs
    it twice: under ``recommended`` nothing is denied (the subagent made the
    call twice, the main agent once before and once after)."""
    events = Capture().attach(recommended.bus)
    hooks, gemini = ClaudeHooks(recommended, runtime=GEMINI_CLI), Session(tmp_path)
    answers = [await hooks.handle(gemini.before(*shell())), await hooks.handle(gemini.after(*shell()))]
    answers.append(await hooks.handle(gemini.before(*delegate())))
    gemini.subagent_starts()
    for tool in (shell(), shell(), DONE):
        answers += [await hooks.handle(gemini.before(*tool)), await hooks.handle(gemini.after(*tool))]
    answers.append(await hooks.handle(gemini.after(*delegate(), output="Subagent 'generalist' finished.")))
    answers += [await hooks.handle(gemini.before(*shell())), await hooks.handle(gemini.after(*shell()))]

    assert answers == [{}] * len(answers)
    assert who(events) == [
        ("main", "run_shell_command"),
        ("main", "invoke_agent"),
        ("generalist", "run_shell_command"),
        ("generalist", "run_shell_command"),
        ("generalist", "complete_task"),
        ("main", "run_shell_command"),
    ]
    child = events.of(ToolCall)[2].agent
    assert child is not None
    assert child.parent_id == SESSION
    assert child.id == f"generalist@{events.of(ToolCall)[1].call_id}"
    statuses = [(s.agent.id if s.agent else "", s.status) for s in events.of(AgentStatus)]
    assert statuses[1:] == [(child.id, "started"), (child.id, "disposed")], "the invoke_agent's result ends it"
    assert [r.agent.id if r.agent else "" for r in events.of(ToolResult)][-2:] == [SESSION, SESSION]


async def test_the_main_agents_calls_of_the_delegating_response_stay_its_own(
    recommended: GuardLink, tmp_path: Path
) -> None:
    """Gemini CLI fires the BeforeTool hooks of one response's calls before
    running any of them: calls fired beside an ``invoke_agent`` are the main
    agent's (no subagent has started yet), and their results, which come
    while the subagent runs, too."""
    events = Capture().attach(recommended.bus)
    hooks, gemini = ClaudeHooks(recommended, runtime=GEMINI_CLI), Session(tmp_path)
    await hooks.handle(gemini.before(*shell("git status")))
    await hooks.handle(gemini.before(*delegate()))
    await hooks.handle(gemini.before(*shell("ls src")))
    gemini.subagent_starts()
    for _ in range(2):
        await hooks.handle(gemini.before(*shell()))
        if _ == 0:
            await hooks.handle(gemini.after(*shell("ls src"), output="cfg.py"))
        await hooks.handle(gemini.after(*shell()))
    await hooks.handle(gemini.after(*shell("git status"), output="clean"))
    await hooks.handle(gemini.after(*delegate(), output="done"))

    assert who(events) == [
        ("main", "run_shell_command"),
        ("main", "invoke_agent"),
        ("main", "run_shell_command"),
        ("generalist", "run_shell_command"),
        ("generalist", "run_shell_command"),
    ]
    assert {c.step for c in events.of(ToolCall) if c.agent is not None and c.agent.id == SESSION} == {1}
    results = {
        (r.args["command"] if r.tool != "invoke_agent" else "", r.agent.id if r.agent else "")
        for r in events.of(ToolResult)
    }
    assert ("ls src", SESSION) in results
    assert ("git status", SESSION) in results
    assert not events.of(ContextMessage)


async def test_an_invoke_agent_refused_after_the_guard_allowed_it_leaves_the_main_agent_its_calls(
    link: GuardLink, tmp_path: Path
) -> None:
    """Another hook, Gemini CLI's policy (plan mode) or the user refuses the
    ``invoke_agent``: no subagent starts and no AfterTool comes, and the
    main agent goes on; its calls stay its own, and its turn's end ends the
    subagent the guard had started for it."""
    events = Capture().attach(link.bus)
    hooks, gemini = ClaudeHooks(link, runtime=GEMINI_CLI), Session(tmp_path)
    await hooks.handle(gemini.before(*delegate()))
    answers = []
    for _ in range(3):
        answers += [await hooks.handle(gemini.before(*shell())), await hooks.handle(gemini.after(*shell()))]
    assert who(events) == [("main", "invoke_agent")] + [("main", "run_shell_command")] * 3
    assert GENTLE_REMINDER in str(answers[-1]), "the main agent's own loop is still caught"
    (child,) = [a for a in link.links() if a.agent.parent_id == SESSION]
    await hooks.handle(gemini.payload("AfterAgent", time.time(), prompt="go", prompt_response="done"))
    assert [a.agent.id for a in link.links()] == [SESSION]
    assert (child.agent, "disposed") in [(s.agent, s.status) for s in events.of(AgentStatus)]


async def test_where_the_recordings_cannot_be_seen_the_hooks_timestamps_tell(link: GuardLink, tmp_path: Path) -> None:
    """Without the subagents' recordings (no transcript, a server on another
    machine), a call fired no later than the guard recorded the main
    agent's latest call is of the delegating response; one fired after it
    can only be the subagent's (it starts once the invoke_agent's hooks
    answered), and so is one with no timestamp."""
    events = Capture().attach(link.bus)
    hooks, gemini = ClaudeHooks(link, runtime=GEMINI_CLI), Session(tmp_path, recorded=False)
    assert subagents_started(gemini.before(*shell()), 0.0) is None
    fired = time.time()
    await hooks.handle(gemini.before(*delegate(), fired=fired))
    await hooks.handle(gemini.before(*shell("ls src"), fired=fired))  # beside it, in the same response
    answers = []
    for n in range(3):
        later = gemini.before(*shell(), fired=time.time() + 1) if n < 2 else gemini.before(*shell())
        answers += [await hooks.handle(later), await hooks.handle(gemini.after(*shell()))]
    assert (
        who(events)
        == [("main", "invoke_agent"), ("main", "run_shell_command")] + [("generalist", "run_shell_command")] * 3
    )
    assert GENTLE_REMINDER in str(answers[-1]), "the subagent's own loop is caught"


@pytest.mark.parametrize("recorded", [True, False])
async def test_a_later_response_delegating_again_ends_the_subagent_of_a_refused_one(
    link: GuardLink, tmp_path: Path, recorded: bool
) -> None:
    events = Capture().attach(link.bus)
    hooks, gemini = ClaudeHooks(link, runtime=GEMINI_CLI), Session(tmp_path, recorded=recorded)
    await hooks.handle(gemini.before(*delegate("first"), fired=time.time()))  # refused: no AfterTool
    await hooks.handle(gemini.before(*delegate("second", "codebase_investigator"), fired=time.time() + 1))
    gemini.subagent_starts()
    await hooks.handle(gemini.before(*shell(), fired=time.time() + 2))
    assert who(events) == [
        ("main", "invoke_agent"),
        ("main", "invoke_agent"),
        ("codebase_investigator", "run_shell_command"),
    ]
    live = sorted(a.agent.id.partition("@")[0] for a in link.links())
    assert live == ["codebase_investigator", SESSION]


async def test_with_several_subagents_at_once_each_of_their_calls_counts_on_its_own(
    link: GuardLink, tmp_path: Path
) -> None:
    """Which of two subagents running at once made a call cannot be told:
    rather than count their calls together (or with the main agent's), each
    is an agent of its own, ended with its result. Once one subagent is
    over, the other's calls are its own again."""
    events = Capture().attach(link.bus)
    hooks, gemini = ClaudeHooks(link, runtime=GEMINI_CLI), Session(tmp_path)
    await hooks.handle(gemini.before(*delegate("one")))
    await hooks.handle(gemini.before(*delegate("two", "codebase_investigator")))
    gemini.subagent_starts()
    gemini.subagent_starts()
    answers = []
    for _ in range(4):
        answers += [await hooks.handle(gemini.before(*shell())), await hooks.handle(gemini.after(*shell()))]
    assert answers == [{}] * 8
    alone = [c.agent.id for c in events.of(ToolCall)[2:] if c.agent is not None]
    assert len(set(alone)) == 4
    assert all(agent.startswith("codebase_investigator+generalist@call-") for agent in alone)
    assert sorted(a.agent.id.partition("@")[0] for a in link.links()) == sorted(
        ["codebase_investigator", "generalist", SESSION]
    ), "each ended with its result"

    await hooks.handle(gemini.after(*delegate("one"), output="done"))
    for _ in range(3):
        answers += [await hooks.handle(gemini.before(*shell())), await hooks.handle(gemini.after(*shell()))]
    assert who(events)[-3:] == [("codebase_investigator", "run_shell_command")] * 3
    assert GENTLE_REMINDER in str(answers[-1])


def test_the_command_hook_keeps_a_subagent_across_processes_and_rebuilt_from_the_log(tmp_path: Path) -> None:
    """Each hook event is a process of its own: the subagent lives in the
    session's snapshot, and in its log when there is no snapshot to read."""
    config = Config(remind=RemindConfig(thresholds=(3,)))
    state, gemini = tmp_path / "state", Session(tmp_path)

    def hook(payload: dict[str, Any]) -> dict[str, Any]:
        return answer_hook(payload, state, config, runtime=GEMINI_CLI)

    answers = [hook(gemini.before(*shell())), hook(gemini.after(*shell())), hook(gemini.before(*delegate()))]
    gemini.subagent_starts()
    answers += [hook(gemini.before(*shell())), hook(gemini.after(*shell()))]
    for snapshot in state.glob("*.snapshot"):
        snapshot.unlink()  # the next process rebuilds the session from its log
    answers += [hook(gemini.before(*shell())), hook(gemini.after(*shell()))]
    answers += [hook(gemini.before(*shell())), hook(gemini.after(*shell()))]
    assert answers[:-1] == [{}] * (len(answers) - 1)
    assert GENTLE_REMINDER in str(answers[-1]), "the subagent's third call in a row"
    hook(gemini.after(*delegate(), output="done"))
    calls = [e for e in read_log(state / f"{SESSION}.jsonl") if isinstance(e, ToolCall)]
    assert [(c.agent.parent_id if c.agent else None, c.tool) for c in calls] == [
        (None, "run_shell_command"),
        (None, "invoke_agent"),
        (SESSION, "run_shell_command"),
        (SESSION, "run_shell_command"),
        (SESSION, "run_shell_command"),
    ]
    statuses = [e.status for e in read_log(state / f"{SESSION}.jsonl") if isinstance(e, AgentStatus)]
    assert statuses == ["started", "started", "disposed"]


def test_a_hooks_timestamp_is_read_as_gemini_cli_writes_it() -> None:
    assert fired_at({"timestamp": "2026-12-05T14:23:40.470Z"}) == pytest.approx(1796480620.47)
    assert fired_at({"timestamp": "2026-12-05T14:23:40.470+01:00"}) == pytest.approx(1796477020.47)
    for unreadable in ("2026-12-05T14:23:40", "yesterday", 1796480620, None):
        assert fired_at({"timestamp": unreadable}) is None


def test_subagents_started_counts_the_recordings_written_since(tmp_path: Path) -> None:
    transcript = tmp_path / ".gemini" / "tmp" / "project" / "chats" / "session-x.jsonl"

    def started(since: float, path: str = str(transcript)) -> int | None:
        return subagents_started({"session_id": SESSION, "transcript_path": path}, since)

    assert started(0.0) is None, "no chats folder here"
    assert started(0.0, "chats/session-x.jsonl") is None, "a relative path says nothing"
    transcript.parent.mkdir(parents=True)
    assert started(0.0) == 0, "no subagent of the session has started"
    folder = transcript.parent / SESSION
    folder.mkdir()
    for name, written in (("old.jsonl", 100.0), ("new.jsonl", 300.0), ("notes.txt", 300.0)):
        (folder / name).write_text("{}\n")
        os.utime(folder / name, (written, written))
    assert (started(50.0), started(200.0), started(400.0)) == (2, 1, 0)
    assert subagents_started({"session_id": "", "transcript_path": str(transcript)}, 0.0) is None


def test_a_session_folder_that_is_no_folder_says_nothing(tmp_path: Path) -> None:
    transcript = tmp_path / ".gemini" / "tmp" / "project" / "chats" / "session-x.jsonl"
    transcript.parent.mkdir(parents=True)
    (transcript.parent / SESSION).write_text("a file where Gemini CLI keeps a folder\n")
    assert subagents_started({"session_id": SESSION, "transcript_path": str(transcript)}, 0.0) is None


async def test_a_call_of_two_subagents_whose_result_never_came_leaves_the_main_agent_its_calls(
    link: GuardLink, tmp_path: Path
) -> None:
    """A call of one of two subagents at once that Gemini CLI never ran (its
    result never comes) keeps its stand-in agent, but once both subagents
    are over every call is the main agent's again."""
    events = Capture().attach(link.bus)
    hooks, gemini = ClaudeHooks(link, runtime=GEMINI_CLI), Session(tmp_path)
    await hooks.handle(gemini.before(*delegate("one")))
    await hooks.handle(gemini.before(*delegate("two", "codebase_investigator")))
    gemini.subagent_starts()
    await hooks.handle(gemini.before(*shell("never answered")))
    await hooks.handle(gemini.after(*delegate("one"), output="done"))
    await hooks.handle(gemini.after(*delegate("two", "codebase_investigator"), output="done"))
    await hooks.handle(gemini.before(*shell()))
    assert who(events)[-1] == ("main", "run_shell_command")


async def test_the_end_of_a_turn_leaves_a_subagent_that_names_itself(link: GuardLink, tmp_path: Path) -> None:
    """Only the subagents the guard named for Gemini CLI end with the turn;
    one whose hooks carry an agent id of its own is left to its own end."""
    hooks, gemini = ClaudeHooks(link, runtime=GEMINI_CLI), Session(tmp_path)
    await hooks.handle({**gemini.before(*shell()), "agent_id": "helper-1"})
    await hooks.handle(gemini.before(*delegate()))
    gemini.subagent_starts()
    await hooks.handle(gemini.payload("AfterAgent", prompt_response="done"))
    assert sorted(a.agent.id for a in link.links()) == sorted(["helper-1", SESSION])


async def test_a_result_whose_call_was_never_seen_goes_to_the_running_subagent(link: GuardLink, tmp_path: Path) -> None:
    """An ``AfterTool`` without its ``BeforeTool`` (another hook refused to
    let the guard see it) while a subagent runs is recorded as that
    subagent's late call."""
    events = Capture().attach(link.bus)
    hooks, gemini = ClaudeHooks(link, runtime=GEMINI_CLI), Session(tmp_path)
    await hooks.handle(gemini.before(*delegate()))
    gemini.subagent_starts()
    await hooks.handle(gemini.after(*shell("ran unseen")))
    assert who(events)[-1] == ("generalist", "run_shell_command")


def test_no_folder_outside_gemini_clis_home_is_read(tmp_path: Path) -> None:
    """A client of ``serve`` names the transcript's path: the server reads
    no folder Gemini CLI would not have written (another user's, a huge
    or hung one), and a path holding a NUL is none."""
    elsewhere = tmp_path / "elsewhere" / "chats"
    (elsewhere / SESSION).mkdir(parents=True)
    (elsewhere / SESSION / "sub.jsonl").write_text("{}\n")
    for path in (elsewhere / "session-x.jsonl", tmp_path / ".gemini" / ".." / "elsewhere" / "chats" / "s.jsonl"):
        assert subagents_started({"session_id": SESSION, "transcript_path": str(path)}, 0.0) is None
    inside = tmp_path / ".gemini" / "tmp" / "p\x00" / "chats" / "session-x.jsonl"
    assert subagents_started({"session_id": SESSION, "transcript_path": str(inside)}, 0.0) is None


def test_gemini_clis_home_is_compared_as_a_path_however_it_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Gemini CLI writes the transcript's path normalised; the home as the
    user set it (``./``, ``x/..``, a trailing slash) names the same folder."""
    transcript = tmp_path / ".gemini" / "tmp" / "project" / "chats" / "session-x.jsonl"
    (transcript.parent / SESSION).mkdir(parents=True)
    (transcript.parent / SESSION / "sub.jsonl").write_text("{}\n")
    for home in (f"{tmp_path}/./", f"{tmp_path}/x/..", f"{tmp_path}//"):
        monkeypatch.setenv("GEMINI_CLI_HOME", home)
        assert subagents_started({"session_id": SESSION, "transcript_path": str(transcript)}, 0.0) == 1, home


def test_a_recordings_folder_is_read_no_further_than_its_first_1024_entries(tmp_path: Path) -> None:
    """A session runs a few subagents: a folder of thousands is no folder
    Gemini CLI made, and a hook reads no more of it than 1,024 entries."""
    transcript = tmp_path / ".gemini" / "tmp" / "project" / "chats" / "session-x.jsonl"
    folder = transcript.parent / SESSION
    folder.mkdir(parents=True)
    for n in range(1100):
        (folder / f"{n}.jsonl").touch()
    assert subagents_started({"session_id": SESSION, "transcript_path": str(transcript)}, 0.0) == 1024
