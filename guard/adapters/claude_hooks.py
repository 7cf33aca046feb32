"""The guard behind Claude Code's hook contract (the JSON on a hook's stdin
and the JSON it answers), shared by the Claude Agent SDK callbacks and the
``repeat-tool-guard hook`` command.

Seams: ``UserPromptSubmit`` (a user turn, unless it is a background task's
``<task-notification>``), ``PreToolUse`` (decide; a deny is
``permissionDecision: deny`` with the denial as its reason, and the denied
call is published as its result right away, since no post hook follows it),
``PostToolUse`` / ``PostToolUseFailure`` (publish the result; the guard's
messages go back as ``additionalContext``, never as a rewritten tool output),
``PostToolBatch`` (the model response is over: ``agent/status``
``step-done``), ``Stop`` (a response without tool calls: ``idle``),
``SubagentStart`` / ``SubagentStop`` (a subagent's life; its tool hooks carry
its ``agent_id``), ``SessionEnd`` (every agent of the session is disposed).
A halt request answers ``continue: false`` with the reason as ``stopReason``."""

from __future__ import annotations

import fcntl
import os
import re
import shlex
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from bus import Decision, LogError, LogWriteError, open_regular
from guard._text import shown
from guard.config import Config, apply_environment
from guard.guard import Guard
from guard.sessions.link import AgentLink, GuardLink, as_text
from guard.sessions.snapshot import load_snapshot, save_snapshot, snapshot_path

__all__ = [
    "HOOK_EVENTS",
    "SESSION_ID_RULE",
    "ClaudeHooks",
    "HookInputError",
    "answer_hook",
    "default_state_dir",
    "hook_command",
    "hook_settings",
    "http_hook_settings",
    "is_session_id",
    "parse_payload",
    "run_hook",
    "run_to_completion",
]

T = TypeVar("T")

HOOK_EVENTS: tuple[str, ...] = (
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "PostToolBatch",
    "Stop",
    "SubagentStart",
    "SubagentStop",
    "SessionEnd",
)
"""The hook events the guard listens to; any other event is answered with ``{}``."""

_TOOL_EVENTS = frozenset({"PreToolUse", "PostToolUse", "PostToolUseFailure"})

_FAILED_MESSAGE = '{"systemMessage":"repeat-tool-guard hook failed (exit %s): the loop guard is off for this event"}'
_FAILED = "printf " + shlex.quote(_FAILED_MESSAGE + "\\n") + ' "$?"'


def hook_command(argv: Sequence[str]) -> str:
    """The shell command a Claude Code hook runs: ``argv`` (the hook command,
    by absolute path, so it runs whatever ``PATH`` Claude Code has), and when
    it cannot start or fails, a ``systemMessage`` that shows the user the
    guard is off, instead of Claude Code dropping the failure silently."""
    return f"{shlex.join(argv)} || {_FAILED}"


def hook_settings(argv: Sequence[str]) -> dict[str, Any]:
    """The ``hooks`` block of ``.claude/settings.json`` running ``hook_command(argv)``
    for every event in ``HOOK_EVENTS`` (tool events for every tool)."""
    return _settings({"type": "command", "command": hook_command(argv)})


def http_hook_settings(url: str, *, token_env: str | None = None) -> dict[str, Any]:
    """The ``hooks`` block of ``.claude/settings.json`` posting every event in
    ``HOOK_EVENTS`` to the resident server at ``url`` (its
    ``/hooks/claude-code``), with ``Authorization: Bearer $<token_env>`` when
    the server needs a token (Claude Code reads the variable from its own
    environment)."""
    handler: dict[str, Any] = {"type": "http", "url": url}
    if token_env is not None:
        handler["headers"] = {"Authorization": f"Bearer ${token_env}"}
        handler["allowedEnvVars"] = [token_env]
    return _settings(handler)


def _settings(handler: dict[str, Any]) -> dict[str, Any]:
    return {
        "hooks": {
            event: [{"matcher": "*", "hooks": [handler]} if event in _TOOL_EVENTS else {"hooks": [handler]}]
            for event in HOOK_EVENTS
        }
    }


TASK_NOTIFICATION = "<task-notification>"
"""How the prompt starts when Claude Code reports a finished background task
(a subagent run in the background) through ``UserPromptSubmit``: no user turn."""

MAX_SESSIONS = 256
"""How many sessions one ``ClaudeHooks`` keeps live by default (see ``max_sessions``)."""


