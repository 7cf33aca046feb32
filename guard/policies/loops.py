"""Policy ``loops``: result-aware loop detection users can leave on.

The other policies judge calls only. This one also reads results, so it can
tell a loop (the same call bringing the same answer again, with nothing
changed in between) from legitimate repetition (polling a job whose output
advances, a retry that then succeeds, a re-read after the file changed):

- **Result-aware repeats.** A call's signature is its tool and arguments
  (``ignored_args`` left out). An occurrence whose normalised result
  (``guard.normalize``) differs from the previous occurrence's is new
  information: that signature's count starts over. Occurrences with the same
  result count up, wherever they fall in the last ``window`` calls, so a
  cycle of any period counts like a run.
- **Advice, then denial, then a halt.** When a call repeats, with its
  earlier result, a call made a few calls before (at most ``advise_span``
  back, so a cycle is forming, with no failure in between: a re-read after a
  failed edit is how the edit gets fixed), or when ``advise_at`` calls in a
  row each repeat an earlier call with its earlier result, an advisory
  follows the result (once per such run). The ``deny_at``-th occurrence
  with an unchanged result is denied before it runs; a signature denied
  ``halt_after`` times asks the runtime to end the run.
- **Polls back off.** A poll (a known poll tool, a shell command matching
  ``poll_commands``, or a result reporting a running or pending state)
  whose state changes is never acted on. One that keeps returning the same
  thing gets back-off nudges naming a wait (``poll_waits``), and is denied
  only once it has been unchanged for ``poll_deny_after`` polls or
  ``poll_deny_seconds``, and never before a nudge.
- **Failures.** The same call failing ``error_at`` times draws an advisory;
  its ``error_deny_at``-th attempt is denied (a retry that then succeeds is
  left alone). The same tool failing with the same kind of error
  (``guard.normalize.error_kind``) ``error_at`` times in a row, with
  whatever arguments, draws an advisory, and from ``error_deny_at`` failures
  its further calls are denied until one of its calls succeeds. A failure
  is the result's error flag or a result matching ``error_results`` (the
  ``ERROR:`` text some runtimes use instead of the flag).
- **Progress.** A successful editing call (``guard.policies.progress``) starts a new
  epoch: every count is voided, except that the edit itself is remembered,
  so the same edit made again is a repeat (three identical writes are a
  loop). A failed edit is no progress. A genuine user message starts a new
  epoch too; an interjection (``interjections``) does not. A message that
  asks for something to be done N times ("run the flaky test six times")
  lets an unchanged call be made N times before it is denied
  (``requested_repeats``).
"""

from __future__ import annotations

import re
from collections import deque
from typing import Any

from msgspec.structs import force_setattr

from bus import ToolCall, ToolResult, UserMessage
from guard.actions import Action, ActionKind, action_for
from guard.calls import DEFAULT_IGNORED_ARGS, DEFAULT_INTERJECTIONS, CallSelector, Interjections
from guard.fingerprint import Fingerprint, FingerprintCache
from guard.normalize import DEFAULT_RESULT_NORMALIZE, ResultNormalizer, error_kind
from guard.patterns import CommandPatterns, ToolFilter, compile_regex, shell_command
from guard.policies.progress import DEFAULT_MUTATING_COMMANDS, DEFAULT_MUTATING_TOOLS, ProgressRule, loose_tool_name
from guard.policy import Policy
from guard.section import (
    ConfigError,
    Section,
    check_bool,
    check_int,
    check_names,
    check_patterns,
    check_positive_list,
    check_regexes,
    default_of,
)

__all__ = ["LOOPS_PLUGIN", "LoopsPolicy", "requested_repeats"]

LOOPS_PLUGIN = "loop-detector"

_PREVIEW = 300
_FAILED = b"\x00failed"

