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
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import Any, ClassVar

from guard._regex import lazy_compile
from guard.adapters.claude_hooks import HookRuntime, payload_text
from guard.sessions.answer import Answer
from guard.sessions.link import AgentLink, as_text

__all__ = ["GEMINI_CLI", "GeminiRuntime", "cli_wrote", "shell_failed"]

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