class ClaudeHooks:
    """Answers Claude Code hook payloads for the agents of one ``GuardLink``.

    The main agent of a session is the agent with the session's id; a
    subagent is its ``agent_id``, a child of the main agent. A step is one
    model response: Claude Code sends ``PostToolBatch`` once a response's tool
    calls have all run (and ``Stop`` when a response called none), so the
    next call starts a new step. With ``steps_reported`` false (the hook
    command: the installed Claude Code may predate ``PostToolBatch``) steps
    are inferred until an agent's first ``PostToolBatch``: a call that
    arrives while none of the agent's calls is running starts a new step.

    ``SessionEnd`` disposes a session's agents, but the Claude Agent SDK
    never sends it; so at most ``max_sessions`` sessions stay live, and the
    least recently active one is disposed (with its subagents) to make room.
    """

    def __init__(self, link: GuardLink, *, max_sessions: int = MAX_SESSIONS, steps_reported: bool = False) -> None:
        if max_sessions < 1:
            raise ValueError(f"max_sessions must be >= 1, got {max_sessions}")
        self.link = link
        self._max = max_sessions
        self._steps_reported = steps_reported
        self._sessions: OrderedDict[str, AgentLink] = OrderedDict()
        self._subagents: dict[str, AgentLink] = {}
        for agent in link.links():
            if agent.agent.parent_id is None:
                self._sessions[agent.agent.id] = agent
            else:
                self._subagents[agent.agent.id] = agent

    async def handle(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """The hook's answer (the CLI's JSON form: ``continue``, not ``continue_``)."""
        event = payload.get("hook_event_name")
        if event not in HOOK_EVENTS:
            return {}
        if event == "SessionEnd":
            await self._end_session(str(payload.get("session_id") or "session"))
            return {}
        agent = await self._agent(payload)
        if event == "UserPromptSubmit":
            prompt = str(payload.get("prompt", ""))
            if not prompt.lstrip().startswith(TASK_NOTIFICATION):  # a background task reporting back
                await agent.user_message(prompt)
            return {}
        if event == "SubagentStop":
            del self._subagents[agent.agent.id]
            await agent.dispose()
            return {}
        if event == "SubagentStart":
            return {}
        if event == "PostToolBatch":
            await self._batch(agent, payload.get("tool_calls"))
            return _answer(agent, event, None, {})
        if event == "Stop":
            await agent.idle()
            return _answer(agent, event, None, {})
        call_id = str(payload.get("tool_use_id", ""))
        if event == "PreToolUse" or not agent.has_call(call_id):
            # a post hook whose PreToolUse never reached the guard counts all the same
            decision = await self._call(agent, call_id, payload)
        if event == "PreToolUse":
            if decision.allowed:
                return _answer(agent, event, call_id, {})
            await agent.denied(call_id, decision)
            specific = {"permissionDecision": "deny", "permissionDecisionReason": decision.reason or ""}
            return _answer(agent, event, call_id, specific)
        if event == "PostToolUse":
            await agent.result(call_id, as_text(payload.get("tool_response")))
        else:
            await agent.result(call_id, str(payload.get("error", "")), is_error=True)
        return _answer(agent, event, call_id, {})

    async def _call(self, agent: AgentLink, call_id: str, payload: Mapping[str, Any]) -> Decision:
        if agent.step == 0 or agent.step_done or (not agent.steps_reported and agent.open_calls() == 0):
            agent.begin_step()
        return await agent.call(call_id, str(payload.get("tool_name", "")), payload.get("tool_input"))

    async def _batch(self, agent: AgentLink, calls: Any) -> None:
        """The response is over. A call it lists that is still open (no post
        hook reported it: those hooks are not registered) gets its result now."""
        for entry in calls if isinstance(calls, list) else ():
            call_id = str(entry.get("tool_use_id", "")) if isinstance(entry, dict) else ""
            if agent.has_call(call_id):
                await agent.result(call_id, as_text(entry.get("tool_response")))
        await agent.end_step()

    async def _agent(self, payload: Mapping[str, Any]) -> AgentLink:
        session = str(payload.get("session_id") or "session")
        main = self._sessions.get(session)
        if main is None:
            main = self._sessions[session] = self.link.agent(session)
            main.steps_reported = self._steps_reported
            await main.start()
            while len(self._sessions) > self._max:
                await self._end_session(next(iter(self._sessions)))
        else:
            self._sessions.move_to_end(session)
        sub_id = payload.get("agent_id")
        if not sub_id:
            return main
        sub = self._subagents.get(str(sub_id))
        if sub is None:
            sub = self._subagents[str(sub_id)] = self.link.agent(str(sub_id), parent=main)
            sub.steps_reported = main.steps_reported
            await sub.start()
        return sub

    async def _end_session(self, session: str) -> None:
        main = self._sessions.pop(session, None)
        for sub_id, sub in list(self._subagents.items()):
            if sub.agent.parent_id == session:
                del self._subagents[sub_id]
                await sub.dispose()
        if main is not None:
            await main.dispose()


def _answer(agent: AgentLink, event: str, call_id: str | None, specific: dict[str, Any]) -> dict[str, Any]:
    context = agent.take_context(call_id)
    if context:
        specific["additionalContext"] = "\n\n".join(context)
    answer: dict[str, Any] = {}
    if specific:
        answer["hookSpecificOutput"] = {"hookEventName": event, **specific}
    if agent.halt_reason is not None:
        answer["continue"] = False
        answer["stopReason"] = agent.halt_reason
    return answer


_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


SESSION_ID_RULE = "must be 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit"


def is_session_id(value: object) -> bool:
    """Whether ``value`` can name a session: 1-128 letters, digits, '.', '_'
    or '-', not starting with a punctuation mark, so it is safe as a file name
    in the state directory."""
    return isinstance(value, str) and _SESSION_ID.fullmatch(value) is not None


def default_state_dir() -> Path:
    """``$REPEAT_TOOL_GUARD_STATE``, else ``$XDG_STATE_HOME/repeat-tool-guard``,
    else ``~/.local/state/repeat-tool-guard``."""
    explicit = os.environ.get("REPEAT_TOOL_GUARD_STATE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "repeat-tool-guard"


class HookInputError(ValueError):
    """The hook's stdin is not a Claude Code hook payload; the message says why."""


def parse_payload(raw: bytes) -> dict[str, Any]:
    """The hook payload on stdin, checked for what the guard relies on."""
    try:
        payload = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise HookInputError(f"hook input is not JSON ({exc})") from None
    if not isinstance(payload, dict):
        raise HookInputError(f"hook input must be a JSON object, got {type(payload).__name__}")
    session = payload.get("session_id")
    if not is_session_id(session):
        raise HookInputError(f"hook input session_id = {shown(session)}: {SESSION_ID_RULE}")
    return payload


async def run_hook(
    payload: Mapping[str, Any],
    state_dir: Path,
    config: Config | None = None,
    *,
    log_actions: bool = True,
    on_replay: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Answer one hook invocation with per-session state kept in ``state_dir``.

    The session's events live in ``<state_dir>/<session_id>.jsonl`` (a normal
    session log with one header: ``repeat-tool-guard replay`` reads it), and
    the guard's state as of the log's end in ``<session_id>.snapshot``. Each
    invocation takes an exclusive lock on ``<session_id>.lock``, restores the
    guard from the snapshot, handles the payload, appends the new events and
    saves a new snapshot: constant work per call, however long the session.
    When the snapshot cannot be used (see ``guard.sessions.snapshot``), the
    log is replayed instead and ``on_replay`` is told why. A log that is not a
    session log any more is renamed ``*.unreadable-<time>`` and a new one begun.
    ``log_actions`` is ``Guard``'s.
    The environment's overrides (``apply_environment``) apply to ``config``.
    Both files are created 0600; the log is not written through a symbolic
    link. An event the log could not record (a full disk) raises ``LogWriteError``
    once the payload is handled, and the log is left whole.
    """
    config = apply_environment(config if config is not None else Config())
    session = str(payload["session_id"])
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = state_dir / f"{session}.jsonl"
    saved = snapshot_path(path)
    lock = open_regular(state_dir / f"{session}.lock", os.O_RDWR | os.O_CREAT, 0o600, what="lock file")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        guard = Guard(config, log_actions=log_actions)
        restored = load_snapshot(saved, path, session, guard)
        if isinstance(restored, str):
            from guard.sessions.resume import resume_link  # only when the snapshot cannot be used

            if on_replay is not None and (path.exists() or saved.exists()):
                on_replay(f"{restored}; replaying {str(path)!r}")
            guard = Guard(config, log_actions=log_actions)
            try:
                restored = await resume_link(path, session, guard=guard, mark_resume=False)
            except LogError:
                path.rename(path.with_name(f"{path.name}.unreadable-{time.time_ns()}"))
                restored = await resume_link(path, session, guard=guard, mark_resume=False)
        link, log = restored
        with log:
            answer = await ClaudeHooks(link).handle(payload)
            if log.error is None:  # a log short of an event gets no snapshot: the next call replays it
                save_snapshot(saved, link, guard, log)
    finally:
        os.close(lock)
    if log.error is not None:
        raise LogWriteError(log.error.errno, f"{log.failures} event(s) not recorded: {log.error}")
    return answer


def answer_hook(
    payload: Mapping[str, Any],
    state_dir: Path,
    config: Config | None = None,
    *,
    log_actions: bool = True,
    on_replay: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """``run_hook`` for a process of its own (the ``hook`` command), run to
    completion without an event loop: one hook event has nothing to wait for
    but ``rescue``'s ask, which starts a loop of its own when it runs. So the
    process pays for importing and starting one only when it asks.
    """
    return run_to_completion(run_hook(payload, state_dir, config, log_actions=log_actions, on_replay=on_replay))


def run_to_completion(coroutine: Coroutine[Any, Any, T]) -> T:
    """The result of a coroutine that never suspends, run without an event
    loop; one that does suspend is closed and is a ``RuntimeError``."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coroutine.close()
    raise RuntimeError("the coroutine waited on an event loop, and none is running")
