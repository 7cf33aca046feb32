"""The guard behind Gemini CLI's hooks (``"hooks"`` in ``settings.json``),
answered by the core that answers Claude Code's (``ClaudeHooks``).

Seams: ``BeforeAgent`` (a user prompt), ``BeforeTool`` (decide; a deny is
``{"decision": "deny", "reason"}`` and the model reads
``Tool execution blocked: <reason>``), ``AfterTool`` (the result is
``tool_response.llmContent``, what the model reads, and a failure when it
has an ``error`` or is a shell command's with a non-zero ``Exit Code``; the guard's messages go
back as ``additionalContext``, which Gemini CLI appends to the result inside
``<hook_context>``), ``AfterAgent`` (the agent's turn is over: ``idle``),
``SessionEnd``. A halt answers ``continue: false`` with ``stopReason``: the
run ends. ``PreCompress`` is not followed: Gemini CLI sends it before every
model request, whether or not anything is then compressed.

``BeforeTool`` carries no call id, so the guard names each call itself and
pairs an ``AfterTool`` with the newest open call of the same tool and
arguments: calls of one response may run, and their hooks fire,
concurrently, and two open calls alike in one response are
interchangeable; an older one still open is from an earlier response, a
call Gemini CLI never ran (another hook or the user refused it), which
no result answers.

A subagent (the main agent's ``invoke_agent`` call runs one) has hooks
with the main agent's ``session_id`` and no agent id: the guard infers
which calls are its own and counts them as a child of the main agent named
after the invoked agent (``GeminiRuntime.attribute``).
"""

from __future__ import annotations

import itertools
import os
import re
import time
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

from bus import ToolCall
from guard._regex import lazy_compile
from guard.adapters.claude_hooks import HookRuntime, payload_text
from guard.sessions.answer import Answer
from guard.sessions.link import AgentLink, as_text

if TYPE_CHECKING:
    from guard.adapters.claude_hooks import ClaudeHooks

__all__ = ["DELEGATE", "GEMINI_CLI", "GeminiRuntime", "cli_wrote", "fired_at", "shell_failed", "subagents_started"]

DELEGATE = "invoke_agent"
"""The tool through which Gemini CLI's main agent runs a subagent (its
``agent_name`` and ``prompt``); a subagent cannot call it."""

_SUBAGENT_TOOLS = frozenset({"complete_task"})
"""Tools only a subagent has: the one that hands its answer back."""

_CHILD = "@gemini-"
"""In the id of a subagent the guard names for Gemini CLI: between the
invoked agent's name and the rest of the guard's id of the ``invoke_agent``
call that runs it (``generalist@gemini-18c2...``)."""

_ONE_CALL = "@call-"
"""In the id of an agent that stands for one call of one of several
subagents running at once (``codebase_investigator+generalist@call-18c2...``)."""


_SHELL = "run_shell_command"
# the result's trailer, after the output: "Exit Code: N", then only Signal / Background PIDs / PGID
# lines (an "Exit Code: 1" the output itself quotes is not followed by them)
_EXIT_CODE = lazy_compile(
    r"(?:^|\n)Exit Code: (-?\d{1,10})[ \t]*(?:\n(?:Signal|Background PIDs|Process Group PGID): [^\n]*)*\s*\Z"
)
_TRAILER_READ = 1024
# what gemini-cli says instead of a trailer when it stopped the command: no output for
# its inactivity timeout, or the user cancelled it (then any output it had so far)
_CANCELLED = (
    "Command was automatically cancelled because it exceeded the timeout",
    "Command was cancelled by user before it could complete.",
)

# what newer versions wrap around what the model reads of a command (its own closing tag
# inside escaped), so the text opens and ends with a tag, not the output and the trailer
_OPEN, _CLOSE = "<untrusted_context", "</untrusted_context>"

