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
its ``agent_id``), ``PreCompact`` (the conversation is compacted:
``agent/status`` ``compacted``), ``SessionEnd`` (every agent of the session
is disposed). A halt request answers ``continue: false`` with the reason as
``stopReason``.

The same core answers the other CLIs whose hooks follow this contract
(Codex, Gemini CLI): a ``HookRuntime`` maps a CLI's events onto these seams
and writes its answers (``guard.adapters.codex_hooks``,
``guard.adapters.gemini_hooks``)."""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import msgspec

from bus import ALLOW, Agent, AgentStatus, Decision
from bus._codec import lenient_json, logged_args
from guard._regex import lazy_compile
from guard._tags import without_ide_context
from guard._text import shown
from guard.config import Config, apply_environment
from guard.hook_forward import ANSWER_TIMEOUT, FORWARDING_MAIN, WAIT_HEADER
from guard.sessions.answer import Answer, KeptAnswer, call_digest, result_digest, retry_key
from guard.sessions.hook_state import hook_session
from guard.sessions.link import AgentLink, GuardLink, as_text
from guard.sessions.live import LiveTable

__all__ = [
    "CLAUDE_CODE",
    "HALTED_BY",
    "HOOK_EVENTS",
    "SESSION_ID_RULE",
    "ClaudeHooks",
    "HookInputError",
    "HookRuntime",
    "answer_hook",
    "check_env_name",
    "default_state_dir",
    "forward_command",
    "hook_command",
    "hook_settings",
    "http_hook_settings",
    "is_guard_command",
    "is_session_id",
    "parse_payload",
    "path_command",
    "payload_text",
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
    "PreCompact",
    "SessionEnd",
)
"""The hook events the guard listens to; any other event is answered with ``{}``."""

HALTED_BY = "repeat-tool-guard/halted"
"""``denied_by`` of a call a runtime that cannot end a run denied because the
guard had asked to halt its agent (no policy's denial: replay keeps it as recorded)."""

_TOOL_SEAMS = frozenset({"pre", "post", "post-error"})
_REFUSED_BY_CLI = "<tool_use_error>"
"""How Claude Code answers a call it refused before running it."""

_FAILED_MESSAGE = '{"systemMessage":"repeat-tool-guard hook failed (exit %s): the loop guard is off for this event"}'
_FAILED = "printf " + shlex.quote(_FAILED_MESSAGE + "\\n") + ' "$?"'


def hook_command(argv: Sequence[str]) -> str:
    """The shell command a hook runs: ``argv`` (the hook command, by absolute
    path, so it runs whatever ``PATH`` the CLI has), and when it cannot start
    (a missing binary or interpreter) or fails, a ``systemMessage`` that shows
    the user the guard is off, exiting 0: every CLI lets the call run then,
    where exit 2 or an unstartable command would block it."""
    return f"{shlex.join(argv)} || {_FAILED}"


_ASSIGNMENT = lazy_compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_PYTHON = lazy_compile(r"python[0-9.]*t?")
_PYTHON_FLAGS = lazy_compile(r"-[BEIPRSbdqsuv]+")


def is_guard_command(command: str) -> bool:
    """Whether ``command`` is a hook command the guard wrote
    (``hook_command``, ``path_command``, ``forward_command``: each holds
    the guard's failure message, as the guard writes it) or one that runs
    its ``hook`` command: a ``repeat-tool-guard`` by any path, or a Python
    interpreter running ``-m guard`` or ``-c FORWARDING_MAIN`` (the
    forwarding hook's), as the command's first word (after
    any variable assignments), then the word ``hook``. A user's own command
    that merely mentions the guard (``repeat-tool-guard audit ...``,
    ``repeat-tool-guard hook-settings ...``, ``grep "repeat-tool-guard hook"
    ...``) is not."""
    return _FAILED in command or _runs_hook(_first_words(command))


def _first_words(command: str) -> list[str]:
    """The words of ``command``'s first simple command, as the shell splits
    them (quotes taken off), up to the first operator (``||``, ``;``,
    ``>``, ...); none when the shell could not read it (a quote left open)."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    words: list[str] = []
    try:
        for word in lexer:
            if not word.strip(lexer.punctuation_chars):
                break
            words.append(word)
    except ValueError:
        return []
    return words


def _runs_hook(words: list[str]) -> bool:
    """Whether ``words`` run the guard's ``hook`` command."""
    while words and _ASSIGNMENT.match(words[0]):
        words = words[1:]
    if not words:
        return False
    name = os.path.basename(words[0])
    if name == "repeat-tool-guard":
        return words[1:2] == ["hook"]
    if _PYTHON.fullmatch(name) is None:
        return False
    rest = words[1:]
    while rest and _PYTHON_FLAGS.fullmatch(rest[0]):
        rest = rest[1:]
    return rest[:3] in (["-m", "guard", "hook"], ["-c", FORWARDING_MAIN, "hook"])


def path_command(argv: Sequence[str]) -> str:
    """The shell command a hook runs where the guard's path is not known (a
    plugin): ``argv`` with its first word looked up on ``PATH``; when it is
    not there, a ``systemMessage`` saying so and exit 0 (the call goes ahead),
    and when it fails, ``hook_command``'s message."""
    name = shlex.quote(argv[0])
    missing = shlex.quote('{"systemMessage":"' + f"{argv[0]} is not on PATH: the loop guard is off" + '"}')
    return f"if command -v {name} >/dev/null 2>&1; then {hook_command(argv)}; else printf '%s\\n' {missing}; fi"


def check_env_name(name: str) -> str:
    """``name`` if it can name an environment variable (ASCII letters,
    digits and ``_``, not starting with a digit), else ``ValueError``: the
    name goes into a shell command and a settings file as it is."""
    if not (name.isascii() and name.isidentifier()):
        raise ValueError(
            f"--token-env {name!r}: not an environment variable's name"
            " (letters, digits and _, not starting with a digit)"
        )
    return name


def forward_command(url: str, *, token_env: str | None = None) -> str:
    """A command hook that posts the payload on stdin to the resident guard
    at ``url`` with curl (for CLIs without HTTP hooks), failing open like
    ``hook_command`` when curl is missing or the server does not answer
    within ``ANSWER_TIMEOUT``, which it tells the server (``WAIT_HEADER``).
    With ``token_env``, the bearer token is read from that variable into a
    header curl reads from a file descriptor, so it is never in curl's
    command line.
    ``ValueError`` when ``token_env`` is no variable's name."""
    wait = f"{ANSWER_TIMEOUT:g}"
    argv = ["curl", "-sSf", "--max-time", wait, "-H", "Content-Type: application/json", "-H", f"{WAIT_HEADER}: {wait}"]
    argv += ["--data-binary", "@-"]
    if token_env is None:
        return f"{shlex.join(argv)} {shlex.quote(url)} || {_FAILED}"
    # The token goes to curl as a header file on fd 3 (a here-document), never in its
    # arguments, which every local user can read (ps, /proc/<pid>/cmdline).
    name = check_env_name(token_env)
    return (
        f"{shlex.join(argv)} -H @/dev/fd/3 {shlex.quote(url)} 3<<REPEAT_TOOL_GUARD_TOKEN || {_FAILED}\n"
        f"Authorization: Bearer ${name}\nREPEAT_TOOL_GUARD_TOKEN"
    )


def hook_settings(argv: Sequence[str], runtime: HookRuntime | None = None) -> dict[str, Any]:
    """The ``hooks`` block of ``runtime``'s settings (Claude Code's
    ``.claude/settings.json`` by default) running ``hook_command(argv)`` for
    every event the guard listens to (tool events for every tool)."""
    return (runtime or CLAUDE_CODE).settings({"type": "command", "command": hook_command(argv)})


def http_hook_settings(url: str, *, token_env: str | None = None) -> dict[str, Any]:
    """The ``hooks`` block of ``.claude/settings.json`` posting every event in
    ``HOOK_EVENTS`` to the resident server at ``url`` (its
    ``/hooks/claude-code``), with ``Authorization: Bearer $<token_env>`` when
    the server needs a token (Claude Code reads the variable from its own
    environment), waiting ``ANSWER_TIMEOUT`` seconds for the answer, as
    the forwarding hooks do, and telling the server so (``WAIT_HEADER``).
    ``ValueError`` when ``token_env`` is no variable's name."""
    handler: dict[str, Any] = {"type": "http", "url": url, "timeout": int(ANSWER_TIMEOUT)}
    headers = {WAIT_HEADER: f"{ANSWER_TIMEOUT:g}"}
    if token_env is not None:
        check_env_name(token_env)
        headers["Authorization"] = f"Bearer ${token_env}"
        handler["allowedEnvVars"] = [token_env]
    handler["headers"] = headers
    return CLAUDE_CODE.settings(handler)


def payload_text(payload: Mapping[str, Any], key: str) -> str:
    """The hook field ``key`` as text: a string as it is, a number in
    decimal, anything else (missing, ``null``, an object) empty. A field of
    the wrong type says nothing the guard can use, so it is never read as
    its Python form (``None``, ``{'x': 1}``)."""
    value = payload.get(key)
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return ""


TASK_NOTIFICATION = "<task-notification>"
"""How the prompt starts when Claude Code reports a finished background task
(a subagent run in the background) through ``UserPromptSubmit``: no user turn."""

MAX_SESSIONS = 256
"""How many sessions one ``ClaudeHooks`` keeps live by default (see ``max_sessions``)."""

_EMPTY_RESULT = result_digest("", False)


class HookRuntime:
    """How one CLI's hooks map onto the guard's seams and how its answers look;
    this one is Claude Code's, and the other CLIs' runtimes override what differs.

    ``seams`` maps each hook event the guard listens to onto what it means:
    ``prompt``, ``pre`` (a call is about to run), ``post`` / ``post-error``
    (it ran), ``batch`` (a model response's calls all ran), ``idle`` (a
    response called no tool), ``subagent-start``, ``subagent-stop`` (the
    subagent is gone), ``subagent-idle`` (its turn is over, it may get
    another), ``compacted`` and ``session-end``. ``cosmetic_args`` are the
    top-level arguments of a tool that the CLI has the model reword on every
    call (a description for the user): they are left out of the call the
    guard sees, at this edge only, so the policies' own ``ignored_args``
    defaults stay what they are for in-process users. ``ends_runs`` says
    whether a tool hook can end the run (``continue: false``); where it
    cannot, a halted agent's further calls are denied until the next user
    prompt (``HALTED_BY``).
    """

    name: ClassVar[str] = "claude-code"
    seams: ClassVar[Mapping[str, str]] = {
        "UserPromptSubmit": "prompt",
        "PreToolUse": "pre",
        "PostToolUse": "post",
        "PostToolUseFailure": "post-error",
        "PostToolBatch": "batch",
        "Stop": "idle",
        "SubagentStart": "subagent-start",
        "SubagentStop": "subagent-stop",
        "PreCompact": "compacted",
        "SessionEnd": "session-end",
    }
    cosmetic_args: ClassVar[Mapping[str, frozenset[str]]] = {
        "Bash": frozenset({"description"}),
        "SendMessage": frozenset({"summary"}),  # the transcript's label; the message is sent, not it
        "ScheduleWakeup": frozenset({"reason"}),
    }
    ends_runs: ClassVar[bool] = True
    project_trust: ClassVar[str] = ""
    """What a project install adds when the CLI runs a project's hooks only
    once the project is trusted (``{project}``: its path as JSON); until
    then the guard is silently off."""
    hook_trust: ClassVar[str] = ""
    """What every install adds when the CLI runs new hooks only once the
    user has trusted them; until then the guard is silently off."""

    @property
    def events(self) -> tuple[str, ...]:
        """The hook events to register, in the order the settings list them."""
        return tuple(self.seams)

    def seam(self, payload: Mapping[str, Any]) -> str | None:
        """The guard's seam for the payload's ``hook_event_name``; ``None``
        for an event the guard does not follow (a name that is not a string,
        a list say, is no event at all)."""
        event = payload.get("hook_event_name")
        return self.seams.get(event) if isinstance(event, str) else None

    def settings(self, handler: Mapping[str, Any]) -> dict[str, Any]:
        """The ``hooks`` block that runs ``handler`` for every event in ``events``."""
        groups = {
            event: [
                {"matcher": "*", "hooks": [dict(handler)]}
                if self.seams[event] in _TOOL_SEAMS
                else {"hooks": [dict(handler)]}
            ]
            for event in self.events
        }
        return {"hooks": groups}

    def tool_input(self, payload: Mapping[str, Any]) -> Any:
        """The call's arguments as the guard sees them (``cosmetic_args`` left
        out) and the log holds them (``logged_args``: a hook's snapshot keeps
        them)."""
        args = logged_args(payload.get("tool_input"))
        cosmetic = self.cosmetic_args.get(payload_text(payload, "tool_name"))
        if cosmetic and isinstance(args, dict) and not cosmetic.isdisjoint(args):
            return {key: value for key, value in args.items() if key not in cosmetic}
        return args

    def reports_no_result(self, tool: str, args: Any) -> bool:
        """Whether the CLI runs this call with a pre hook and no result hook:
        such a call is closed as soon as it is allowed (its result empty),
        so an edit counts as progress and no call stays open for good."""
        return False

    def call_id(self, agent: AgentLink, payload: Mapping[str, Any], seam: str) -> str:
        """The id that pairs a call's ``pre`` and ``post`` events."""
        return payload_text(payload, "tool_use_id")

    async def attribute(self, hooks: ClaudeHooks, main: AgentLink, payload: Mapping[str, Any], seam: str) -> AgentLink:
        """The agent a tool hook whose payload names no agent (no
        ``agent_id``) is about: the session's ``main`` agent, unless the CLI
        runs subagents whose hooks name none (Gemini CLI's)."""
        return main

    async def settled(
        self, hooks: ClaudeHooks, agent: AgentLink, call_id: str, tool: str, args: Any, *, running: bool
    ) -> None:
        """A tool hook of ``agent`` was answered: its call ``call_id`` is
        ``running`` (allowed, its result to come), or over (denied, or its
        result recorded)."""

    async def turn_over(self, hooks: ClaudeHooks, main: AgentLink) -> None:
        """The ``main`` agent's turn is over (its response called no tool) or
        a new one begins (a user prompt)."""

    def result(self, payload: Mapping[str, Any], seam: str) -> tuple[str, bool]:
        """What the tool returned, as the model reads it, and whether it failed."""
        if seam == "post":
            return as_text(payload.get("tool_response")), False
        error = payload.get("error")
        return (as_text(error) if error is not None else ""), True

    def prompt(self, payload: Mapping[str, Any]) -> str | None:
        """The user's prompt, without what an IDE integration put in it (the
        open file, the selected lines: they are not the user's words), or
        None when the event is no user turn."""
        prompt = payload_text(payload, "prompt")
        if prompt.lstrip().startswith(TASK_NOTIFICATION):
            return None  # a background task reporting back
        said = without_ide_context(prompt)
        return None if prompt and not said else said  # only an IDE's blocks: no user turn

    def denial(self, event: str, reason: str) -> dict[str, Any]:
        """The answer that stops a call before it runs."""
        return {
            "hookSpecificOutput": {
                "hookEventName": event,
                "permissionDecision": "deny",
                "permissionDecisionReason": reason,
            }
        }

    def delivers(self, seam: str, denied: bool) -> bool:
        """Whether the answer at ``seam`` (a denial when ``denied``) shows the
        model the guard's pending messages; where it does not, they wait for
        an answer that does. Claude Code reads ``additionalContext`` on every
        hook that answers one."""
        return True

    def answer(self, event: str, seam: str, answer: Answer) -> dict[str, Any]:
        """``answer`` in the CLI's format: the denial, the guard's messages for
        the model, and the halt request."""
        decision = answer.decision
        out = self.denial(event, decision.reason or "") if decision is not None and not decision.allowed else {}
        if answer.messages:
            specific = out.setdefault("hookSpecificOutput", {"hookEventName": event})
            specific["additionalContext"] = "\n\n".join(message.text for message in answer.messages)
        if answer.halt is not None and self.ends_runs:
            out["continue"] = False
            out["stopReason"] = answer.halt
        return out


CLAUDE_CODE = HookRuntime()
"""Claude Code's hooks (also the Claude Agent SDK's callbacks)."""


class ClaudeHooks:
    """Answers the hook payloads of one CLI (``runtime``, Claude Code by
    default) for the agents of one ``GuardLink``.

    The main agent of a session is the agent with the session's id; a
    subagent is its ``agent_id``, a child of the main agent. A step is one
    model response: Claude Code sends ``PostToolBatch`` once a response's tool
    calls have all run (and ``Stop`` when a response called none), so the
    next call starts a new step. With ``steps_reported`` false (the hook
    command: the installed Claude Code may predate ``PostToolBatch``) steps
    are inferred until an agent's first ``PostToolBatch``: a call that
    arrives once the agent's latest call is over (its result came, or it
    was denied) starts a new step, whether or not an older call is still
    open (one the CLI never ran: another hook or the user refused it).

    ``SessionEnd`` disposes a session's agents, but the Claude Agent SDK
    never sends it; so at most ``max_sessions`` sessions stay live, and the
    least recently active one is disposed (with its subagents) to make room.
    """

    def __init__(
        self,
        link: GuardLink,
        *,
        max_sessions: int = MAX_SESSIONS,
        steps_reported: bool = False,
        runtime: HookRuntime = CLAUDE_CODE,
    ) -> None:
        self._sessions: LiveTable[str, AgentLink] = LiveTable(max_sessions)
        self.link = link
        self.runtime = runtime
        self._steps_reported = steps_reported
        self._subagents: dict[str, AgentLink] = {}
        # the last denials and results answered, by retry_key, with what they answered
        self._answered: LiveTable[str, KeptAnswer] = link.answers
        for agent in link.links():
            if agent.agent.parent_id is None:
                self._sessions.restore(agent.agent.id, agent)
            else:
                self._subagents[agent.agent.id] = agent

    async def handle(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """The hook's answer (the CLI's JSON form: ``continue``, not ``continue_``)."""
        runtime = self.runtime
        seam = runtime.seam(payload)
        if seam is None:
            return {}
        event = str(payload["hook_event_name"])
        if seam == "session-end":
            await self._end_session(str(payload.get("session_id") or "session"))
            return {}
        if seam in _TOOL_SEAMS and (copy := self._copy_for_gone(payload, event, seam)) is not None:
            return copy
        agent = await self._agent(payload)
        if seam in _TOOL_SEAMS and agent.agent.parent_id is None:
            agent = await runtime.attribute(self, agent, payload, seam)
        seq = self.link.bus.seq + 1  # the seq of the event this hook publishes first
        if seam == "prompt":
            await runtime.turn_over(self, agent)
            prompt = runtime.prompt(payload)
            if prompt is not None:
                await agent.user_message(prompt)
                for sub in list(self._subagents.values()):
                    # a halted subagent the main agent may send more work: the user's turn lifts its halt too
                    if sub.agent.parent_id == agent.agent.id and sub.halt_reason is not None:
                        await sub.user_message(prompt)
            return {}
        if seam == "subagent-stop":
            if agent.agent.parent_id is not None:
                await self.end_subagent(agent)
            return {}
        if seam == "subagent-start":
            return {}
        if seam == "compacted":
            await agent.bus.publish(AgentStatus(agent=agent.agent, status="compacted"))
            return {}
        if seam == "batch":
            await self._batch(agent, payload.get("tool_calls"))
            return self._answer(agent, event, seam, seq)
        if seam in ("idle", "subagent-idle"):
            await agent.idle()
            if seam == "idle" and agent.agent.parent_id is None:
                await runtime.turn_over(self, agent)
            return self._answer(agent, event, seam, seq)
        call_id = runtime.call_id(agent, payload, seam)
        if seam == "pre":
            call = (payload_text(payload, "tool_name"), runtime.tool_input(payload))
            if call_id and any((c.tool, c.args) == call for c in agent.running_namesakes(call_id)):
                # a copy of the pre hook of a call still running (its answer was
                # lost), also when the id names other open calls: allowed then,
                # so allowed now, and counted once
                return self._answer(agent, event, seam, seq, call_id, ALLOW)
            digest = call_digest(*call)
            copy = self._copy(agent, "tool/call", call_id, digest, event, seam)
            if copy is not None:
                return copy
            if call_id and runtime.reports_no_result(*call) and self._closed_at_pre(agent, call_id):
                # a copy of such a call's pre hook once its session was rebuilt from
                # its log, which holds the call and its empty result: allowed then, so now
                return self._answer(agent, event, seam, seq, call_id, ALLOW)
            decision = await self._call(agent, call_id, *call)
            if decision.allowed and agent.halt_reason is not None and not runtime.ends_runs:
                decision = Decision.deny(agent.halt_reason, HALTED_BY)
            if decision.allowed and not runtime.reports_no_result(*call):
                out = self._answer(agent, event, seam, seq, call_id, decision)
            elif decision.allowed:
                reply = self._reply(agent, seam, seq, call_id, decision)
                await self._close(agent, call_id, "")
                out = self._keep(agent, "tool/call", call_id, digest, event, seam, reply)
            else:
                await self._close(agent, call_id, denial=decision)
                reply = self._reply(agent, seam, seq, call_id, decision)
                out = self._keep(agent, "tool/call", call_id, digest, event, seam, reply)
            running = decision.allowed and not runtime.reports_no_result(*call)
            await runtime.settled(self, agent, call_id, *call, running=running)
            return out
        content, is_error = runtime.result(payload, seam)
        digest = result_digest(content, is_error)
        if not agent.has_call(call_id):
            # the same text for a call already answered is a copy, failed or not: a batch answers a
            # call no post hook reported as a failure, and such a hook arriving after it is a copy
            copy = self._copy(agent, "tool/result", call_id, digest, event, seam, result_digest(content, not is_error))
            if copy is not None:
                return copy
            # a post hook whose pre hook never reached the guard counts all the
            # same, as a late call: the tool ran, so nothing is denied
            await self._call(agent, call_id, payload_text(payload, "tool_name"), runtime.tool_input(payload), late=True)
        await self._close(agent, call_id, content, is_error=is_error)
        out = self._keep(agent, "tool/result", call_id, digest, event, seam, self._reply(agent, seam, seq, call_id))
        tool = payload_text(payload, "tool_name")
        await runtime.settled(self, agent, call_id, tool, runtime.tool_input(payload), running=False)
        return out

    def _copy(
        self, agent: AgentLink, kind: str, call_id: str, digest: bytes, event: str, seam: str, alike: bytes = b""
    ) -> dict[str, Any] | None:
        """The answer kept for a copy of a denied pre hook (``kind``
        ``tool/call``) or of a result hook (``tool/result``): same call id,
        same content (``digest``). A call id some model endpoint uses again
        for a new call, with other content or after the last one's result,
        is a new call. The answers are kept runtime-neutral (a session
        rebuilt from its record gets them back: ``guard.sessions.resume``)
        and put in this runtime's format for the copy; ``alike`` is another
        digest that counts as the same."""
        kept = self._answered.peek(retry_key(kind, agent.agent.id, call_id)) if call_id else None
        if kept is None or (kept.digest != digest and kept.digest != alike):
            return None
        return self.runtime.answer(event, seam, kept.answer)

    def _closed_at_pre(self, agent: AgentLink, call_id: str) -> bool:
        """Whether ``call_id`` names a call closed as it was allowed, with an
        empty result (``HookRuntime.reports_no_result``), that a rebuilt
        session keeps as a result hook's answer."""
        kept = self._answered.peek(retry_key("tool/result", agent.agent.id, call_id))
        return kept is not None and kept.digest == _EMPTY_RESULT

    def _copy_for_gone(self, payload: Mapping[str, Any], event: str, seam: str) -> dict[str, Any] | None:
        """The kept answer for a copy of a pre or result hook whose agent is
        no longer live (its session ended, or its subagent stopped, since
        the hook was first delivered): the copy gets it, and the agent is
        not started again for it. ``None`` while the agent is live (the
        hook's own path tells its copies) or for no copy."""
        session = str(payload.get("session_id") or "session")
        agent_id = payload_text(payload, "agent_id") or session
        if (agent_id in self._subagents) if agent_id != session else (self._sessions.peek(session) is not None):
            return None
        gone = AgentLink(self.link, Agent(agent_id))  # names the agent only: never started
        call_id = self.runtime.call_id(gone, payload, seam)
        if seam == "pre":
            digest = call_digest(payload_text(payload, "tool_name"), self.runtime.tool_input(payload))
            return self._copy(gone, "tool/call", call_id, digest, event, seam)
        content, is_error = self.runtime.result(payload, seam)
        digest, alike = result_digest(content, is_error), result_digest(content, not is_error)
        return self._copy(gone, "tool/result", call_id, digest, event, seam, alike)

    def _keep(
        self, agent: AgentLink, kind: str, call_id: str, digest: bytes, event: str, seam: str, answer: Answer
    ) -> dict[str, Any]:
        """Keep ``answer`` (with the ``digest`` of what asked it) for a copy
        of its hook event, of the link's last ``ANSWERS_KEPT``; return it in
        the runtime's format."""
        if call_id:
            self._answered.add(retry_key(kind, agent.agent.id, call_id), KeptAnswer(digest, answer))
        return self.runtime.answer(event, seam, answer)

    def _answer(
        self,
        agent: AgentLink,
        event: str,
        seam: str,
        seq: int,
        call_id: str | None = None,
        decision: Decision | None = None,
    ) -> dict[str, Any]:
        """The guard's ``Answer`` at this hook, in the runtime's format."""
        return self.runtime.answer(event, seam, self._reply(agent, seam, seq, call_id, decision))

    def _reply(
        self, agent: AgentLink, seam: str, seq: int, call_id: str | None = None, decision: Decision | None = None
    ) -> Answer:
        """The guard's ``Answer`` at this hook; the pending messages are
        taken only where the runtime shows them."""
        denied = decision is not None and not decision.allowed
        if self.runtime.delivers(seam, denied):
            return agent.answer(seq, decision, call_id)
        return Answer(seq=seq, decision=decision, halt=agent.halt_reason)

    async def _call(
        self, agent: AgentLink, call_id: str, tool: str, args: Any, *, late: bool = False, new_step: bool = True
    ) -> Decision:
        """Publish a new call under ``call_id``: a denial kept under that id
        no longer answers for it (the id now names this call). ``new_step``
        false: the call belongs to the step under way, whatever is open."""
        if agent.step == 0 or (
            new_step and (agent.step_done or (not agent.steps_reported and agent.open_calls() == 0))
        ):
            agent.begin_step()
        if call_id:
            self._answered.pop(retry_key("tool/call", agent.agent.id, call_id))
        return await agent.call(call_id, tool, args, late=late)

    async def _close(
        self,
        agent: AgentLink,
        call_id: str,
        content: str = "",
        *,
        is_error: bool = False,
        denial: Decision | None = None,
    ) -> None:
        """Publish the outcome of the open call ``call_id`` names: its
        result, or the ``denial`` the model reads instead (closing the
        newest call ends an inferred step: ``AgentLink``)."""
        if denial is None:
            await agent.result(call_id, content, is_error=is_error)
        else:
            await agent.denied(call_id, denial)

    async def _batch(self, agent: AgentLink, calls: Any) -> None:
        """The response is over. A call it lists that is still open got no
        post hook: Claude Code fires them before this one, and the guard
        registers them with it, so the call never ran (the user declined its
        permission prompt, a permission callback or a hook of yours said no,
        a pre-tool hook timed out). It gets the batch's text for it now, a
        failure: the model read it as one, and a refused write changed
        nothing. (Were the guard's own post hook lost, killed at its
        timeout, the call that ran reads as refused too: the batch's text is
        the same for both.) A call it lists that no hook reported, answered
        ``<tool_use_error>``, is one Claude Code refused before any tool hook
        (its input failed the tool's own checks: an Edit whose ``old_string``
        is not in the file, an argument missing, no such tool): it is
        recorded now, late, with that failure, in the response's step, so a
        model retrying it is told as for any failure (nothing can deny a call
        no hook asks about); a copy of the batch records it no more."""
        listed = [
            (entry, call_id, not agent.has_call(call_id) and self._unheard(agent, call_id, entry))
            for entry in (calls if isinstance(calls, list) else ())
            if isinstance(entry, dict) and (call_id := payload_text(entry, "tool_use_id"))
        ]
        stepped = any(not unheard for _, _, unheard in listed)  # a call a hook reported began the step
        for entry, call_id, unheard in listed:
            if unheard:
                tool, args = payload_text(entry, "tool_name"), logged_args(entry.get("tool_input"))
                await self._call(agent, call_id, tool, args, late=True, new_step=not stepped)
                stepped = True
            elif not agent.has_call(call_id):
                continue
            content = as_text(entry.get("tool_response"))
            seq = self.link.bus.seq + 1  # the result's
            await agent.result(call_id, content, is_error=True)
            # kept as a result hook's answer (what a rebuild makes of it too): a post
            # hook of the call's, or a copy of the batch, arriving after it is a copy of it
            mine = tuple(message for message in agent.pending if message.call_id == call_id)
            answer = Answer(seq=seq, messages=mine, halt=agent.halt_reason)
            self._answered.add(
                retry_key("tool/result", agent.agent.id, call_id),
                KeptAnswer(result_digest(content, True), answer),
            )
        await agent.end_step()

    def _unheard(self, agent: AgentLink, call_id: str, entry: Mapping[str, Any]) -> bool:
        """Whether a batch's ``entry`` is a call the CLI refused before any
        tool hook: no answer of the guard's is kept for it, and the CLI's
        answer is its own refusal."""
        return (
            as_text(entry.get("tool_response")).lstrip().startswith(_REFUSED_BY_CLI)
            and self._answered.peek(retry_key("tool/result", agent.agent.id, call_id)) is None
            and self._answered.peek(retry_key("tool/call", agent.agent.id, call_id)) is None
        )

    async def _agent(self, payload: Mapping[str, Any]) -> AgentLink:
        session = str(payload.get("session_id") or "session")
        main = self._sessions.get(session)
        if main is None:
            main = self.link.agent(session)
            evicted = self._sessions.add(session, main)
            main.steps_reported = self._steps_reported
            await main.start()
            for oldest in evicted:
                await self._dispose(oldest.agent.id, oldest)
        sub_id = payload_text(payload, "agent_id")
        if not sub_id or sub_id == main.agent.id:  # the session's own id names its main agent
            return main
        return await self.subagent(main, sub_id)

    async def subagent(self, main: AgentLink, sub_id: str) -> AgentLink:
        """The live subagent ``sub_id`` of ``main``, started if it is not."""
        sub = self._subagents.get(sub_id)
        if sub is None:
            sub = self._subagents[sub_id] = self.link.agent(sub_id, parent=main)
            sub.steps_reported = main.steps_reported
            await sub.start()
        return sub

    def subagents_of(self, main: AgentLink) -> list[AgentLink]:
        """``main``'s live subagents, oldest first."""
        return [sub for sub in self._subagents.values() if sub.agent.parent_id == main.agent.id]

    async def end_subagent(self, sub: AgentLink) -> None:
        """The live subagent is gone: dispose of it."""
        del self._subagents[sub.agent.id]
        await sub.dispose()

    async def _end_session(self, session: str) -> None:
        await self._dispose(session, self._sessions.pop(session))

    async def _dispose(self, session: str, main: AgentLink | None) -> None:
        """Dispose of ``session``'s subagents, then of its main agent."""
        for sub_id, sub in list(self._subagents.items()):
            if sub.agent.parent_id == session:
                del self._subagents[sub_id]
                await sub.dispose()
        if main is not None:
            await main.dispose()


_SESSION_ID = lazy_compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


SESSION_ID_RULE = "must be 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit"


def is_session_id(value: object) -> bool:
    """Whether ``value`` can name a session: 1-128 letters, digits, '.', '_'
    or '-', not starting with a punctuation mark, so it is safe as a file name
    in the state directory."""
    return isinstance(value, str) and _SESSION_ID.fullmatch(value) is not None


def default_state_dir() -> Path:
    """``$REPEAT_TOOL_GUARD_STATE``, else ``$XDG_STATE_HOME/repeat-tool-guard``,
    else ``~/.local/state/repeat-tool-guard``. A relative ``XDG_STATE_HOME``
    is ignored, as the XDG specification says (it would put the logs, which
    hold tools' output, in whatever directory the agent works in); so is
    an empty or relative ``HOME``: ``ValueError`` then, rather than the
    filesystem's root or the working directory."""
    explicit = os.environ.get("REPEAT_TOOL_GUARD_STATE")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_STATE_HOME", "")
    if os.path.isabs(xdg):
        return Path(xdg) / "repeat-tool-guard"
    home = os.environ.get("HOME")
    if home is not None and not os.path.isabs(home):
        raise ValueError(
            f"HOME = {home!r} is no absolute path to keep state under: "
            "set REPEAT_TOOL_GUARD_STATE or XDG_STATE_HOME, or pass --state-dir"
        )
    return Path.home() / ".local" / "state" / "repeat-tool-guard"


class HookInputError(ValueError):
    """The hook's stdin is not a Claude Code hook payload; the message says why."""


def parse_payload(raw: bytes) -> dict[str, Any]:
    """The hook payload on stdin, checked for what the guard relies on."""
    try:
        payload = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        payload = lenient_json(raw)  # a lone surrogate, as JavaScript writes a string cut mid-character
        if payload is None:
            raise HookInputError(f"hook input is not JSON ({exc})") from None
    except RecursionError as exc:
        raise HookInputError(f"hook input nests too deeply to read ({exc})") from None
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
    runtime: HookRuntime = CLAUDE_CODE,
    abandoned: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """Answer one hook invocation of ``runtime``'s CLI with per-session state
    kept in ``state_dir`` (``guard.sessions.hook_state.hook_session``: the
    session's log, its snapshot and its lock there; ``abandoned`` as
    there). ``log_actions`` is ``Guard``'s; the environment's overrides
    (``apply_environment``) apply to ``config``.
    """
    if runtime.seam(payload) is None:
        return {}  # an event the guard does not follow: no session state made for it
    config = apply_environment(config if config is not None else Config())
    session = str(payload["session_id"])
    async with hook_session(
        state_dir, session, config, log_actions=log_actions, on_replay=on_replay, abandoned=abandoned
    ) as link:
        return await ClaudeHooks(link, runtime=runtime).handle(payload)


def answer_hook(
    payload: Mapping[str, Any],
    state_dir: Path,
    config: Config | None = None,
    *,
    log_actions: bool = True,
    on_replay: Callable[[str], None] | None = None,
    runtime: HookRuntime = CLAUDE_CODE,
    abandoned: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """``run_hook`` for a process of its own (the ``hook`` command), run to
    completion without an event loop: one hook event has nothing to wait for
    but ``rescue``'s ask, which starts a loop of its own when it runs. So the
    process pays for importing and starting one only when it asks.
    """
    return run_to_completion(
        run_hook(
            payload,
            state_dir,
            config,
            log_actions=log_actions,
            on_replay=on_replay,
            runtime=runtime,
            abandoned=abandoned,
        )
    )


def run_to_completion(coroutine: Coroutine[Any, Any, T]) -> T:
    """The result of a coroutine that never suspends, run without an event
    loop; one that does suspend is closed and is a ``RuntimeError``."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coroutine.close()
    raise RuntimeError("the coroutine waited on an event loop, and none is running")