_CYCLE_ADVICE = (
    "loop-detector: you are going in a circle. This call repeats one you made a few calls ago ({tool} "
    "{arguments}) and got the same result, with nothing changed in between. Repeating calls will not tell you "
    "anything new: re-read the results you already have and act on them, change approach, or finish the task. "
    "A call that returns the same result a third time will be denied."
)
_REPEAT_DENIAL = (
    "loop-detector denied this call; it did not run. You have made this exact call {count} times and it "
    "returned the same result each time, with nothing changed in between:\n"
    "- tool: {tool}\n"
    "- arguments: {arguments}\n"
    "Re-read that result and act on it: use what it tells you, try a different approach, or finish the task. "
    "Only this exact call is blocked; other calls still run."
)
_FAILURE_ADVICE = (
    "loop-detector: this exact call has now failed {count} times ({tool} {arguments}). Retrying it unchanged "
    "will fail again. Read the error and fix its cause, or change approach; if it keeps failing, this exact "
    "call will be denied."
)
_FAILURE_DENIAL = (
    "loop-detector denied this call; it did not run. This exact call has failed {count} times:\n"
    "- tool: {tool}\n"
    "- arguments: {arguments}\n"
    "Read the last error and fix its cause, or change approach. Other calls still run."
)
_STREAK_ADVICE = (
    "loop-detector: {tool} has failed {count} times in a row with the same kind of error, with different "
    "arguments: {kind}\n"
    "Changing the arguments is not fixing it. Stop and find the cause: re-read the error and the input it "
    "names (view the file before editing it again, check the tool's name and parameters), or use another "
    "tool. After {deny_at} such failures further {tool} calls will be denied until one succeeds."
)
_STREAK_DENIAL = (
    "loop-detector denied this call; it did not run. {tool} has failed {count} times in a row with the same "
    "kind of error: {kind}\n"
    "Find the cause before calling it again (re-read the error and the input it names), or use another "
    "tool. Other tools still run."
)
_POLL_ADVICE = (
    "loop-detector: this poll returned the same thing {count} times ({tool} {arguments}); nothing has "
    "changed for {elapsed}. Back off: wait about {wait} seconds before polling again ({how}), or do other "
    "work meanwhile. Polling faster will not make it finish sooner."
)
_POLL_DENIAL = (
    "loop-detector denied this poll; it did not run. It returned the same thing {count} times over "
    "{elapsed} despite the advice to back off:\n"
    "- tool: {tool}\n"
    "- arguments: {arguments}\n"
    "The thing you are waiting for is not changing. Check whether it is stuck (its logs, its process), "
    "stop it, or report what you found."
)
_HALT = (
    "loop-detector: {tool} with the same arguments was denied {denials} times and the agent kept retrying it; "
    "the run should end."
)
_BLOCKING_WAIT = "sleep {wait} in the shell, or the tool's own wait or timeout argument"
_INPUT_KEYS = ("chars", "input", "stdin", "text", "keys", "data")


_NUMBERS = {
    word: n
    for n, word in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
            "twenty",
        ]
    )
}
_REPEAT_REQUEST = re.compile(r"(?i)\b(\d{1,3}|" + "|".join(_NUMBERS) + r")\s+(?:more\s+)?times\b")


def requested_repeats(text: str) -> int:
    """How many times a user message asks for something to be done ("run
    the flaky test six times", "retry 3 times"): the largest such count, 0
    when it asks for none."""
    counts = [int(n) if n.isdigit() else _NUMBERS[n.lower()] for n in _REPEAT_REQUEST.findall(text)]
    return max(counts, default=0)


def _elapsed(seconds: float) -> str:
    if seconds < 90:
        return f"{max(seconds, 0):.0f} s"
    return f"{seconds / 60:.0f} min"


_SHELL_SEGMENTS = re.compile(r"&&|\|\||[;\n]")
_SETUP = frozenset({"cd", "export", "source", ".", "set", "pushd", "popd", "ulimit", "umask"})
_PREFIXES = frozenset({"sudo", "time", "timeout", "nohup", "env", "exec", "command"})


def _streak_key(tool: str, args: Any) -> tuple[str, str | None]:
    """What a failure streak is counted on: the tool, and for an editing
    tool its sub-command (``str_replace``, not ``view``), for a shell
    command the program of its last step (``make`` in ``rm -rf build && cd
    app && make``; a pipeline's first program): different programs failing
    the same way are no streak."""
    command = shell_command(args)
    if not command:
        return (tool, None)
    if not any(c.isspace() for c in command.strip()):
        return (tool, command.strip())
    program = None
    for segment in _SHELL_SEGMENTS.split(command):
        words = segment.strip().lstrip("({ ").split()
        while words and (words[0] in _PREFIXES or "=" in words[0] or words[0][:1] in "-0123456789"):
            words = words[1:]
        if words and words[0] not in _SETUP:
            program = words[0].rsplit("/", 1)[-1]
    return (tool, program)