# what gemini-cli itself puts in a user turn: its context and state snapshot, its notices
# (a plan mode left, the IDE companion's editor context), and the turn it sends when the
# model's answer came back empty or malformed (``continueOnFailedApiCall``)
_INJECTED = ("<session_context>", "<state_snapshot>")
_RETRY_PROMPT = "System: Please continue."
_NOTICE = lazy_compile(
    r"(?:User has manually exited Plan Mode|Plan approved)\. Switching to [^\n]*\.|"
    r"Here is (?:a summary of changes in )?the user's editor context[^\n]*\n+```json\n.*\n```",
    re.DOTALL,
)


def cli_wrote(text: str) -> bool:
    """Whether a user turn's text (stripped) is gemini-cli's own, not the
    user's words: live (``BeforeAgent``) and in a recording alike."""
    return text.startswith(_INJECTED) or text == _RETRY_PROMPT or _NOTICE.fullmatch(text) is not None


def shell_failed(tool: str, text: str) -> bool:
    """Whether ``tool``'s result, as the model reads it, is a
    ``run_shell_command``'s that failed: ending in a non-zero ``Exit Code``,
    or cancelled before it completed (gemini-cli's inactivity timeout, or
    the user), inside the ``<untrusted_context>`` newer versions wrap it
    in. A shell command that failed reports no error otherwise."""
    if tool != _SHELL:
        return False
    head = text[:_TRAILER_READ].lstrip()
    if head.startswith(_OPEN):
        head = head.partition(">")[2].lstrip()
    if head.startswith(_CANCELLED):
        return True
    tail = text[-2 * _TRAILER_READ :].rstrip()
    if tail.endswith(_CLOSE):
        tail = tail[: -len(_CLOSE)]
    code = _EXIT_CODE.search(tail[-_TRAILER_READ:])
    return code is not None and int(code.group(1)) != 0


def fired_at(payload: Mapping[str, Any]) -> float | None:
    """When Gemini CLI fired the hook (its ``timestamp``, to the
    millisecond), in seconds since the epoch; ``None`` without a readable one."""
    stamp = payload.get("timestamp")
    if not isinstance(stamp, str):
        return None
    try:
        fired = datetime.fromisoformat(stamp.replace("Z", "+00:00", 1))
    except ValueError:
        return None
    return fired.timestamp() if fired.tzinfo is not None else None


def subagents_started(payload: Mapping[str, Any], since: float) -> int | None:
    """How many of the session's subagents Gemini CLI has recorded anything
    of since ``since`` (seconds since the epoch): it keeps each subagent's
    conversation in ``<session id>.jsonl`` files of a folder named after
    the session, beside the session's own (``transcript_path``), creating
    one as the subagent starts and writing its model's every answer there
    before its calls' hooks fire. ``None`` when that cannot be seen from
    here: no transcript, a folder on another machine, or one outside this
    user's Gemini CLI home (``$GEMINI_CLI_HOME/.gemini``, ``~/.gemini``),
    where Gemini CLI never writes: a client of ``serve`` names the path,
    and the server reads no folder it picks. At most ``_SCANNED`` entries
    are read."""
    transcript = payload_text(payload, "transcript_path")
    session = payload_text(payload, "session_id")
    if not session or not os.path.isabs(transcript):
        return None
    home = os.path.join(os.path.realpath(os.environ.get("GEMINI_CLI_HOME") or os.path.expanduser("~")), ".gemini", "")
    try:
        if not os.path.realpath(transcript).startswith(home):
            return None
    except ValueError:  # a NUL in the path
        return None
    chats = os.path.dirname(transcript)
    try:
        with os.scandir(os.path.join(chats, session)) as entries:
            return sum(
                1
                for entry in itertools.islice(entries, _SCANNED)
                if entry.name.endswith(".jsonl")
                and entry.is_file(follow_symlinks=False)
                and entry.stat(follow_symlinks=False).st_mtime > since
            )
    except FileNotFoundError:
        return 0 if os.path.isdir(chats) else None  # no subagent of the session has started yet
    except (OSError, ValueError):  # ValueError: a NUL in the path
        return None


_SCANNED = 1024
"""Entries of a session's recordings folder read at most (a session runs a
few subagents; a folder of many more is no folder Gemini CLI made)."""


