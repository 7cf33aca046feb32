"""The guard behind Codex CLI's hooks (``$CODEX_HOME/hooks.json``), answered
by the core that answers Claude Code's (``ClaudeHooks``).

Codex's hook payloads follow Claude Code's: ``PreToolUse`` / ``PostToolUse``
carry ``tool_use_id``, ``tool_name`` (the shell tool is ``Bash`` with
``{"command"}``), ``tool_input`` and, after the call, ``tool_response``
(the command's bare output). Seams: ``UserPromptSubmit`` (a user turn),
``PreToolUse`` (a deny is ``permissionDecision: deny``; the model reads the
reason as the tool's output), ``PostToolUse`` (the guard's messages go back
as ``additionalContext``, a developer message next to the result), ``Stop``
(the turn is over: ``idle``), ``SubagentStart`` / ``SubagentStop`` (a
subagent's turn; its tool hooks carry its ``agent_id``), ``PostCompact`` (the
conversation was compacted: ``agent/status`` ``compacted``), ``SessionEnd``.

No Codex tool hook can end a run (``continue: false`` is ignored there). So a
halt is contained instead: once the guard asks to halt an agent, each of its
further tool calls is denied with the halt's reason (``denied_by``
``HALTED_BY``) until the user's next prompt, and the model, left with denials
only, ends its turn.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from guard._regex import lazy_compile
from guard.adapters.claude_hooks import HookRuntime, payload_text
from guard.patterns import shell_command
from guard.sessions.answer import Answer

__all__ = ["CODEX", "CodexRuntime"]

# as Codex itself recognises a patch: either name, an optional `cd` into a plain or quoted
# directory, and the patch itself (a heredoc or the patch text); `apply_patch.sh` or
# `apply_patch --help` is an ordinary command, with a result
_APPLY_PATCH = lazy_compile(
    r"\s*(?:cd\s+(?:'[^']*'|\"[^\"]*\"|[^\s'\"]+)\s*&&\s*)?(?:apply_patch|applypatch)\s+(?:<<|['\"]?\*\*\* Begin Patch)"
)


class CodexRuntime(HookRuntime):
    """Codex CLI's hook contract (see the module's docstring)."""

    name: ClassVar[str] = "codex"
    seams: ClassVar[Mapping[str, str]] = {
        "UserPromptSubmit": "prompt",
        "PreToolUse": "pre",
        "PostToolUse": "post",
        "Stop": "idle",
        "SubagentStart": "subagent-start",
        "SubagentStop": "subagent-idle",
        "PostCompact": "compacted",
        "SessionEnd": "session-end",
    }
    cosmetic_args: ClassVar[Mapping[str, frozenset[str]]] = {"Bash": frozenset({"description", "justification"})}
    ends_runs: ClassVar[bool] = False
    project_trust: ClassVar[str] = (
        "; Codex runs a project's hooks once the project is trusted "
        '([projects.{project}] trust_level = "trusted" in its config.toml)'
    )
    hook_trust: ClassVar[str] = (
        "; Codex runs new or changed hooks only once you trust them: open /hooks in the Codex TUI and trust "
        "them (until then codex exec skips them without a word; --dangerously-bypass-hook-trust runs them in "
        "automation you have vetted)"
    )

    def settings(self, handler: Mapping[str, Any]) -> dict[str, Any]:
        """``hooks.json``'s body: no matcher, so every tool's hooks run (Codex
        reads a matcher as a regular expression, where ``*`` is invalid)."""
        return {"hooks": {event: [{"hooks": [dict(handler)]}] for event in self.events}}

    def prompt(self, payload: Mapping[str, Any]) -> str | None:
        return payload_text(payload, "prompt")

    def denial(self, event: str, reason: str) -> dict[str, Any]:
        """Codex shows the model the reason followed by ``. Command: ...``
        (``. Tool: ...``): the reason's own closing period is left to it,
        unless nothing else would be left (Codex wants a reason)."""
        stripped = reason.rstrip().removesuffix(".")
        return super().denial(event, stripped if stripped.strip() else reason)

    def tool_input(self, payload: Mapping[str, Any]) -> Any:
        """A shell call's arguments with the directory it runs in
        (``workdir``): Codex sends the one the model chose as the payload's
        ``cwd`` only, and the same command in another directory is another call."""
        args = super().tool_input(payload)
        cwd = payload.get("cwd")
        shell = payload_text(payload, "tool_name") == "Bash"
        if shell and isinstance(args, dict) and "workdir" not in args and isinstance(cwd, str) and cwd:
            return {**args, "workdir": cwd}
        return args

    def reports_no_result(self, tool: str, args: Any) -> bool:
        """Codex applies a patch the model sends as a shell command
        (``apply_patch <<'EOF' ...``) itself, with a pre hook and no post hook."""
        command = shell_command(args)
        return tool == "apply_patch" or (command is not None and _APPLY_PATCH.match(command) is not None)

    def delivers(self, seam: str, denied: bool) -> bool:
        """Codex shows the model a denial's reason and ``additionalContext``
        after a result; elsewhere messages wait."""
        return denied or seam == "post"

    def answer(self, event: str, seam: str, answer: Answer) -> dict[str, Any]:
        """Once the agent is halted, the halt's reason rides along with what
        the model is shown (Codex cannot end the run)."""
        decision = answer.decision
        reason = (decision.reason or "") if decision is not None and not decision.allowed else None
        halt = [answer.halt] if answer.halt is not None and reason != answer.halt else []
        texts = [message.text for message in answer.messages]
        if reason is not None:
            return self.denial(event, "\n\n".join([reason, *texts, *halt]))
        if seam != "post":
            return {}
        context = [*texts, *halt]
        if not context:
            return {}
        return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": "\n\n".join(context)}}


CODEX = CodexRuntime()
"""Codex CLI's hooks."""