class _Signature:
    """What one call signature did in this epoch: how many occurrences in a
    row returned the same (normalised) result, that result, whether it was a
    failure or a poll, when the unchanged stretch began, and how often it was
    nudged and denied since."""

    __slots__ = ("count", "denials", "failed", "last", "level", "nudges", "poll", "result", "since", "spacing", "ts")

    def __init__(self) -> None:
        self.count = 0
        self.last = 0
        self.result = b""
        self.failed = False
        self.poll = False
        self.since = 0.0
        self.nudges = 0
        self.level = 0
        self.ts = 0.0
        self.spacing = 0.0
        self.denials = 0


class _Note:
    """A call seen by ``on_call``, waiting for its result."""

    __slots__ = ("denied", "fp", "halt")

    def __init__(self, fp: Fingerprint, denied: bool = False, halt: bool = False) -> None:
        self.fp = fp
        self.denied = denied
        self.halt = halt


class _AgentLoops:
    """One agent's observations. ``window`` holds the digests of its last
    tracked calls; ``signatures`` what each of them did; ``streaks`` maps a
    tool (and editing sub-command) to its current failure kind and count;
    ``run`` counts consecutive calls that repeated an earlier call's result,
    ``advised`` whether this run drew its advisory; ``seen`` numbers the
    tracked results."""

    __slots__ = (
        "advised",
        "allowance",
        "calls",
        "failed_at",
        "opener",
        "run",
        "seen",
        "signatures",
        "streaks",
        "window",
    )

    def __init__(self) -> None:
        self.advised = False
        self.allowance = 0
        self.failed_at = 0
        self.seen = 0
        self.window: deque[bytes] = deque()
        self.signatures: dict[bytes, _Signature] = {}
        self.streaks: dict[tuple[str, str | None], tuple[str, int]] = {}
        self.calls: dict[str, _Note] = {}
        self.run = 0
        self.opener: bytes | None = None

    def new_epoch(self, opener: bytes | None = None) -> None:
        self.window.clear()
        self.signatures.clear()
        self.streaks.clear()
        self.run = 0
        self.advised = False
        self.opener = opener

    def remember(self, digest: bytes, size: int) -> _Signature:
        """Place a call in the window; the signature's record (new if it
        fell out of the window or was never seen)."""
        window = self.window
        window.append(digest)
        if len(window) > size:
            old = window.popleft()
            if old != digest and old not in window:
                self.signatures.pop(old, None)
        signature = self.signatures.get(digest)
        if signature is None:
            signature = self.signatures[digest] = _Signature()
        return signature