def _delegated_name(args: Any) -> str:
    """The invoked agent's name, as its subagent's id begins."""
    name = args.get("agent_name") if isinstance(args, dict) else None
    return name if isinstance(name, str) and name and _CHILD not in name and _ONE_CALL not in name else "subagent"


def _delegations(main: AgentLink, children: list[AgentLink]) -> list[tuple[ToolCall, AgentLink]]:
    """The main agent's open ``invoke_agent`` calls whose subagent is live, each with it."""
    live = {child.agent.id: child for child in children}
    delegations: list[tuple[ToolCall, AgentLink]] = []
    for call in main.calls_in_flight():
        if call.tool == DELEGATE:
            child = live.get(f"{_delegated_name(call.args)}@{call.call_id}")
            if child is not None:
                delegations.append((call, child))
    return delegations


async def _end_subagents(hooks: ClaudeHooks, main: AgentLink) -> None:
    """End every subagent the guard named for ``main`` (none has agent ids of its own)."""
    for child in hooks.subagents_of(main):
        if _named(child):
            await hooks.end_subagent(child)


def _named(agent: AgentLink) -> bool:
    """Whether the guard named this agent (a Gemini CLI subagent, or one call of one)."""
    return _CHILD in agent.agent.id or _ONE_CALL in agent.agent.id


