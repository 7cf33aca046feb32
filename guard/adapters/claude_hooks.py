"""The guard behind Claude Code's hook contract (the JSON on a hook's stdin
and the JSON it answers), shared by the Claude Agent SDK callbacks and the
``repeat-tool-guard hook`` command.

Seams: ``UserPromptSubmit`` (a user turn), ``PreToolUse`` (decide; a deny is
``permissionDecision: deny`` with the denial as its reason, and the denied
call is published as its result right away, since no post hook follows it),
``PostToolUse`` / ``PostToolUseFailure`` (publish the result; the guard's
messages go back as ``additionalContext``, never as a rewritten tool output),
``SubagentStart`` / ``SubagentStop`` (a subagent's life; its tool hooks carry
its ``agent_id``), ``SessionEnd`` (every agent of the session is disposed).
A halt request answers ``continue: false`` with the reason as ``stopReason``.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from guard.adapters._link import AgentLink, GuardLink, as_text
from guard.adapters._resume import resume_or_restart
from guard.config import Config, apply_environment

__all__ = [
    "HOOK_EVENTS",
    "SESSION_ID_RULE",
    "ClaudeHooks",
    "HookInputError",
    "default_state_dir",
    "is_session_id",
    "parse_payload",
    "run_hook",
]

HOOK_EVENTS: tuple[str, ...] = (
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "SubagentStart",
    "SubagentStop",
    "SessionEnd",
)
"""The hook events the guard listens to; any other event is answered with ``{}``."""


class ClaudeHooks:
    """Answers Claude Code hook payloads for the agents of one ``GuardLink``.

    The main agent of a session is the agent with the session's id; a
    subagent is its ``agent_id``, a child of the main agent. Hooks give no
    model response boundaries, so a step is inferred: a call that arrives
    while none of the agent's calls is running starts a new step, and calls
    that arrive while one runs (Claude Code's parallel tool use) share it.

    ``agents`` is the registry of live agents by id, when the same session is
    also driven through another seam (the resident server's events API keeps
    one per session); by default the link's live agents.
    """

    def __init__(self, link: GuardLink, agents: dict[str, AgentLink] | None = None) -> None:
        self.link = link
        self._agents = agents if agents is not None else {link_.agent.id: link_ for link_ in link.links()}

    async def handle(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """The hook's answer (the CLI's JSON form: ``continue``, not ``continue_``)."""
        event = payload.get("hook_event_name")
        if event == "SessionEnd":
            for agent in list(self._agents.values()):
                await agent.dispose()
            self._agents.clear()
            return {}
        if event not in HOOK_EVENTS:
            return {}
        agent = await self._agent(payload)
        if event == "UserPromptSubmit":
            await agent.user_message(str(payload.get("prompt", "")))
            return {}
        if event == "SubagentStop":
            del self._agents[agent.agent.id]
            await agent.dispose()
            return {}
        if event == "SubagentStart":
            return {}
        call_id = str(payload.get("tool_use_id", ""))
        if event == "PreToolUse" or not agent.has_call(call_id):
            # a post hook whose PreToolUse never reached the guard counts all the same
            if agent.open_calls() == 0:
                agent.begin_step()
            decision = await agent.call(call_id, str(payload.get("tool_name", "")), payload.get("tool_input"))
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

    async def _agent(self, payload: Mapping[str, Any]) -> AgentLink:
        session = str(payload.get("session_id") or "session")
        main = self._agents.get(session)
        if main is None:
            main = self._agents[session] = self.link.agent(session)
            await main.start()
        sub_id = payload.get("agent_id")
        if not sub_id:
            return main
        sub = self._agents.get(str(sub_id))
        if sub is None:
            sub = self._agents[str(sub_id)] = self.link.agent(str(sub_id), parent=main)
            await sub.start()
        return sub


def _answer(agent: AgentLink, event: str, call_id: str, specific: dict[str, Any]) -> dict[str, Any]:
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
        payload = json.loads(raw)
    except ValueError as exc:
        raise HookInputError(f"hook input is not JSON ({exc})") from None
    if not isinstance(payload, dict):
        raise HookInputError(f"hook input must be a JSON object, got {type(payload).__name__}")
    session = payload.get("session_id")
    if not is_session_id(session):
        raise HookInputError(f"hook input session_id = {session!r}: {SESSION_ID_RULE}")
    return payload


async def run_hook(payload: Mapping[str, Any], state_dir: Path, config: Config | None = None) -> dict[str, Any]:
    """Answer one hook invocation with per-session state kept in ``state_dir``.

    The session's events live in ``<state_dir>/<session_id>.jsonl`` (a normal
    session log: ``repeat-tool-guard replay`` reads it). Each invocation takes
    an exclusive lock on ``<session_id>.lock``, replays the log into a fresh
    guard, handles the payload, and appends the new events. A log that is not
    a session log any more is renamed ``*.unreadable-<time>`` and a new one begun.
    The environment's overrides (``apply_environment``) apply to ``config``.
    """
    config = apply_environment(config if config is not None else Config())
    session = str(payload["session_id"])
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = state_dir / f"{session}.jsonl"
    with open(state_dir / f"{session}.lock", "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        link, log = await resume_or_restart(path, session, config)
        with log:
            return await ClaudeHooks(link).handle(payload)