class LoopsConfig(Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Policy ``loops``: result-aware detection of repeats, cycles, stalled
    polls and failure streaks (docs/policies/loops.md). Off unless its
    section is present; the ``recommended`` preset turns it on."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ("sleep", "wait")
    exclude_commands: tuple[str, ...] = (r"^\s*sleep\s+[0-9.]+[smhd]?\s*;?\s*$",)
    ignored_args: tuple[str, ...] = DEFAULT_IGNORED_ARGS
    interjections: tuple[str, ...] = DEFAULT_INTERJECTIONS
    window: int = 30
    advise_at: int = 2
    advise_span: int = 6
    deny_at: int = 3
    halt_after: int = 3
    requested_repeats: bool = True
    error_at: int = 3
    error_deny_at: int = 5
    error_results: tuple[str, ...] = (r"ERROR:\s", r"<tool_use_error>")
    result_normalize: tuple[str, ...] = DEFAULT_RESULT_NORMALIZE
    poll_tools: tuple[str, ...] = (
        "BashOutput",
        "TaskOutput",
        "write_stdin",
        "get_task_output",
        "check_status",
        "get_status",
        "wait_for_*",
        "*poll*",
        "*status*",
    )
    poll_commands: tuple[str, ...] = (
        r"(^|[;&|(]\s*)(gh\s+(run|pr)\s+(view|checks|status|watch)|kubectl\s+(get|describe|rollout\s+status)|"
        r"docker(\s+compose|-compose)?\s+(ps|logs)|podman\s+(ps|logs)|tail\b|squeue\b|qstat\b|"
        r"systemctl\s+(status|is-active)|curl\b[^|;&]*\b(health|status|ready|ping)|ps\b|pgrep\b|"
        r"jobs\b|sleep\b|wc\s+-l\b|ls\b[^|;&]*\.(log|out|pid)\b|cat\b[^|;&]*\.(log|out|status)\b)",
    )
    poll_states: tuple[str, ...] = (
        r"(?i)\b(status|state|phase|conclusion)[\s:=\"']+(running|pending|queued|in[_ ]progress|waiting|starting|"
        r"creating|containercreating|building|deploying)\b",
        r"(?i)\bprocess (is )?(still )?running\b",
        r"(?i)\b(still|is) (running|in progress|pending)\b",
        r"(?i)^\W*(running|pending|queued|in[_ ]progress|waiting|starting)\W*$",
    )
    poll_nudge_at: int = 2
    poll_nudge_every: int = 2
    poll_waits: tuple[int, ...] = (5, 10, 30, 60)
    poll_deny_after: int = 12
    poll_deny_seconds: int = 600
    mutating_tools: tuple[str, ...] = DEFAULT_MUTATING_TOOLS
    mutating_commands: tuple[str, ...] = DEFAULT_MUTATING_COMMANDS

    def __post_init__(self) -> None:
        check_bool("loops.enabled", self.enabled)
        check_bool("loops.requested_repeats", self.requested_repeats)
        for key in ("include", "exclude", "poll_tools", "mutating_tools"):
            check_patterns(f"loops.{key}", getattr(self, key))
        for key in (
            "exclude_commands",
            "interjections",
            "error_results",
            "result_normalize",
            "poll_commands",
            "poll_states",
            "mutating_commands",
        ):
            check_regexes(f"loops.{key}", getattr(self, key), default_of(self, key))
        check_names("loops.ignored_args", self.ignored_args)
        check_int("loops.advise_at", self.advise_at, 1)
        check_int("loops.advise_span", self.advise_span, 0)
        check_int("loops.deny_at", self.deny_at, 2)
        check_int("loops.window", self.window, self.deny_at)
        check_int("loops.halt_after", self.halt_after, 0)
        check_int("loops.error_at", self.error_at, 2)
        check_int("loops.error_deny_at", self.error_deny_at, 0)
        if self.error_deny_at and self.error_deny_at <= self.error_at:
            rule = f"must be 0 (never deny) or more than loops.error_at ({self.error_at})"
            raise ConfigError("loops.error_deny_at", self.error_deny_at, rule)
        check_int("loops.poll_nudge_at", self.poll_nudge_at, 2)
        check_int("loops.poll_nudge_every", self.poll_nudge_every, 1)
        check_positive_list("loops.poll_waits", self.poll_waits)
        check_int("loops.poll_deny_after", self.poll_deny_after, self.poll_nudge_at + 1)
        check_int("loops.poll_deny_seconds", self.poll_deny_seconds, 0)
        for key in self.__struct_fields__:
            value = getattr(self, key)
            if isinstance(value, list):
                force_setattr(self, key, tuple(value))


class LoopsPolicy(Policy[_AgentLoops]):
    """Result-aware detection of repeats, cycles, stalled polls and failure
    streaks. Denials are ``by`` the plugin ``loop-detector``."""

    name = "loops"
    plugin = LOOPS_PLUGIN
    section = LoopsConfig

    def __init__(self, config: LoopsConfig) -> None:
        self.config = config
        self._calls = CallSelector(config.include, config.exclude, config.exclude_commands, config.ignored_args)
        self._interjection = Interjections(config.interjections)
        self._normalizer = ResultNormalizer(config.result_normalize)
        self._progress = ProgressRule(config.mutating_tools, config.mutating_commands)
        poll_tools = [loose_tool_name(p) for p in config.poll_tools]
        self._poll_tools = ToolFilter(poll_tools, normalize=loose_tool_name) if poll_tools else None
        self._poll_commands = CommandPatterns(config.poll_commands)
        self._poll_states = [compile_regex(p) for p in config.poll_states]
        self._error_results = [compile_regex(p) for p in config.error_results]

    def new_state(self) -> _AgentLoops:
        return _AgentLoops()

    async def on_call(self, state: _AgentLoops, call: ToolCall, fingerprints: FingerprintCache) -> Action | None:
        if not self._calls.tracks(call.tool, call.args):
            return None
        config = self.config
        fp = self._calls.fingerprint(fingerprints, call.tool, call.args, call.call_id)
        note = state.calls[call.call_id] = _Note(fp)
        signature = state.signatures.get(fp.digest)
        text: str | None = None
        count = 0
        threshold = 0
        if signature is not None and signature.count:
            count = signature.count + 1
            if signature.failed:
                if config.error_deny_at and count >= config.error_deny_at:
                    text, threshold = _FAILURE_DENIAL, config.error_deny_at
            elif signature.poll:
                stalled = signature.count >= config.poll_deny_after or (
                    config.poll_deny_seconds and call.ts - signature.since >= config.poll_deny_seconds
                )
                if signature.nudges and stalled:
                    text, threshold = _POLL_DENIAL, config.poll_deny_after
            elif count >= max(config.deny_at, state.allowance + 1):
                text, threshold = _REPEAT_DENIAL, config.deny_at
        arguments = fp.preview(_PREVIEW)
        if text is not None:
            assert signature is not None
            body = text.format(
                count=signature.count,
                tool=call.tool,
                arguments=arguments,
                elapsed=_elapsed(call.ts - signature.since),
            )
        else:
            streak = state.streaks.get(_streak_key(call.tool, call.args))
            if streak is None or not config.error_deny_at or streak[1] < config.error_deny_at:
                return None
            kind, count = streak
            threshold = config.error_deny_at
            body = _STREAK_DENIAL.format(tool=call.tool, count=count, kind=kind or "(no message)")
            signature = state.signatures.get(fp.digest)
        note.denied = True
        if signature is not None:
            signature.denials += 1
            note.halt = bool(config.halt_after) and signature.denials == config.halt_after
        return self._action("deny", call, count, body, threshold)

    def on_result(self, state: _AgentLoops, result: ToolResult, fingerprints: FingerprintCache) -> Action | None:
        note = state.calls.pop(result.call_id, None)
        if result.denied_by is not None:
            if note is None or not note.halt:
                return None
            signature = state.signatures.get(note.fp.digest)
            denials = signature.denials if signature is not None else self.config.halt_after
            text = _HALT.format(tool=result.tool, denials=denials)
            return self._action("halt", result, denials, text, self.config.halt_after)
        failed = result.is_error or any(p.match(result.content) for p in self._error_results)
        progress = None if failed else self._progress.kind(result.tool, result.args)
        tracked = self._calls.tracks(result.tool, result.args)
        if progress is not None:
            fp = self._calls.fingerprint(fingerprints, result.tool, result.args, result.call_id)
            opener = fp.digest if progress == "edit" else None
            if opener is None or opener != state.opener:
                state.new_epoch(opener)
                if opener is not None and tracked:
                    self._observe(state, result, fp, self._normalizer.digest(result.content), False, False)
                return None
        if not tracked:
            return None
        fp = (
            note.fp
            if note is not None
            else self._calls.fingerprint(fingerprints, result.tool, result.args, result.call_id)
        )
        streak_key = _streak_key(result.tool, result.args)
        poll = self._is_poll(result, failed)
        if failed and not poll:
            digest = _FAILED
            kind = error_kind(result.content)
            previous = state.streaks.get(streak_key)
            streak = previous[1] + 1 if previous is not None and previous[0] == kind else 1
            state.streaks[streak_key] = (kind, streak)
        else:
            digest = self._normalizer.digest(result.content)
            state.streaks.pop(streak_key, None)
        signature, gap = self._observe(state, result, fp, digest, failed and not poll, poll)
        if failed:
            state.failed_at = state.seen
        if not gap:
            state.run = 0
            state.advised = False
        elif not failed and not poll:
            state.run += 1
        config = self.config
        count = signature.count
        arguments = fp.preview(_PREVIEW)
        if failed and not poll:
            if count == config.error_at:
                text = _FAILURE_ADVICE.format(count=count, tool=result.tool, arguments=arguments)
                return self._action("remind", result, count, text, config.error_at)
            kind, streak = state.streaks[streak_key]
            if streak == config.error_at and kind:
                text = _STREAK_ADVICE.format(
                    tool=result.tool, count=streak, kind=kind, deny_at=config.error_deny_at or "more"
                )
                return self._action("remind", result, streak, text, config.error_at)
            return None
        if poll:
            return self._back_off(signature, result, arguments)
        if state.advised or not gap or count <= state.allowance:
            return None
        # a repeat a few calls back means a cycle is forming, unless a call
        # failed in between: re-reading after a failed edit is how it is fixed
        forming = 1 < gap <= config.advise_span and state.failed_at <= state.seen - gap
        if state.run >= config.advise_at or forming:
            state.advised = True
            text = _CYCLE_ADVICE.format(run=state.run, tool=result.tool, arguments=arguments)
            return self._action("remind", result, count, text, config.advise_at)
        return None

    def on_user_message(self, state: _AgentLoops, message: UserMessage) -> None:
        if self._interjection(message.text):
            return
        state.new_epoch()
        state.allowance = requested_repeats(message.text) if self.config.requested_repeats else 0

    def _observe(
        self, state: _AgentLoops, result: ToolResult, fp: Fingerprint, digest: bytes, failed: bool, poll: bool
    ) -> tuple[_Signature, int]:
        """Count one result of a tracked call against its signature. The
        gap: how many tracked results back the signature's previous one was,
        when this one repeats it unchanged; 0 when it brings news."""
        signature = state.remember(fp.digest, self.config.window)
        state.seen += 1
        gap = 0
        if signature.count and signature.result == digest:
            signature.count += 1
            gap = state.seen - signature.last
        else:
            signature.count = 1
            signature.result = digest
            signature.since = result.ts
            signature.nudges = 0
            signature.level = 0
            signature.denials = 0
        signature.last = state.seen
        signature.spacing = result.ts - signature.ts
        signature.ts = result.ts
        signature.failed = failed
        signature.poll = poll
        return signature, gap

    def _back_off(self, signature: _Signature, result: ToolResult, arguments: str) -> Action | None:
        """A nudge for an unchanged poll, naming the next wait. Waits the
        agent already keeps between polls are skipped, so a patient poller
        is not nagged; before a poll is denied it is always nudged once."""
        config = self.config
        count = signature.count
        at = config.poll_nudge_at
        stalled = count >= config.poll_deny_after or bool(
            config.poll_deny_seconds and result.ts - signature.since >= config.poll_deny_seconds
        )
        final = stalled and not signature.nudges
        if not final and (count < at or (count - at) % config.poll_nudge_every):
            return None
        waits = config.poll_waits
        level = signature.level
        while level < len(waits) and signature.spacing >= waits[level]:
            level += 1
        signature.level = level
        if level == len(waits) and not final:
            return None
        wait = waits[min(level, len(waits) - 1)]
        signature.level = min(level + 1, len(waits))
        signature.nudges += 1
        text = _POLL_ADVICE.format(
            count=count,
            tool=result.tool,
            arguments=arguments,
            elapsed=_elapsed(result.ts - signature.since),
            wait=wait,
            how=_BLOCKING_WAIT.format(wait=wait),
        )
        return self._action("remind", result, count, text, at)

    def _is_poll(self, result: ToolResult, failed: bool) -> bool:
        """A poll: a poll tool's call (not typing input), a poll command, or
        (for a call that succeeded) a result reporting a pending state."""
        args = result.args
        if self._poll_tools is not None and self._poll_tools.tracks(result.tool):
            typed = isinstance(args, dict) and any(isinstance(args.get(k), str) and args[k] for k in _INPUT_KEYS)
            if not typed:
                return True
        command = shell_command(args)
        if command is not None and not command.strip():
            return True  # an empty shell command reads more output of the running one
        if self._poll_commands.match(args):
            return True
        if failed:
            return False
        head = result.content[:2000]
        return any(p.search(head) for p in self._poll_states)

    def _action(self, kind: ActionKind, event: ToolCall | ToolResult, count: int, text: str, threshold: int) -> Action:
        return action_for(event, policy=self.name, kind=kind, count=count, text=text, threshold=threshold)