class GeminiRuntime(HookRuntime):
    """Gemini CLI's hook contract (see the module's docstring)."""

    name: ClassVar[str] = "gemini-cli"
    seams: ClassVar[Mapping[str, str]] = {
        "BeforeAgent": "prompt",
        "BeforeTool": "pre",
        "AfterTool": "post",
        "AfterAgent": "idle",
        "SessionEnd": "session-end",
    }
    cosmetic_args: ClassVar[Mapping[str, frozenset[str]]] = {"run_shell_command": frozenset({"description"})}
    ends_runs: ClassVar[bool] = True
    project_trust: ClassVar[str] = (
        "; Gemini CLI runs a project's hooks only in a trusted folder (trust it when asked, or set "
        "GEMINI_CLI_TRUST_WORKSPACE=true for a headless run): with --skip-trust it runs without them"
    )

    def prompt(self, payload: Mapping[str, Any]) -> str | None:
        text = payload_text(payload, "prompt")
        return None if cli_wrote(text.strip()) else text

    def call_id(self, agent: AgentLink, payload: Mapping[str, Any], seam: str) -> str:
        if seam != "pre":
            tool, args = payload_text(payload, "tool_name"), self.tool_input(payload)
            for call in reversed(agent.calls_in_flight()):
                if call.tool == tool and call.args == args:
                    return call.call_id
        # unique across the hook processes of a session (they take turns under its lock)
        stamp = time.time_ns()
        while agent.has_call(f"gemini-{stamp:x}"):
            stamp += 1
        return f"gemini-{stamp:x}"

    async def attribute(self, hooks: ClaudeHooks, main: AgentLink, payload: Mapping[str, Any], seam: str) -> AgentLink:
        """Whose call this is: the main agent's, or a subagent's (their hooks
        carry the main agent's ``session_id`` and no agent id). A subagent
        runs while the main agent's ``invoke_agent`` call is open (between
        its ``BeforeTool`` and ``AfterTool``); its calls are a child of the
        main agent named after the invoked agent (``settled`` starts it).

        Gemini CLI fires the ``BeforeTool`` hooks of one response's calls
        together and runs none of them before all have answered. So while an
        ``invoke_agent`` is open, a call is the main agent's when no subagent
        has started since the guard saw the ``invoke_agent``
        (``subagents_started``): another call of that response, or any call
        after an ``invoke_agent`` that was refused after the guard allowed it
        (by another hook, Gemini CLI's policy or the user) and ran nothing.
        Where the subagents' recordings cannot be seen, a call is the main
        agent's when it was fired (``fired_at``) no later than the guard
        recorded the main agent's latest call, a subagent's when later (a
        subagent starts only once its ``invoke_agent``'s hooks answered). A
        result is the newest open call alike's, whoever made it. With
        several subagents running at once, which one made a call cannot be
        told: the call is an agent of its own, counted with no other."""
        children = [child for child in hooks.subagents_of(main) if _named(child)]
        if not children:
            return main
        tool = payload_text(payload, "tool_name")
        if seam != "pre":
            if tool == DELEGATE:
                return main
            args = self.tool_input(payload)
            alike = [
                (call.ts, n, agent)
                for n, agent in enumerate((main, *children))
                for call in agent.calls_in_flight()
                if call.tool == tool and call.args == args
            ]
            if alike:
                return max(alike)[2]
        delegations = _delegations(main, children)
        if not delegations:
            return main
        latest = max(call.ts for call in main.calls_in_flight())
        fired = fired_at(payload)
        started = subagents_started(payload, min(call.ts for call, _ in delegations))
        if tool == DELEGATE:  # the main agent's: a subagent cannot call it
            if seam == "pre" and ((started is not None and started > 0) or (fired is not None and fired > latest)):
                await _end_subagents(hooks, main)  # a later response: the subagents it saw are over
            return main
        in_its_response = started is None and fired is not None and fired <= latest
        if tool not in _SUBAGENT_TOOLS and (started == 0 or in_its_response):
            return main
        if len(delegations) == 1:
            return delegations[0][1]
        names = "+".join(sorted({child.agent.id.partition(_CHILD)[0] for _, child in delegations}))
        return await hooks.subagent(main, f"{names}{_ONE_CALL}{time.time_ns():x}")

    async def settled(
        self, hooks: ClaudeHooks, agent: AgentLink, call_id: str, tool: str, args: Any, *, running: bool
    ) -> None:
        """An ``invoke_agent`` allowed starts its subagent, and one over (its
        result, or its denial) ends it; an agent that stands for one call
        ends with it."""
        if agent.agent.parent_id is None and tool == DELEGATE:
            child_id = f"{_delegated_name(args)}@{call_id}"
            if running:
                await hooks.subagent(agent, child_id)
                return
            for child in hooks.subagents_of(agent):
                if child.agent.id == child_id:
                    await hooks.end_subagent(child)
        elif not running and _ONE_CALL in agent.agent.id and not agent.open_calls():
            await hooks.end_subagent(agent)

    async def turn_over(self, hooks: ClaudeHooks, main: AgentLink) -> None:
        """The turn is over, and so is any subagent still taken for running
        (its ``invoke_agent`` refused after the guard allowed it)."""
        await _end_subagents(hooks, main)

    def result(self, payload: Mapping[str, Any], seam: str) -> tuple[str, bool]:
        response = payload.get("tool_response")
        if not isinstance(response, dict):
            return as_text(response), False
        error = response.get("error")
        content = response.get("llmContent", response.get("returnDisplay", ""))
        if error:
            return as_text(content) if content else as_text(error), True
        text = as_text(content)
        return text, shell_failed(payload_text(payload, "tool_name"), text)

    def denial(self, event: str, reason: str) -> dict[str, Any]:
        return {"decision": "deny", "reason": reason}

    def delivers(self, seam: str, denied: bool) -> bool:
        """Gemini CLI shows the model a denial's reason and
        ``additionalContext`` after a result; elsewhere messages wait."""
        return denied or seam == "post"

    def answer(self, event: str, seam: str, answer: Answer) -> dict[str, Any]:
        """A halt ends the run from a tool hook (``continue: false``)."""
        decision = answer.decision
        texts = [message.text for message in answer.messages]
        out: dict[str, Any] = {}
        if decision is not None and not decision.allowed:
            out = self.denial(event, "\n\n".join([decision.reason or "", *texts]))
        elif texts:
            out["hookSpecificOutput"] = {"hookEventName": event, "additionalContext": "\n\n".join(texts)}
        if answer.halt is not None and seam in ("pre", "post"):
            out["continue"] = False
            out["stopReason"] = answer.halt
        return out


GEMINI_CLI = GeminiRuntime()
"""Gemini CLI's hooks."""
