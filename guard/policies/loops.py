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
  in ``halt_after`` model responses asks the runtime to end the run.
- **Polls back off.** A poll (a known poll tool, a shell command matching
  ``poll_commands``, or a result reporting a running or pending state)
  whose state changes is never acted on. One that keeps returning the same
  thing gets back-off nudges naming a wait (``poll_waits``), and is denied
  only once it has been unchanged for ``poll_deny_after`` polls or
  ``poll_deny_seconds``, never before a nudge, and never while the agent
  waits half the longest of ``poll_waits`` between polls.
- **Failures.** The same call failing ``error_at`` times draws an advisory;
  its ``error_deny_at``-th attempt is denied (a retry that then succeeds is
  left alone). The same tool failing with the same kind of error
  (``guard.normalize.error_kind``) ``error_at`` times in a row, with
  whatever arguments, draws an advisory, and from ``streak_deny_at`` failures
  its further calls are denied until one of its calls succeeds (a shell
  command's streak is its program's; failures that say nothing but an exit
  code are no one kind, and draw neither; failures in one model response
  are one attempt). A shell tool refusing commands of several programs the
  same way, none of which ran, draws advisories of its own, never a
  denial. A failure
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

import functools
import math
from collections import deque
from typing import Any, NamedTuple, TypeVar

from msgspec import Struct, field
from msgspec.structs import force_setattr

from bus import AgentStatus, ToolCall, ToolResult, UserMessage
from guard._regex import lazy_compile
from guard._text import one_line
from guard.actions import Action, ActionKind, action_for
from guard.calls import DEFAULT_IGNORED_ARGS, LOOPS_INTERJECTIONS, CallSelector, Interjections
from guard.fingerprint import Fingerprint, FingerprintCache, canonical_json, fingerprint
from guard.normalize import DEFAULT_RESULT_NORMALIZE, ResultNormalizer, Shape, error_head, error_kind
from guard.patterns import CommandPatterns, RegexSet, RegexSets, ToolFilter, compile_regex, shell_command
from guard.policies.progress import (
    DEFAULT_MUTATING_COMMANDS,
    DEFAULT_MUTATING_TOOLS,
    ProgressRule,
    check_loose_patterns,
    loose_tool_name,
)
from guard.policies.reads import (
    DEFAULT_READ_ONLY_COMMANDS,
    DEFAULT_READ_ONLY_TOOLS,
    OPTIONS,
    ReadOnlyRule,
    hands_off,
    keeps_books,
    makes,
    makes_command,
    names_a_read,
    without_prefixes,
)
from guard.policies.requests import (
    asks_to_keep_polling,
    asks_to_repeat,
    makes_thing,
    requested_makes,
    requested_repeats,
)
from guard.policies.targets import call_target, shell_program, write_target
from guard.policies.waits import declared_wait, stated_wait
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

__all__ = ["LOOPS_PLUGIN", "LoopsPolicy"]

LOOPS_PLUGIN = "loop-detector"

_PREVIEW = 300
_NOTHING_FOUND_CHARS = 120
_FAILED = b"\x00failed"
_TRANSIENT = b"\x00transient"
_OPAQUE = b"\x00opaque"
_OPAQUE_CHARS = 200
# The yes/no questions asked of a result, each of the head it reads (0: all of it).
_CANCELLED_CHECK, _ERROR_CHECK, _POLL_CHECK, _TRANSIENT_CHECK, _OPAQUE_CHECK, _NOTHING_CHECK = range(6)
_CANCELLED_HEAD = 300
_STATE_HEAD = 2000

_EXIT_STATUS = lazy_compile(r"(?i)(?:\bexit(?:ed)?(?: with)? (?:code|status):? ?|<returncode>)(-?\d{1,3})\b")
"""A command's exit status as runtimes print it (``Exit code 124``,
``Process exited with code 124``, ``Exit Code: 124``, mini-swe-agent's
``<returncode>124</returncode>``)."""
_SUCCEEDED = frozenset({0})
"""The exit status of a command that succeeded, whatever its output says."""
_TIMED_OUT = 124
"""The exit status ``timeout`` gives a command it stopped."""
_FINDING_EXITS = {"robocopy": 0b111, "diff": 0b1, "cmp": 0b1, "fc": 0b1, "pylint": 0b11110}
"""Programs whose non-zero exit status, made only of these bits, reports
what they found, not a failure: files that differ, files robocopy copied
(1 to 7), the kinds of message pylint reported (2 to 16; 1 is a fatal
error, 32 a usage error)."""
_PYTHON_MODULE = lazy_compile(r"(?:^|[\s;&|(])python[0-9.]*(?:\.exe)?\s+(?:-[A-Za-z]+\s+)*-m\s*([\w.]+)")
"""The module a ``python -m`` step runs (``python3 -m pylint a.py``)."""
_STEP_MARK = lazy_compile(r"[;&|\n]")
"""What may start another step of a shell command after the one read."""
_UNDER_TIMEOUT = lazy_compile(r"(?:^|[;&|(]\s*)(?:sudo\s+)?g?timeout\s")
"""A shell command that runs a step under ``timeout``."""
_EXIT_TAIL = 512
_NOT_FOUND = compile_regex(
    r"(?i)\b(?:(?:(?:could|did|do|does|was|were)(?:n[o']t| not)|ca(?:n[o']t|n not|nnot))(?: be)?(?: able to)?\s+"
    r"(?:\w+\s+){0,2}?(?:find|locate|determine|identify|retrieve|spot)"
    r"|unable to\s+(?:\w+\s+){0,2}?(?:find|locate|determine|identify|retrieve|spot)"
    r"|no\s+(?:[\w-]+\s+){0,4}?(?:(?:was|were|is|are)\s+)?(?:found|documented|mentioned|located|specified)"
    r"|(?:does|do)(?:n[o']t| not)\s+(?:seem to\s+|appear to\s+)?(?:state|mention|document|specify|say)"
    r"|there (?:is|was|are|were) no (?:mention|reference|record|information)|found no(?:thing)?)\b",
    setting="loops.not_found",
)
"""An answer in prose that opens by saying the thing asked for was not
found (``I could not locate the loader``, ``No maximum size is
documented``), as a subagent or an answering tool words it anew each time."""
_NOT_FOUND_HEAD = 300
_HEADING = lazy_compile(r"\s*(?:#+ [^\n]*|\*\*[^\n]*\*\*:?)?\s*")
_SENTENCE_END = lazy_compile(r"[.!?](?:\s|$)|\n")
_AMOUNT = lazy_compile(r"(?<![\w.:/-])\d{7,19}(?![\w:/-])")
"""A number of seven digits or more standing alone: noise when results are
compared (ids, epoch times), but what a poll of a count, a byte total or a
lag is watching."""
_RESTLESS = lazy_compile(
    r"(?i)(?:uptime|heartbeat|time(?:stamp)?|_?(?:ns|us|ms)|nanos|epoch|clock|rss|mem(?:ory)?|heap|cpu|load)"
    r"\W{0,4}(?:\(\w+\)\W{0,3})?$"
)
"""What names a number that moves whether or not the job does, just before
it: a clock, an uptime, a heartbeat, memory."""
_AMOUNTS_READ = 4096
_BATCH = 8
_BATCH_SECONDS = 1.0
_FINISHED = compile_regex(r"<status>(?:completed|failed|killed|exited)</status>", setting="loops.finished")
"""A background shell's or task's answer that it has finished (Claude Code's
``BashOutput`` and ``TaskOutput``: ``<status>completed</status>``): one
process, so nothing else in it can still be running."""
_CLOCK_SKEW = 86_400
_NO_CODES: frozenset[int] = frozenset()

_KEY_PRESS = lazy_compile(
    r"\s*(?:xdotool\s+key(?:\s+--(?:delay|repeat)\s+\d+|\s+--clearmodifiers)*|tmux\s+send-keys(?:\s+-t\s+\S+)?"
    r"|adb(?:\s+-s\s+\S+)?\s+shell\s+input\s+keyevent)((?:\s+[\w+-]+){1,8})\s*$"
)
"""A shell command that only presses keys, and the keys it presses."""
_KEY_PREFIX = lazy_compile(r"^(?:KEYCODE_)?(?:DPAD_)?")

_UNNAMED_ADVICE = (
    "loop-detector: you have clicked this {count} times ({tool} {arguments}) and each time the tool only said "
    "it clicked, which does not show whether anything changed. Look at the page (a snapshot or a screenshot) "
    "before clicking it again: if nothing changed, the control does nothing and clicking it again will not help."
)
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
_EARLY_DENIAL = (
    "loop-detector denied this call; it did not run. This exact call has failed {count} times with a rate "
    "limit or an outage, and the service said how long to wait before a retry: {left} of that wait remain:\n"
    "- tool: {tool}\n"
    "- arguments: {arguments}\n"
    "Retrying sooner will fail the same way. Wait {left} before calling it again, or do other work meanwhile."
)


_GROWING = lazy_compile(r"(?:^|[/\\])claude-[^/\\]+[/\\](?:[^/\\]+[/\\])+tasks[/\\][^/\\]+\.output$")
"""A file a reading tool reads again to see what was added: a background
task's output, which Claude Code writes to ``tasks/<id>.output`` under its
own temporary directory (``/tmp/claude-<uid>/<project>/...``) and tells
the model to ``Read`` while the task runs, as ``BashOutput`` was read."""


_STREAK_ADVICE = (
    "loop-detector: {tool} has failed {count} times in a row with the same kind of error, with different "
    "arguments: {kind}\n"
    "Changing the arguments is not fixing it. Stop and find the cause: re-read the error and the input it "
    "names (view the file before editing it again, check the tool's name and parameters), or use another "
    "tool. After {deny_at} such failures further {tool} calls will be denied until one succeeds."
)
_TOOL_STREAK_ADVICE = (
    "loop-detector: {tool} has failed {count} times in a row with the same kind of error, whatever command it "
    "was given: {kind}\n"
    "The tool or its environment is refusing these commands, not one program: changing the command is not "
    "fixing it. Read the error for what the tool allows (its sandbox, workspace or syntax rules), use another "
    "tool, or tell the user what is blocked."
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
    "stop it, or report what you found. If it is a long job (a CI run, a deploy, a build), poll it again only "
    "after waiting at least {patient} seconds ({how})."
)
_HALT = (
    "loop-detector: {tool} with the same arguments was denied {denials} times and the agent kept retrying it; "
    "the run should end."
)
_MOVING = (
    r"running|pending|queued|processing|(?:[a-z]+_)*in[_ -]?progress|in[_ -]?transit|out[_ ]for[_ ]delivery|"
    r"starting|creating|building|deploying|sending|uploading|downloading|finali[sz]ing"
)
"""The states ``poll_states`` reads as still moving wherever they stand (as a word)."""
_MOVING_WHOLE = r"progressing|reconciling|provisioning|initiali[sz]ing|updating|syncing|working"
"""Still moving too, but read only as a state's whole value: these words open prose."""
_STATUS_CHECKS = (
    r"gh" + OPTIONS + r"\s+(run|pr|workflow)" + OPTIONS + r"\s+(view|checks|status|watch|list)|"
    r"(kubectl|oc)" + OPTIONS + r"\s+(get|describe|wait|top|logs|rollout" + OPTIONS + r"\s+status|"
    r"argo" + OPTIONS + r"\s+rollouts" + OPTIONS + r"\s+(get|status|list))|"
    r"argocd" + OPTIONS + r"\s+app" + OPTIONS + r"\s+(get|wait|list|history|resources)|"
    r"flux" + OPTIONS + r"\s+(get|events|logs|stats)|"
    r"(docker|podman)" + OPTIONS + r"(\s+compose" + OPTIONS + r")?\s+(ps|logs|inspect|stats)|"
    r"docker-compose" + OPTIONS + r"\s+(ps|logs)|helm" + OPTIONS + r"\s+(status|list|ls|history)|"
    r"systemctl" + OPTIONS + r"\s+(status|is-active|is-failed)|journalctl\b|squeue\b|qstat\b|"
    # a cloud CLI's operation that reads: aws SERVICE describe-x|get-x|list-x|wait|ls, gcloud GROUP... describe|list
    r"aws" + OPTIONS + r"\s+[\w-]+" + OPTIONS + r"\s+(describe-[\w-]+|get-[\w-]+|list-[\w-]+|wait|ls|tail)(\s|$)|"
    r"(gcloud|az)" + OPTIONS + r"(\s+[a-z][\w-]*){1,4}?\s+(describe|list|show|wait)(\s|$)|"
    r"(npm|pnpm|yarn)\s+(view|info)\b|(dig|nslookup|host)\s|nvidia-smi\b|"
    r"curl\b[^|;&]*\b(health|status|ready|ping)|nc\s+-[a-zA-Z]*z|pg_isready\b|"
    r"(mysqladmin|redis-cli)\b[^|;&]*\bping\b|cat\b[^|;&]*\.(log|out|status)\b"
)
"""The status checks ``poll_commands`` knows, as a step runs them (options
before the subcommand read through: ``kubectl -n staging get pods``)."""
_BLOCKING_WAIT = (
    "the tool's own wait or timeout argument, or one command that waits for the change, bounded; in sh: "
    "timeout 600 sh -c 'until <check>; do sleep {wait}; done'"
)
"""How to wait: never a bare ``sleep`` first in a command, which Claude Code
refuses to run; a wait loop bounded, since an unbounded one outlives the
thing it waits for."""
_INPUT_KEYS = ("chars", "input", "stdin", "text", "keys", "data")
_PAGING_VALUE, _POLL_VALUE, _UNNAMED_VALUE, _STEPPED_VALUE = 1, 2, 4, 8


@functools.lru_cache(maxsize=16)
def _one_pass(checks: tuple[tuple[tuple[str, ...], bool], ...]) -> RegexSets:
    """The result checks as one RE2 set, compiled once per process and shared
    by every session's guard, as the normaliser's patterns are (a set is
    most of the memory a guard would otherwise hold)."""
    return RegexSets((RegexSet(patterns), anchored) for patterns, anchored in checks)


def _elapsed(seconds: float) -> str:
    if seconds < 90:
        return f"{max(seconds, 0):.0f} s"
    return f"{seconds / 60:.0f} min"


_GRIND_ADVICE = (
    "loop-detector: {target} has returned the same result {count} times in a row although the arguments "
    "changed each time ({tool} {arguments}). Changing the arguments is not getting you anything new: re-read "
    "that result and act on it, or take a different approach."
)
_WRITE_DENIAL = (
    "loop-detector denied this call; it did not run. It writes the same content to {target} once more ({count} "
    "times now), with no other change to that file in between, so it changes nothing:\n"
    "- tool: {tool}\n"
    "- arguments: {arguments}\n"
    "The file already holds this content. Look at why what you do with it fails instead of writing it again."
)
_FLIP_ADVICE = (
    "loop-detector: you have now made this same edit to {target} {count} times, with other edits to it in "
    "between: the file is going back and forth between versions ({tool} {arguments}). Neither version has "
    "worked; re-read what each run told you and make a change that addresses it, instead of switching back."
)
_REDO_ADVICE = (
    "loop-detector: you have now made this same edit to {target} {count} times, the file put back in between, "
    "and after each of the last {rounds} {check} gave the same result ({tool} {arguments}). Making it again "
    "will not change that: re-read what {check} said and make a different change."
)
_REDO_DENIAL = (
    "loop-detector denied this call; it did not run. It would make the same edit to {target} once more, "
    "after the file was put back: after each of the last {rounds} times it was made, {check} gave the same "
    "result:\n"
    "- tool: {tool}\n"
    "- arguments: {arguments}\n"
    "Make a different change, based on what that result says."
)
_FLIP_DENIAL = (
    "loop-detector denied this call; it did not run. It would make the same edit to {target} once more ({count} "
    "times now), with other edits undoing it in between: the file keeps going back and forth between versions:\n"
    "- tool: {tool}\n"
    "- arguments: {arguments}\n"
    "Neither version has worked. Make a different change, based on what the failures say."
)
_MADE_ADVICE = (
    "loop-detector: you have now made this call {count} times with the same arguments, and each time it made "
    "one more ({tool} {arguments}; the last answer: {answer}). If you meant to make one, stop: check what the "
    "earlier calls made and remove the duplicates, instead of calling it again."
)
_BATCH_ADVICE = (
    "loop-detector: this batch statement ({tool}) has now answered the same {count} times in a row ({answer}). "
    "If its rows should run out, check that each run changes rows the next one no longer matches (its WHERE "
    "excludes what it changed); if it is still working through them, carry on."
)
_TRANSIENT_ADVICE = (
    "loop-detector: this call has now failed {count} times with what looks like a transient error (rate limit, "
    "server error, timeout or dropped connection) ({tool} {arguments}). Wait before retrying (back off: 5, 10, "
    "30 seconds), or check whether the service is down; after {deny_at} failures it will be denied."
)


class _Rules:
    """The thresholds and class of one tool's calls: the section's, with its
    ``[loops.tools]`` table and the tool's annotations applied."""

    __slots__ = (
        "deny_at",
        "error_at",
        "error_deny_at",
        "grind_at",
        "identity",
        "ignored",
        "kind",
        "mutating",
        "poll_deny_after",
        "poll_nudge_at",
        "streak_deny_at",
        "transient_at",
        "transient_deny_at",
    )

    def __init__(self, config: LoopsConfig, tool: LoopsToolConfig | None) -> None:
        def pick(name: str) -> int:
            value = getattr(tool, name, None) if tool is not None else None
            return int(getattr(config, name) if value is None else value)

        self.deny_at = pick("deny_at")
        self.error_at = pick("error_at")
        self.error_deny_at = pick("error_deny_at")
        self.streak_deny_at = pick("streak_deny_at")
        self.transient_at = pick("transient_at")
        self.transient_deny_at = pick("transient_deny_at")
        self.grind_at = pick("grind_at")
        self.poll_nudge_at = pick("poll_nudge_at")
        self.poll_deny_after = pick("poll_deny_after")
        self.kind = tool.kind if tool is not None else ""
        self.ignored: frozenset[str] | None = (
            frozenset(config.ignored_args) | frozenset(tool.ignored_args)
            if tool is not None and tool.ignored_args
            else None
        )
        self.identity = tool.identity_args if tool is not None else ()
        self.mutating = tool.mutating if tool is not None else None


_DEFAULT_HINTS: dict[str, bool] = {}


def _annotated(rules: _Rules, hints: dict[str, bool]) -> _Rules:
    """``rules`` with a tool's annotations (MCP ``readOnlyHint``,
    ``destructiveHint``, ``idempotentHint``) as defaults: a read-only tool
    is never progress, a tool that changes things (not read-only) is, unless
    its ``[loops.tools]`` table says otherwise."""
    if rules.mutating is not None or "readOnlyHint" not in hints:
        return rules
    annotated = _Rules.__new__(_Rules)
    for name in _Rules.__slots__:
        setattr(annotated, name, getattr(rules, name))
    annotated.mutating = not hints["readOnlyHint"]
    return annotated


class _Signature:
    """What one call signature did in this epoch: how many occurrences in a
    row returned the same (normalised) result, that result, whether it was a
    failure or a poll, whether it said in prose that nothing was found (told
    only of a call made again), a poll's long numbers (``_amounts``), when
    the unchanged stretch began, and how often it was nudged and denied
    since."""

    __slots__ = (
        "amounts",
        "count",
        "denials",
        "denied_step",
        "failed",
        "last",
        "level",
        "made",
        "nudges",
        "poll",
        "reading",
        "result",
        "resume",
        "shape",
        "since",
        "slept",
        "spacing",
        "told",
        "transient",
        "ts",
        "unfound",
        "unnamed",
        "waited",
    )

    def __init__(self) -> None:
        self.count = 0
        self.unfound = False
        self.unnamed = False
        """The last result only acknowledged a click on a control nothing names
        (``_UNNAMED_VALUE``): whether it did anything cannot be told until
        the agent looks."""
        self.amounts: tuple[int, ...] = ()
        self.resume = 0.0
        self.last = 0
        self.result = b""
        self.shape: Shape | None = None
        self.failed = False
        self.transient = False
        self.poll = False
        self.waited = False
        """The last result was a poll only because the agent waited before it:
        the same call made again without waiting is judged as a repeat."""
        self.reading = ""
        """The last result when it was a clock read on its own (``ResultNormalizer.is_reading``)."""
        self.since = 0.0
        self.nudges = 0
        self.level = 0
        self.told = 0
        """The ``level`` past the longest wait a nudge named; a poll whose
        result moves and then stalls again is not told that wait again."""
        self.ts = 0.0
        self.slept = 0.0
        """The agent's ``_AgentLoops.slept`` when ``ts`` was taken."""
        self.spacing = 0.0
        self.denials = 0
        self.denied_step: int | None = None
        """The model response (``step``) of the last denial counted in ``denials``."""
        self.made = 0
        """Results in a row that made one more of something (``LoopsPolicy._made``)."""


class _ToolFacts(NamedTuple):
    """What a tool's name says of a call that runs no shell command."""

    edits: str | None
    """What kind of edit it makes (``ProgressRule.kind``), if any."""
    paging: bool
    poll: bool
    reads: bool
    """It only reads (``ReadOnlyRule``)."""
    books: bool
    """It keeps the agent's own books (``keeps_books``) or hands off to another agent (``hands_off``)."""
    makes: bool
    """Each call makes something new (``makes``)."""


class _Streak:
    """A run of failures of one tool (or shell program) with the same kind
    of error: the kind, how many attempts (failures in one model response,
    ``step``, arriving together, are one attempt: the model saw none of
    them before making the others; ``batch`` counts them), when the last
    failed, whether more than one program failed in it (counted for a
    shell tool, whatever its program), whether a call of it was denied
    (``denied``), and whether its next attempt runs (``retry``: something
    else succeeded since the denial, see ``_target_denial``)."""

    __slots__ = ("batch", "count", "counted", "denied", "kind", "mixed", "program", "retry", "step", "ts")

    def __init__(self, kind: str, step: int, ts: float, program: str | None) -> None:
        self.kind = kind
        self.count = 1
        self.batch = 1
        self.counted = True
        self.step = step
        self.ts = ts
        self.program = program
        self.mixed = False
        self.denied = False
        self.retry = False


class _Grind:
    """One target's run of calls with other arguments and the same result;
    ``fp`` and ``args`` are its last call's."""

    __slots__ = ("advised", "args", "count", "fp", "result", "ts")

    def __init__(self, result: bytes, fp: bytes, args: Any, ts: float) -> None:
        self.result = result
        self.fp = fp
        self.args = args
        self.count = 1
        self.ts = ts
        self.advised = False


def _same_but(before: Any, after: Any, skip: frozenset[str]) -> bool:
    """Whether two calls' arguments are the same but for the keys in
    ``skip`` (paging): what their fingerprints without those keys would say,
    without hashing arguments that may be large."""
    if not isinstance(before, dict) or not isinstance(after, dict):  # pragma: no cover - only a dict names a target
        return False
    keys = before.keys() - skip
    if keys != after.keys() - skip:
        return False
    for key in keys:
        old, new = before[key], after[key]
        if old is new:
            continue
        if type(old) is str and type(new) is str:
            if old != new:
                return False
        elif canonical_json(old) != canonical_json(new):
            return False
    return True


# fmt: off
_OPERATION_KEYS: dict[str, int] = {
    **dict.fromkeys(
        ("action", "action_type", "actionType", "command", "cmd", "subcommand", "op", "operation", "verb", "mode"),
        _PAGING_VALUE | _POLL_VALUE,
    ),
    "method": _POLL_VALUE,
    **dict.fromkeys(("direction", "key", "keys"), _PAGING_VALUE),
}
# fmt: on
"""Arguments whose value names what a call does, and which words they may
hold: a poll or a paging word (``{"action": "poll"}``, ``{"action":
"scroll"}``), a poll word (``{"method": "get_status"}``) or a paging word
(``{"direction": "down"}``, ``{"key": "ArrowDown"}``, and a computer-use key
press's ``text``: ``{"action": "key", "text": "Page_Down"}``). A search
term, a path or a file's content is data, whatever word it is."""
_KEY_PRESSES = frozenset({"key", "keypress", "key_press", "press", "press_key"})
_VALUE_KEYS = frozenset(_OPERATION_KEYS) | {"text"}
"""Every argument ``_values`` reads: a call with none of them names no operation."""

_CLICK = lazy_compile(r"(?i)click|\btap\b")
"""An operation value that clicks: ``{"action": "left_click"}``, ``tap``."""
_CLICK_TOOLS = ("*click*", "tap", "*_tap", "tap_*")
"""Tools that click: ``browser_click``, ``click_element_by_index``, ``mobile_tap``."""
_CLICK_KEYS = frozenset({"action", "action_type", "type"})
"""Arguments whose value may say a call clicks (``{"action": "left_click"}``)."""
_LABEL_KEYS = ("element", "label", "text", "name", "title")
_LABELS = frozenset(_LABEL_KEYS)
_ACK_CHARS = 200
"""A click's result at most this long is an acknowledgement that may name
what was clicked; a longer one is the page."""
_CONTROL = lazy_compile(r"""(?i)[\W_]*(?:the\s+)?(.{1,40}?)(?:\s+(?:button|link|arrow|icon|control))?[\W_]*""")
"""A control's label without quotes, marks, an article or its role word."""

_OPEN_CALLS = 64
"""Calls waiting for their results kept per agent: more than parallel
calls ever reach, so only calls whose results never come are dropped."""

_TARGETS_KEPT = 256
"""Targets whose runs (``grinds``) and written files (``writes``) an agent
keeps: the latest touched, so a long session's state stays bounded."""

# a handle into a browser page's accessibility snapshot: Playwright MCP's e44, s2e44 (older) and f1e44 (a frame's)
_SNAPSHOT_REF = lazy_compile(r"(?:[fs]\d+)?e\d+")
_HANDLE_KEYS = ("ref", "target")  # Playwright MCP named the handle ref, and from 0.0.8x target
# the arguments a search tool (web search, a retriever, a database) takes its question in, and how
# long its answer must be to be the same answer to other queries (a grind)
_QUERY_KEYS = frozenset({"query", "q", "search_query", "keywords"})
# a file of source code: a state in it ("status = 'running'") is code, no job's state
_SOURCE_FILE = lazy_compile(
    r"(?i)\.(?:py|pyi|js|jsx|mjs|cjs|ts|tsx|go|java|kt|kts|rb|rs|c|h|cc|cpp|hpp|cs|php|swift|scala|m|mm|"
    r"sh|bash|zsh|ps1|lua|pl|ex|exs|erl|hs|ml|dart|vue|svelte|sql)$"
)
_ANSWER_CHARS = 64
# what a result may quote in its first line as its header: the call's command, URL or query
# (Gemini CLI's "Command: ...", a fetch server's "Contents of <url>:"), if that long
_QUOTED_KEYS = frozenset({"command", "cmd", "url", "query"})
_QUOTED_CHARS = 8
_HEADER_CHARS = 1024
# Gemini CLI's stand-in for a command that printed nothing (first in a result, or after the command quoted)
_EMPTY_OUTPUT = "\nOutput: (empty)\n"
_EMPTY_HEAD = _EMPTY_OUTPUT[1:]

_K = TypeVar("_K")
_V = TypeVar("_V")


def _first_sentence(content: str) -> str:
    """The first sentence of a prose answer, past a leading heading."""
    start = _HEADING.match(content, 0, _NOT_FOUND_HEAD)
    head = content[start.end() if start else 0 : _NOT_FOUND_HEAD]
    end = _SENTENCE_END.search(head)
    return head[: end.start() if end else len(head)]


def _amounts(content: str, now: float) -> tuple[int, ...]:
    """A poll result's long numbers (``_AMOUNT``), read at its head and
    tail, which comparison leaves out as noise; a clock reading (epoch
    seconds or milliseconds within a day of ``now``) is left out here too,
    and so is a number named as one that moves whether or not the job does
    (``uptime_ms``, ``heartbeat``, ``VmRSS``, ``memory``: ``_RESTLESS``)."""
    text = content if len(content) <= 2 * _AMOUNTS_READ else content[:_AMOUNTS_READ] + " " + content[-_AMOUNTS_READ:]
    found = []
    for match in _AMOUNT.finditer(text):
        number = int(match.group())
        if abs(number - now) <= _CLOCK_SKEW or abs(number - now * 1000) <= _CLOCK_SKEW * 1000:
            continue
        if _RESTLESS.search(text, max(0, match.start() - 24), match.start()):
            continue
        found.append(number)
    return tuple(found)


def _exit_codes(content: str) -> frozenset[int]:
    """The exit statuses a shell result states, at its head or its tail
    (where runtimes print them); none for a failure of the tool itself,
    which ran no program."""
    found = (
        _EXIT_STATUS.search(content, 0, _STATE_HEAD),
        _EXIT_STATUS.search(content, max(0, len(content) - _EXIT_TAIL)),
    )
    return frozenset(int(status.group(1)) for status in found if status is not None)


def _no_failure(args: Any, program: str, codes: frozenset[int]) -> bool:
    """Whether the exit statuses ``codes`` of a shell command running
    ``program`` report no failure: the command was stopped by ``timeout``
    (``timeout 20 kubectl logs -f ...``, the standard way to read a stream
    for a while, whose output is what it read), or its program's status
    says what it found (``_FINDING_EXITS``; a Python module run with
    ``python -m`` by the module's name)."""
    command = shell_command(args)
    if _TIMED_OUT in codes and command is not None and _UNDER_TIMEOUT.search(command) is not None:
        return True
    name = program.lower().removesuffix(".exe")
    if name.startswith("python") and command is not None:
        modules = list(_PYTHON_MODULE.finditer(command))
        if modules and _STEP_MARK.search(command, modules[-1].end()) is None:  # the last step's module
            name = modules[-1].group(1)
    bits = _FINDING_EXITS.get(name, 0)
    return any(code > 0 and not code & ~bits for code in codes)


def _unquoted(args: dict[str, Any], content: str) -> str | None:
    """``content`` without the call's own command, URL or query quoted in
    its first line (``_QUOTED_KEYS``, some of which ``args`` holds);
    ``None`` when it quotes none."""
    end = content.find("\n", 0, _HEADER_CHARS)
    head = content[: end if end >= 0 else _HEADER_CHARS]
    for key in _QUOTED_KEYS.intersection(args):
        value = args[key]
        if isinstance(value, str) and len(value) >= _QUOTED_CHARS and value in head:
            return content.replace(value, "", 1)  # its first place is in the header
    return None


def _snapshot_ref(value: Any) -> bool:
    return isinstance(value, str) and _SNAPSHOT_REF.fullmatch(value) is not None


def _typed(tool: str, args: Any) -> bool:
    """Whether a call types input (``write_stdin`` with characters): a poll
    tool's call that sends something is no poll. A tool that waits types
    nothing: Playwright's ``browser_wait_for`` is given the ``text`` it
    waits for."""
    return (
        isinstance(args, dict)
        and any(isinstance(args.get(k), str) and args[k] for k in _INPUT_KEYS)
        and "wait" not in tool.lower()
    )


_WAIT_KEYS = frozenset(
    {
        *("wait", "wait_time", "wait_seconds", "wait_time_seconds", "wait_ms", "wait_time_ms"),
        *("waitTime", "waitSeconds", "waitTimeSeconds", "WaitTimeSeconds", "waitMs", "waitTimeMs"),
        *("block", "block_ms", "blockMs", "long_poll", "long_poll_seconds", "poll_timeout", "poll_timeout_seconds"),
    }
)
"""Arguments that make a call wait for something to arrive (a long poll:
SQS's ``WaitTimeSeconds``, a Redis stream's ``block``); asked only of a
call that runs no command, whose ``wait`` is how long to wait for it."""


_SQL_KEYS = ("sql", "statement", "stmt", "sql_query", "sqlQuery")
"""Arguments that hold SQL whatever the tool; ``query`` does only in a
database's tool (``_DATABASE_WORDS``), elsewhere it is a search's words."""
_SQL_ARGUMENTS = frozenset((*_SQL_KEYS, "query"))
_DATABASE_WORDS = frozenset(
    {"sql", "db", "database", "postgres", "postgresql", "pg", "mysql", "sqlite", "d1", "bigquery", "snowflake"}
    | {"duckdb", "clickhouse", "redshift", "mssql", "supabase", "neon", "turso"}
)
_NAME_PARTS = lazy_compile(r"[a-z0-9]+")
_SQL_WRITE = lazy_compile(
    r"(?is)^[\s(]*(?:(?:--[^\n]*(?:\n|$)|/\*.*?\*/)[\s(]*)*(?:"
    r"(?:insert|update|delete|merge|upsert|replace|create|alter|drop|truncate|rename|grant|revoke|call|exec"
    r"|execute|vacuum|reindex|refresh)\b"
    r"|copy\s+[\w.\"]+\s*(?:\([^)]*\)\s*)?from\b"  # COPY t (a, b) FROM loads; COPY (SELECT ...) TO reads
    r"|explain\s+analy[sz]e\b.*\b(?:insert|update|delete|merge)\b"  # runs the statement it explains
    r"|with\b.*\bas\s*\(\s*(?:insert|update|delete|merge)\b)"  # a data-changing common table expression
)
"""A SQL statement that changes something, read at its start (comments
before it passed over)."""


def _sql_texts(tool: str, args: Any) -> list[str]:
    """The SQL a call hands a query tool: its ``_SQL_KEYS`` arguments, and
    its ``query`` where the tool's name says it is a database's."""
    if not isinstance(args, dict) or _SQL_ARGUMENTS.isdisjoint(args):  # most calls hold none
        return []
    texts = [args.get(key) for key in _SQL_KEYS]
    if "query" in args and not _DATABASE_WORDS.isdisjoint(_NAME_PARTS.findall(tool.lower())):
        texts.append(args["query"])
    return [text for text in texts if isinstance(text, str)]


def _writes_sql(tool: str, args: Any) -> bool:
    """Whether a call hands a query tool (``mysql_query``, a Postgres
    server's ``query``) a statement that changes the database, in any of
    the statements it runs: such a call acts, and what it changed may
    change the next check's answer."""
    return any(_SQL_WRITE.match(statement) for text in _sql_texts(tool, args) for statement in text.split(";"))


# A statement that changes at most so many rows a run (DELETE ... LIMIT 100, UPDATE TOP (500), ROWNUM <= 100,
# a WITH batch AS (... LIMIT 1000) DELETE ...): run again, it changes the next batch
_SQL_BATCH = lazy_compile(
    r"(?is)^[\s(]*(?:(?:--[^\n]*(?:\n|$)|/\*.*?\*/)[\s(]*)*"
    r"(?:(?:delete|update)\b.*?(?:\blimit\s+\d+|\btop\s*\(?\s*\d+|\brownum\s*<)"
    r"|with\b.*?\blimit\s+\d+\b.*?\)\s*(?:delete|update)\b)"
)
# the same inside a shell command, the statement quoted after the client's option (psql -c "DELETE ...")
_SQL_BATCH_QUOTED = lazy_compile(
    r"(?is)[\"'](?:delete|update)\b.*?(?:\blimit\s+\d+|\btop\s*\(?\s*\d+|\brownum\s*<)"
    r"|[\"']with\b.*?\blimit\s+\d+\b.*?\)\s*(?:delete|update)\b"
)
# the database clients a shell command hands SQL to (psql -c "DELETE ...")
_SQL_CLIENTS = frozenset({"psql", "mysql", "mariadb", "sqlite3", "duckdb", "clickhouse-client", "sqlcmd", "bq"})
# and the programs that run one in a container (docker exec db psql -c "...", kubectl exec pod -- psql -c "...")
_CONTAINER_RUNNERS = frozenset({"docker", "podman", "kubectl", "oc"})
# how many rows a statement says it changed: {'affected_rows': 100}, "rowCount": 100, Rows affected: 100,
# 100 row(s) affected, SQL Server's {"rowsAffected": [100]}, psql's DELETE 100, SQLite's changes: 100
_ROWS_CHANGED = lazy_compile(
    r"(?i)(?:affected[ _]?rows|rows[ _]?affected|row_?count|changes|changed_?rows|num_?affected_?rows)"
    r"[\"']?\s*[:=]\s*\[?\s*(\d+)"
    r"|\b(\d+)\s+rows?(?:\(s\))?\s+(?:affected|deleted|updated)\b|^\s*(?:DELETE|UPDATE)\s+(\d+)\s*$"
)
BATCHES_ADVISED = 20
"""Batches in a row that each say they changed as many rows, after which a
batch statement is advised once to check that its runs make progress."""


def _changed_a_batch(tool: str, args: Any, content: str, program: str | None) -> bool:
    """Whether ``content`` answers a statement that changes rows a batch at
    a time (``LIMIT``, ``TOP``, ``ROWNUM``), run by a query tool or handed
    to a database client by a shell command (whose ``program`` it is), by
    saying it changed some: the same statement run again changes the next
    batch, so it repeats nothing until it says it changed none."""
    texts = _sql_texts(tool, args)
    if isinstance(args, dict) and isinstance(args.get("query"), str):  # any tool's, read as a statement
        texts.append(args["query"])
    batched = any(_SQL_BATCH.match(statement) for text in texts for statement in text.split(";"))
    if not batched and (program in _SQL_CLIENTS or program in _CONTAINER_RUNNERS):
        command = shell_command(args) or ""
        client = program in _SQL_CLIENTS or not _SQL_CLIENTS.isdisjoint(command.split())
        batched = client and _SQL_BATCH_QUOTED.search(command) is not None
    if not batched:
        return False
    return any(int(n) > 0 for found in _ROWS_CHANGED.findall(content[:_STATE_HEAD]) for n in found if n)


def _waits(args: Any) -> bool:
    """Whether a call that runs no command asks its tool to wait for news
    before answering (a positive ``_WAIT_KEYS`` value): what it answers is
    a poll's, the wait the advice to back off names."""
    if not isinstance(args, dict) or _WAIT_KEYS.isdisjoint(args):
        return False
    return any(
        isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
        for key, value in args.items()
        if key in _WAIT_KEYS
    )


def _source_file(note: _Note) -> bool:
    """Whether ``note``'s call read a file of source code."""
    return note.file and note.target is not None and _SOURCE_FILE.search(note.target) is not None


def _streak_name(streak: tuple[str, str | None]) -> str:
    """Who failed: the tool, or for a shell command its program (``grep``
    run by ``Bash``), whose failures the streak counts."""
    tool, program = streak
    return tool if not program else f"`{program}` ({tool})"


_REFUSED_OTHERS = 2
"""Failures of other programs alike that make a program's streak its shell
tool refusing commands, as far as denying goes."""


def _refused_alike(state: _AgentLoops, key: tuple[str, str | None], streak: _Streak, others: int = 0) -> bool:
    """Whether the failures of a shell program's streak (``key``) are its
    shell tool refusing the commands of several programs the same way:
    then the tool failed, not the program, and the tool's advisory says so
    (the program's would contradict it). With ``others``, only when at
    least that many of the tool's failures were other programs': one other
    program's failure alike is weak evidence against a program failing for
    real again and again (in a shell that states no exit status, where
    every failure joins the tool's streak), so its denial stands."""
    tool, program = key
    if not program:
        return False
    shell = state.streaks.get((tool, ""))
    return shell is not None and shell.mixed and shell.kind == streak.kind and shell.count - streak.count >= others


def _succeed(state: _AgentLoops, key: tuple[str, str | None]) -> None:
    """A call of ``key``'s tool (or program) succeeded: its failure streak
    ends, and a shell tool's own streak with it; a streak whose calls were
    denied gets one more attempt, the agent having done something else
    since (read the file, fixed the setup) as its denial advised."""
    streaks = state.streaks
    if streaks:
        streaks.pop(key, None)
        if key[1] is not None:
            streaks.pop((key[0], ""), None)
        for streak in streaks.values():
            streak.retry = streak.denied


def _redone(state: _AgentLoops, edit: bytes, outcome: bytes, tool: str) -> None:
    """Record what the first call to act after ``edit`` returned (the call
    and its result, ``outcome``): one more time in a row when it is what
    the edit's last round returned."""
    state.redo = None
    last = state.redone.get(edit)
    rounds = last[1] + 1 if last is not None and last[0] == outcome else 1
    _keep(state.redone, edit, (outcome, rounds, tool))


def _keep(table: dict[_K, _V], key: _K, value: _V) -> None:
    """Set ``key`` as the latest of ``table``; past ``_TARGETS_KEPT`` the
    one touched longest ago goes."""
    table.pop(key, None)
    table[key] = value
    if len(table) > _TARGETS_KEPT:
        del table[next(iter(table))]


class _Note:
    """A call seen by ``on_call``, waiting for its result, with what was
    read from its arguments there. Made for every call, so its arguments
    are positional: a keyword call costs about twice as much."""

    __slots__ = ("acts", "denied", "file", "fp", "halt", "paging", "polled", "rules", "streak", "target", "writing")

    def __init__(
        self,
        fp: Fingerprint,
        rules: _Rules,
        paging: bool,
        polled: bool,
        writing: str | None,
        acts: bool,
        streak: tuple[str, str | None],
        target: str | None,
        file: bool,
    ) -> None:
        self.fp = fp
        self.rules = rules
        self.paging = paging
        self.polled = polled
        self.writing = writing
        self.acts = acts
        self.streak = streak
        self.target = target
        self.file = file
        self.denied = False
        self.halt = False


class _AgentLoops:
    """One agent's observations. ``window`` holds the digests of its last
    tracked calls; ``signatures`` what each of them did; ``streaks`` maps a
    tool (and editing sub-command) to its current failure kind, count and
    time; ``grinds`` a target to its run of equal results under other
    arguments; ``writes`` a written file to the last content written to it
    and how often in a row; ``edits`` a file and an edit to it to how often
    that edit was made with other writes to that file in between (the file
    going back and forth between versions); ``redone`` an edit to what the
    first call to act after it returned (its tool named) and how many times
    in a row it made that edit returned the same, across restores of the
    file, ``redo`` the edit whose outcome is awaited; ``run`` counts consecutive calls that repeated
    an earlier call's result, ``advised`` whether this run drew its
    advisory; ``seen`` numbers the tracked results, ``news_at`` the last
    that brought news."""

    __slots__ = (
        "acted",
        "advised",
        "allowance",
        "calls",
        "edits",
        "failed_at",
        "grinds",
        "makes",
        "news_at",
        "opener",
        "patient",
        "redo",
        "redone",
        "run",
        "seen",
        "signatures",
        "slept",
        "streaks",
        "waited_at",
        "window",
        "writes",
    )

    def __init__(self) -> None:
        self.advised = False
        self.allowance = 0
        self.makes: dict[str, int] = {}
        """What the user asked to be made, and how many (``requested_makes``)."""
        self.patient = False
        self.failed_at = 0
        self.news_at = 0
        self.waited_at = -1
        self.slept = 0.0
        """The seconds the agent's waits (``waited_at``) said they wait, summed,
        in a transcript without times (every ``ts`` 0): a second clock, where
        the recorded one does not move."""
        self.seen = 0
        self.window: deque[bytes] = deque()
        self.signatures: dict[bytes, _Signature] = {}
        self.streaks: dict[tuple[str, str | None], _Streak] = {}
        self.grinds: dict[tuple[str, str], _Grind] = {}
        self.writes: dict[str, tuple[bytes, int]] = {}
        self.edits: dict[tuple[str, bytes], int] = {}
        self.acted: dict[bytes, bytes] = {}
        self.redo: bytes | None = None
        self.redone: dict[bytes, tuple[bytes, int, str]] = {}
        self.calls: dict[str, _Note] = {}
        self.run = 0
        self.opener: tuple[bytes, bytes] | None = None

    def new_epoch(self, opener: tuple[bytes, bytes] | None = None) -> None:
        self.window.clear()
        self.signatures.clear()
        self.streaks.clear()
        self.grinds.clear()
        self.run = 0
        self.advised = False
        self.opener = opener

    def act(self, digest: bytes, signature: _Signature) -> None:
        """A new epoch after an action (``digest``'s call) that may have
        changed something; the action itself stays counted in it."""
        self.new_epoch()
        self.window.append(digest)
        self.signatures[digest] = signature

    def at(self, threshold: int, asked: int = 0) -> int:
        """The count at which ``threshold`` acts now: past the repeats the
        user asked for (``allowance``) and, for a call that makes something,
        past the number of it ``asked`` for (``makes``)."""
        return max(threshold, max(self.allowance, asked) + 1)

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


_TOOL_KINDS = ("", "poll", "paging", "exclude")


class LoopsToolConfig(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One ``[loops.tools."<glob>"]`` table: settings for the tools whose
    name matches the glob (the first matching table wins). Thresholds left
    out keep the section's. ``kind`` makes every call of the tool a
    ``poll`` or ``paging`` call, or ``exclude``s it; ``ignored_args`` are
    left out of its calls' identity (with the section's), and
    ``identity_args``, when given, are the only arguments that make two of
    its calls the same. ``mutating`` says whether a successful call changes
    something (progress), overriding the name rules."""

    kind: str = ""
    deny_at: int | None = None
    error_at: int | None = None
    error_deny_at: int | None = None
    streak_deny_at: int | None = None
    transient_at: int | None = None
    transient_deny_at: int | None = None
    grind_at: int | None = None
    poll_nudge_at: int | None = None
    poll_deny_after: int | None = None
    ignored_args: tuple[str, ...] = ()
    identity_args: tuple[str, ...] = ()
    mutating: bool | None = None

    def check(self, key: str, section: LoopsConfig) -> None:
        """Validate under the dotted ``key`` (``loops.tools."Bash"``), by the
        section's rules, each threshold the table leaves out being the
        ``section``'s."""
        if self.kind not in _TOOL_KINDS:
            raise ConfigError(f"{key}.kind", self.kind, 'must be "poll", "paging", "exclude" or ""')
        for name, minimum in (
            ("deny_at", 2),
            ("error_at", 2),
            ("error_deny_at", 0),
            ("streak_deny_at", 0),
            ("transient_at", 2),
            ("transient_deny_at", 0),
            ("grind_at", 0),
            ("poll_nudge_at", 2),
            ("poll_deny_after", 3),
        ):
            value = getattr(self, name)
            if value is not None:
                check_int(f"{key}.{name}", value, minimum)
        check_names(f"{key}.ignored_args", self.ignored_args)
        check_names(f"{key}.identity_args", self.identity_args)
        if self.mutating is not None:
            check_bool(f"{key}.mutating", self.mutating)
        if self.grind_at == 1:
            raise ConfigError(f"{key}.grind_at", 1, "must be 0 (off) or an integer >= 2")
        for name, above, never in (
            ("error_deny_at", "error_at", True),
            ("streak_deny_at", "error_at", True),
            ("transient_deny_at", "transient_at", True),
            ("poll_deny_after", "poll_nudge_at", False),
        ):
            value, floor = self._effective(name, section), self._effective(above, section)
            if (self._sets(name) or self._sets(above)) and (value or not never) and value <= floor:
                zero = "0 (never deny) or " if never else ""
                raise ConfigError(f"{key}.{name}", value, f"must be {zero}more than {above} ({floor})")
        if self.deny_at is not None and self.deny_at > section.window:
            raise ConfigError(f"{key}.deny_at", self.deny_at, f"must be at most loops.window ({section.window})")
        force_setattr(self, "ignored_args", tuple(self.ignored_args))
        force_setattr(self, "identity_args", tuple(self.identity_args))

    def _sets(self, name: str) -> bool:
        return getattr(self, name) is not None

    def _effective(self, name: str, section: LoopsConfig) -> int:
        value = getattr(self, name)
        return int(getattr(section, name) if value is None else value)


class LoopsConfig(Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Policy ``loops``: result-aware detection of repeats, cycles, stalled
    polls and failure streaks (docs/policies/loops.md). Off unless its
    section is present; the ``recommended`` preset turns it on."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ("sleep", "sleep_*", "wait", "wait_seconds", "wait_ms", "Sleep", "Wait", "Wait-Tool")
    exclude_commands: tuple[str, ...] = (
        r"^\s*sleep\s+[0-9.]+[smhd]?\s*;?\s*$",
        # the same wait on Windows: PowerShell's Start-Sleep, cmd's timeout /t
        r"(?i)^\s*start-sleep(?:\s+-(?:seconds|s|milliseconds|ms))?\s+[0-9.]+\s*;?\s*$",
        r"(?i)^\s*timeout(?:\.exe)?\s+/t\s+[0-9]+(?:\s+/nobreak)?(?:\s*>\s*nul)?\s*$",
    )
    ignored_args: tuple[str, ...] = DEFAULT_IGNORED_ARGS
    interjections: tuple[str, ...] = LOOPS_INTERJECTIONS
    window: int = 30
    advise_at: int = 2
    advise_span: int = 6
    deny_at: int = 3
    halt_after: int = 3
    requested_repeats: bool = True
    error_at: int = 3
    error_deny_at: int = 5
    streak_deny_at: int = 8
    error_results: tuple[str, ...] = (
        r"ERROR:\s",
        r"<tool_use_error>",
        # a one-line "Error: ..." is the whole answer of an MCP server or tool that reports failure as text
        r"(?i)error:[ \t][^\n]*\n?$",
        # and a JSON answer whose envelope says its request failed, as MCP servers and web APIs
        # answer without the flag: {"error": "..."} or Google's {"error": {"code": 429, ...}},
        # {"ok": false, "error": ...} (Slack's), {"status": "error", "error_message": ...} (Google ADK
        # tools'), an HTTP answer's {"status_code": 503, ...}; not an empty "error", not {"success":
        # false, "message": "No results found"} (a search that found nothing), not a record whose
        # "status" says a job or a build failed (a status check's answer)
        r'\s*\{\s*"error"\s*:\s*(?:"[^"]|\{)',
        r'\s*\{\s*"(?:ok|success)"\s*:\s*false\s*,\s*"error"\s*:\s*(?:"[^"]|\{)',
        r'\s*\{\s*"status"\s*:\s*"error"\s*,\s*"(?i:error|message|msg|detail|code|reason|'
        r'error_?(?:message|msg|code|detail))"\s*:',
        r'\s*\{\s*"(?i:status_?code|http_?status)"\s*:\s*(?:429|5\d\d)\s*[,}]',
        # and what an MCP server's SDK answers for a tool that raised, as a tool returns it as text
        r"(?i)error (?:executing|calling|running|invoking) tool\b[^\n]*\n?$",
        # so is a bare "timeout" ({"error": "timeout"} keeps its error flag; this is the text alone)
        r"(?i)\W*(?:timeout|timed out)\W*$",
        # a result that is nothing but the shell refusing the command (no such program or file, a
        # syntax error), as SWE-agent shows it without an exit status, its state lines after it; a
        # warning (a locale's) or a program's own output after such a line is no refusal
        r"(?:(?:\S*/)?(?:ba|da|z|k)?sh: (?:-c: )?(?:(?:line )?\d+: )?(?:[^\s:]+(?:: [^\s:]+)?: (?:command not found|"
        r"not found|No such file or directory|Permission denied)|command not found: \S+|syntax error[^\n]*|"
        r"`[^\n]*')[ \t]*(?:\n|$))+(?:\(Open file: [^\n]*\)\n\(Current directory: [^\n]*\)\n?(?:bash-\$)?\s*)?$",
    )
    transient_errors: tuple[str, ...] = (
        r"(?i)\b(?:429|50[0-4]|529)\b[^\n]{0,40}\b(?:too many requests|internal server error|bad gateway|service "
        r"unavailable|gateway time-?out|overloaded|error|status)\b",
        r"(?i)(?:\b|_)(?:status|http|code|error)[\s:=\"']*(?:429|50[0-4]|529)\b",
        r"(?i)\b(?:rate[ _-]?limit(?:ed)?|too many requests|overloaded|temporarily unavailable|service unavailable|"
        r"try again later|connection (?:reset|aborted|timed out)|econnreset|etimedout|read timed? ?out|"
        r"request timed? ?out|deadline exceeded|network is unreachable|temporary failure in name resolution|"
        r"could not resolve host|getaddrinfo failed|eai_again|enotfound|"
        r"tls handshake timeout|i/o timeout|"
        r"unexpected disconnect|early eof|rpc failed|ssl_error_syscall|connection closed by remote host|"
        r"remote end closed connection)\b",
        # a service not up yet: what a readiness check says while it starts (in English, and as localised
        # clients print it: German, French, Spanish, Italian, Portuguese, Russian, Chinese, Japanese)
        r"(?i)\b(?:connection refused|econnrefused|failed to connect|could not connect|couldn't connect|"
        r"no response|actively refused)\b",
        r"(?i)verbindungsaufbau abgelehnt|verbindung abgelehnt|connexion refusée|conexión rehusada|"
        r"conexión rechazada|connessione rifiutata|conexão recusada|в соединении отказано|соединение отклонено|"
        r"拒绝连接|连接被拒绝|接続が拒否",
        # a browser's page load that timed out (Playwright, Puppeteer, Chrome's net:: codes); not a
        # locator's timeout ("locator.click: Timeout 30000ms exceeded"): an element that never appears
        r"(?i)\b(?:navigation timeout of \d+ ?ms exceeded|(?:goto|reload|go_?back|go_?forward|navigate|"
        r"wait_?for_?(?:navigation|load_?state|url)): timeout \d+ ?ms exceeded|net::err_(?:timed_out|"
        r"connection_(?:reset|closed|timed_out)|network_changed|internet_disconnected))\b",
    )
    transient_at: int = 5
    transient_deny_at: int = 10
    cancelled_results: tuple[str, ...] = (
        r"(?i)sibling tool call errored",
        r"(?i)^\W*(?:<tool_use_error>\s*)?(?:the )?(?:tool (?:call|use) )?(?:was )?"
        r"(?:cancell?ed|aborted|interrupted)\b",
        r"(?i)^\W*\[?request interrupted by user",
    )
    grind_at: int = 4
    grind_deny_at: int = 0
    nothing_found: tuple[str, ...] = (
        r"(?i)^\W*(?:no (?:files?|matches|match|results?|entries|items|lines|output)(?: (?:were |was )?found)?|"
        r"nothing found|found nothing|0 (?:files?|matches|results?)(?: found)?)"
        # and what was searched for, where: "No matches found for pattern "x" in path "src"."
        r"(?:\s+(?:for|in|matching|under|with)\b[^\n]*)?"
        # and what to try instead: "No results found! Try a less restrictive/shorter query."
        r"(?:[.!]\s+(?:try|please|consider)\b[^\n]*)?\W*$",
        # a runtime's stand-in for an empty output (SWE-agent: "Your command ran successfully and did not
        # produce any output.")
        r"(?i)^\W*(?:(?:your |the )?command )?"
        r"(?:(?:ran|completed|finished|executed|succeeded)(?: successfully)?,?(?: and)? )?"
        r"(?:(?:did not|didn't) (?:produce|return|print) any|(?:produced|returned|printed) no) output\W*$",
    )
    opaque_results: tuple[str, ...] = (r"(?i)^\s*(?:\[(?:image|screenshot|document|audio|video|file)\]\s*)+$",)
    decay_seconds: int = 900
    paging_tools: tuple[str, ...] = (
        "*scroll*",
        "*mouse_wheel*",
        "*page_down*",
        "*page_up*",
        "*next_page*",
        "*paginate*",
        "*load_more*",
        "*go_back*",
        "*go_forward*",
        "*navigate_back*",
        "*navigate_forward*",
    )
    paging_args: tuple[str, ...] = (
        "offset",
        "cursor",
        "page",
        "page_token",
        "pageToken",
        "next_page_token",
        "after",
        "before",
        "start",
        "skip",
        "start_line",
        "end_line",
        "limit",
        "view_range",
        "line_range",
        "from",
    )
    paging_values: tuple[str, ...] = (
        r"(?i)^(?:scroll(?:[ _-]?(?:up|down|left|right|page))?|page[ _-]?(?:up|down)|next(?:[ _-]?page)?|"
        r"prev(?:ious)?(?:[ _-]?page)?|(?:load|show|see|view)?[ _-]?more(?:[ _-]?results)?|older|newer|"
        r"(?:go[ _-]?)?back|(?:shift[ _+-]?)?tab|(?:arrow[ _-]?)?(?:up|down|left|right)|(?:shift[ _+-]?)?space)$",
        # steps a UI is made to repeat: a stepper or an adder clicked, characters deleted, zoom
        r"(?i)^(?:add(?:[ _-]+[a-z]+){0,2}|(?:increase|decrease|increment|decrement)(?:[ _-]+[a-z]+)?|plus|minus|"
        r"\+|zoom[ _-]?(?:in|out)|backspace|delete|del|(?:ctrl|control|cmd|command)[ _+-]?(?:plus|minus|equal|[=+-]))$",
    )
    tools: dict[str, LoopsToolConfig] = field(default_factory=dict)
    result_normalize: tuple[str, ...] = DEFAULT_RESULT_NORMALIZE
    poll_tools: tuple[str, ...] = (
        "BashOutput",
        "TaskOutput",
        "write_stdin",
        "read_background_output",
        "list_background_processes",
        "get_task_output",
        "check_status",
        "get_status",
        "*wait_for*",
        "*poll*",
        "*status*",
        "*snapshot*",
        "*screenshot*",
    )
    poll_commands: tuple[str, ...] = (
        r"(^|[;&|(]\s*)(" + _STATUS_CHECKS + r"|ps\b|pgrep\b|jobs\b|sleep\b|[Ss]tart-[Ss]leep\b|timeout\s+/t\b|"
        r"ping\s+-n\s+\d+\s+(?:127\.0\.0\.1|localhost)\b|wc\s+-l\b|ls\b[^|;&]*\.(log|out|pid)\b)",
        # a log's tail: as a step of its own, or fed a log by a pipe (`grep error app.log | tail`); a `tail`
        # a run's output is piped to (`pytest | tail -5`, `|&`) keeps the end of what the run printed
        r"(^|;\s*|&&\s*|[^|&>]&\s*|\(\s*|\|\|\s*)tail\b",
        r"\.(log|out)\b[^;&]*\|&?\s*(xargs\s+)?tail\b",
        # PowerShell's tail of a file
        r"(?i)(^|[;&|(]\s*)(get-content|gc)\b[^|;&]*\s-(tail|wait)\b",
        # one of those checks run on another machine
        r"(^|[;&|(]\s*)ssh" + OPTIONS + r"\s+[^\s-]\S*(\s+--)?\s+['\"]?(" + _STATUS_CHECKS + r"|tail\b)",
        # a loop that waits for something to change, on one line or several
        r"(?s)\b(until|while)\b.*\bsleep\s",
    )
    poll_values: tuple[str, ...] = (
        r"(?i)^(?:poll|wait|watch|tail|progress|(?:get|check)[ _-]?status|"
        r"(?:get|read|fetch)[ _-]?(?:output|logs?|progress)|(?:refresh|reload)(?:[ _-]?(?:page|status|data|list))?)$",
    )
    poll_states: tuple[str, ...] = (
        # a key that names a state (Status, readyState, "health": {"status": ...), then, past spaces, quotes
        # (escaped too), a colon, markdown's ** and | and `, a tag's >, one = (not code's ==) or a symbol
        # (Argo Rollouts' "॥"), a state that is still moving; the rarer states only as the whole value
        # ("Feature A status: Updating docs" is prose)
        r"(?:(?i:\b(?:status|state|phase|conclusion))|[a-z](?:Status|State|Phase))"
        r"(?:(?:[\s:\"'\\*|`>]|[^\x00-\x7f]){1,24}|(?:[\s:\"'\\*|`>]|[^\x00-\x7f]){0,12}="
        r"(?:[\s\"'\\*|`>]|[^\x00-\x7f]){0,12})"
        r"(?i:(?:" + _MOVING + r"|waiting|containercreating)\b|(?:" + _MOVING_WHOLE + r")"
        r"[ \t\"',;)}\]]*(?:$|[\r\n\"',;)}\]]))",
        # a record's state under a key with a prefix (Shopify's fulfillment_status, a job_state), as JSON or
        # YAML give it: past a colon only, so code assigning one (order.fulfillment_status = ...) is no state
        r"(?i)[a-z]_(?:status|state|phase)[\"']?[ \t]*:[ \t]*[\"']?(?:" + _MOVING + r"|waiting)\b",
        # a table whose capitals header names a STATUS, STATE or PHASE column, with a row below it (before a
        # blank line) holding a moving state as a whole cell; not `waiting`, which may wait on someone's input
        r"(?m)^[ \t]*(?:[A-Z#][A-Z0-9_()./%#-]*[ \t]+)*(?:STATUS|STATE|PHASE)(?:[ \t]+[A-Z#][A-Z0-9_()./%#-]*)*[ \t]*\n"
        r"(?:[^\n]+\n)*?[^\n]*?(?:^|[ \t]{2,}|\t)(?i:" + _MOVING + "|" + _MOVING_WHOLE + r")(?:[ \t]{2,}|\t|[ \t]*$)",
        r"(?i)\bprocess (is )?(still )?running\b",
        r"(?i)\b(still|is) (running|in progress|pending|progressing|reconciling)\b",
        r"(?i)\breconciliation in progress\b",
        # a wait that ran out before what it waited for came (Codex's wait_agent on a subagent still working)
        r"\"timed_out\"\s*:\s*true\b",
        r"(?i)^\W*(" + _MOVING + "|waiting|" + _MOVING_WHOLE + r")\W*$",
        # a check that caught its own failure and printed it: one line saying the service is not up yet
        r"(?i)^[^\n]{0,200}\b(?:connection refused|actively refused|econnrefused|failed to connect|"
        r"could not connect|couldn't connect)\b[^\n]{0,200}\n?$",
    )
    poll_nudge_at: int = 4
    poll_nudge_every: int = 2
    poll_waits: tuple[int, ...] = (5, 10, 30, 60)
    poll_deny_after: int = 12
    poll_deny_seconds: int = 600
    mutating_tools: tuple[str, ...] = DEFAULT_MUTATING_TOOLS
    mutating_commands: tuple[str, ...] = DEFAULT_MUTATING_COMMANDS
    read_only_tools: tuple[str, ...] = DEFAULT_READ_ONLY_TOOLS
    read_only_commands: tuple[str, ...] = DEFAULT_READ_ONLY_COMMANDS

    def __post_init__(self) -> None:
        check_bool("loops.enabled", self.enabled)
        self.check_mode("loops")
        check_bool("loops.requested_repeats", self.requested_repeats)
        check_patterns("loops.include", self.include)
        check_patterns("loops.exclude", self.exclude)
        for key in ("poll_tools", "mutating_tools", "read_only_tools", "paging_tools"):  # compared loosely
            check_loose_patterns(f"loops.{key}", getattr(self, key))
        check_names("loops.paging_args", self.paging_args)
        for key in (
            "exclude_commands",
            "interjections",
            "error_results",
            "transient_errors",
            "cancelled_results",
            "nothing_found",
            "opaque_results",
            "paging_values",
            "result_normalize",
            "poll_commands",
            "poll_values",
            "poll_states",
            "mutating_commands",
            "read_only_commands",
        ):
            check_regexes(f"loops.{key}", getattr(self, key), default_of(self, key))
        check_names("loops.ignored_args", self.ignored_args)
        check_int("loops.advise_at", self.advise_at, 1)
        check_int("loops.advise_span", self.advise_span, 0)
        check_int("loops.deny_at", self.deny_at, 2)
        check_int("loops.window", self.window, 2)
        if self.deny_at > self.window:  # named for the one of the two that was set
            if self.deny_at == default_of(self, "deny_at"):
                raise ConfigError("loops.window", self.window, f"must be at least loops.deny_at ({self.deny_at})")
            raise ConfigError("loops.deny_at", self.deny_at, f"must be at most loops.window ({self.window})")
        check_int("loops.halt_after", self.halt_after, 0)
        check_int("loops.error_at", self.error_at, 2)
        check_int("loops.error_deny_at", self.error_deny_at, 0)
        if self.error_deny_at and self.error_deny_at <= self.error_at:
            rule = f"must be 0 (never deny) or more than loops.error_at ({self.error_at})"
            raise ConfigError("loops.error_deny_at", self.error_deny_at, rule)
        check_int("loops.streak_deny_at", self.streak_deny_at, 0)
        if self.streak_deny_at and self.streak_deny_at <= self.error_at:
            rule = f"must be 0 (never deny) or more than loops.error_at ({self.error_at})"
            raise ConfigError("loops.streak_deny_at", self.streak_deny_at, rule)
        check_int("loops.poll_nudge_at", self.poll_nudge_at, 2)
        check_int("loops.poll_nudge_every", self.poll_nudge_every, 1)
        check_positive_list("loops.poll_waits", self.poll_waits)
        check_int("loops.poll_deny_after", self.poll_deny_after, self.poll_nudge_at + 1)
        check_int("loops.poll_deny_seconds", self.poll_deny_seconds, 0)
        check_int("loops.transient_at", self.transient_at, 2)
        check_int("loops.transient_deny_at", self.transient_deny_at, 0)
        if self.transient_deny_at and self.transient_deny_at <= self.transient_at:
            rule = f"must be 0 (never deny) or more than loops.transient_at ({self.transient_at})"
            raise ConfigError("loops.transient_deny_at", self.transient_deny_at, rule)
        check_int("loops.grind_at", self.grind_at, 0)
        if self.grind_at == 1:
            raise ConfigError("loops.grind_at", 1, "must be 0 (off) or an integer >= 2")
        check_int("loops.grind_deny_at", self.grind_deny_at, 0)
        if self.grind_deny_at and self.grind_deny_at <= self.grind_at:
            rule = f"must be 0 (never deny) or more than loops.grind_at ({self.grind_at})"
            raise ConfigError("loops.grind_deny_at", self.grind_deny_at, rule)
        check_int("loops.decay_seconds", self.decay_seconds, 0)
        if not isinstance(self.tools, dict):
            raise ConfigError("loops.tools", self.tools, "must be a table of tool-name globs")
        for glob, settings in self.tools.items():
            if not isinstance(glob, str) or not glob:
                raise ConfigError("loops.tools", glob, "each key must be a non-empty tool-name glob")
            if not isinstance(settings, LoopsToolConfig):
                raise ConfigError(f'loops.tools."{glob}"', settings, "must be a table of settings")
            settings.check(f'loops.tools."{glob}"', self)
        for key in self.__struct_fields__:
            value = getattr(self, key)
            if isinstance(value, list):
                force_setattr(self, key, tuple(value))


class LoopsPolicy(Policy[_AgentLoops]):
    """Result-aware detection of repeats, cycles, stalled polls, failure
    streaks and grinds. Denials are ``by`` the plugin ``loop-detector``."""

    name = "loops"
    plugin = LOOPS_PLUGIN
    shareable = True
    section = LoopsConfig

    def __init__(self, config: LoopsConfig) -> None:
        self.config = config
        self._calls = CallSelector(config.include, config.exclude, config.exclude_commands, config.ignored_args)
        self._interjection = Interjections(config.interjections)
        self._normalizer = ResultNormalizer(config.result_normalize)
        self._empty = self._normalizer.digest("")
        self._progress = ProgressRule(config.mutating_tools, config.mutating_commands)
        self._reads = ReadOnlyRule(config.read_only_tools, config.read_only_commands)
        poll_tools = [loose_tool_name(p) for p in config.poll_tools]
        self._poll_tools = ToolFilter(poll_tools, normalize=loose_tool_name) if poll_tools else None
        paging_tools = [loose_tool_name(p) for p in config.paging_tools]
        self._paging_tools = ToolFilter(paging_tools, normalize=loose_tool_name) if paging_tools else None
        self._paging_args = frozenset(config.paging_args) | self._calls.ignored
        self._paging_values = RegexSet(config.paging_values, setting="loops.paging_values")
        self._poll_values = RegexSet(config.poll_values, setting="loops.poll_values")
        self._value_memo: dict[str, int] = {}
        # how long an idle gap voids a count (``decay_seconds``; 0: never)
        self._decay = float(config.decay_seconds) if config.decay_seconds else math.inf
        self._shortest_wait = min(config.poll_waits)
        # a poller that already waits half the longest back-off (rounded up) between polls is never
        # denied: it backs off, and a CI run or a deploy can take half an hour
        self._patient_wait = -(-max(config.poll_waits) // 2)
        self._click_tools = ToolFilter(_CLICK_TOOLS, normalize=str.lower)
        self._poll_commands = CommandPatterns(config.poll_commands)
        # in the order of the _*_CHECK numbers; kept in one attribute, since an instance with
        # 30 attributes or more has each of them read more slowly (CPython's shared keys)
        self._checks = (
            (RegexSet(config.cancelled_results, setting="loops.cancelled_results"), _CANCELLED_HEAD, False),
            (RegexSet(config.error_results, setting="loops.error_results"), 0, True),
            (RegexSet(config.poll_states, setting="loops.poll_states"), _STATE_HEAD, False),
            (RegexSet(config.transient_errors, setting="loops.transient_errors"), _STATE_HEAD, False),
            (RegexSet(config.opaque_results, setting="loops.opaque_results"), 0, False),
            (RegexSet(config.nothing_found, setting="loops.nothing_found"), 0, False),
        )
        self._all_checks = _one_pass(tuple((regexes.patterns, anchored) for regexes, _, anchored in self._checks))
        self._tool_globs = [(ToolFilter([glob]), settings) for glob, settings in config.tools.items()]
        self._default_rules = _Rules(config, None)
        self._rules: dict[str, _Rules] = {}
        self._facts: dict[str, _ToolFacts] = {}
        self._making: dict[str, bool] = {}

    def new_state(self) -> _AgentLoops:
        return _AgentLoops()

    def rules(self, tool: str, hints: dict[str, bool] | None = None) -> _Rules:
        """The thresholds and class of ``tool``'s calls (memoized by name)."""
        rules = self._rules.get(tool)
        if rules is None:
            rules = self._default_rules
            for glob, settings in self._tool_globs:
                if glob.tracks(tool):
                    rules = _Rules(self.config, settings)
                    break
            if len(self._rules) < 4096:
                self._rules[tool] = rules
        return _annotated(rules, hints) if hints else rules

    def _fingerprint(
        self, fingerprints: FingerprintCache, rules: _Rules, tool: str, args: Any, call_id: str
    ) -> Fingerprint:
        """The call's identity. A ``ref`` (or ``target``) beside an
        ``element`` description (Playwright MCP's ``{"element": "Submit
        button", "ref": "e44"}``) is a handle into the page's latest
        snapshot, renumbered as the page re-renders; the element described
        is what the call aims at, so the handle is left out."""
        if rules.identity and isinstance(args, dict):
            return fingerprint(tool, {k: v for k, v in args.items() if k in rules.identity})
        if isinstance(args, dict) and "element" in args:
            handles = frozenset(key for key in _HANDLE_KEYS if _snapshot_ref(args.get(key)))
            if handles:
                ignored = rules.ignored if rules.ignored is not None else self._calls.ignored
                return fingerprints.get(tool, args, ignored | handles, call_id=call_id)
        if rules.ignored is not None:
            return fingerprint(tool, args, rules.ignored)
        return self._calls.fingerprint(fingerprints, tool, args, call_id)

    def _clicked(self, tool: str, args: Any, content: str) -> int:
        """What a click's control does: ``_PAGING_VALUE`` for one that pages or
        steps (Next, Load more, Add row, Increase), paging as a scroll is, when
        its result only acknowledges the click (one that shows the page says
        whether it changed); ``_POLL_VALUE`` for one that looks again
        (Refresh, Reload), a poll whatever its result shows;
        ``_UNNAMED_VALUE`` when nothing names the control and the result only
        acknowledges the click (chrome-devtools-mcp's ``Successfully clicked
        on the element``, browser-use's ``Clicked element``);
        ``_STEPPED_VALUE`` for a paging or stepping control whose result
        shows the page (a quantity stepped from 2 to 3 is the step asked
        for, no counter of calls); else 0. The
        control is named by the click's label argument (``element``,
        ``label``, ``text``, ``name``, ``title``) or by its acknowledgement
        (``Clicked button with index 7: Load more``), read with
        ``paging_values`` and ``poll_values`` once a role word (button, link)
        is dropped. A click is a tool named for it (``_CLICK_TOOLS``) or an
        operation value."""
        acknowledged = len(content) <= _ACK_CHARS
        if not isinstance(args, dict) or (not acknowledged and _LABELS.isdisjoint(args)):
            return 0
        if not self._click_tools.tracks(tool) and (
            _CLICK_KEYS.isdisjoint(args)
            or not any(isinstance(args.get(key), str) and _CLICK.search(args[key]) for key in _CLICK_KEYS)
        ):
            return 0
        labels = [args[key] for key in _LABEL_KEYS if isinstance(args.get(key), str) and len(args[key]) <= _ACK_CHARS]
        if acknowledged:
            if not labels and ": " not in content and "[" not in content:
                return _UNNAMED_VALUE  # and no screenshot beside it ("[image]")
            labels.append(content.rsplit(": ", 1)[-1])
        for label in labels:
            words = _CONTROL.fullmatch(label.strip())
            if words is None:
                continue
            if self._paging_values.fullmatch(words.group(1)):
                return _PAGING_VALUE if acknowledged else _STEPPED_VALUE
            if self._poll_values.fullmatch(words.group(1)):
                return _POLL_VALUE
        return 0

    def _values(self, args: Any) -> int:
        """What a call's short argument values naming what to do
        (``_OPERATION_KEYS``) read as:
        ``_PAGING_VALUE`` (``scroll``, ``next``), ``_POLL_VALUE`` (``poll``,
        ``get_status``), both or neither. A search for the word ``progress``
        is no poll."""
        found = 0
        if isinstance(args, dict) and (self._paging_values or self._poll_values) and not _VALUE_KEYS.isdisjoint(args):
            for key, value in args.items():
                allowed = _OPERATION_KEYS.get(key)
                if allowed is None:
                    if key != "text" or args.get("action") not in _KEY_PRESSES:
                        continue
                    allowed = _PAGING_VALUE
                if isinstance(value, str) and len(value) <= 16:
                    found |= self._value(value) & allowed
        return found

    def _value(self, value: str) -> int:
        """``_values`` for one value (memoized: a few values such as
        ``scroll_down`` or ``poll`` recur in every call)."""
        memo = self._value_memo
        found = memo.get(value)
        if found is None:
            found = (_PAGING_VALUE if self._paging_values.fullmatch(value) else 0) | (
                _POLL_VALUE if self._poll_values.fullmatch(value) else 0
            )
            if len(memo) >= 4096:
                memo.clear()
            memo[value] = found
        return found

    async def on_call(self, state: _AgentLoops, call: ToolCall, fingerprints: FingerprintCache) -> Action | None:
        command = shell_command(call.args)
        if not self._calls.tracks_command(call.tool, command):
            state.waited_at = state.seen  # a wait (sleep): what changes across it may be real progress
            return None
        hints = call.hints if isinstance(call.hints, dict) else None
        rules = self._rules.get(call.tool) if hints is None else None  # ``rules``, inlined on the hot path
        if rules is None:
            rules = self.rules(call.tool, hints)
        if rules.kind == "exclude":
            return None
        config = self.config
        calls = state.calls
        note = calls[call.call_id] = self._read(fingerprints, rules, call.tool, call.args, command, call.call_id)
        if len(calls) > _OPEN_CALLS:  # calls whose results never came (an interrupted run): the oldest go
            del calls[next(iter(calls))]
        if note.paging:
            return None
        fp = note.fp
        signature = state.signatures.get(fp.digest)
        if signature is not None and call.ts - signature.ts >= self._decay:
            signature = None
        text: str | None = None
        count = 0
        threshold = 0
        if signature is not None and signature.count:
            count = signature.count + 1
            if signature.transient:
                if rules.transient_deny_at and count >= state.at(rules.transient_deny_at):
                    text, threshold = _FAILURE_DENIAL, rules.transient_deny_at
                # (a call stamped before the last result: a clock stepped back, the wait unknown)
                elif (
                    signature.ts <= call.ts < signature.resume
                    and state.slept - signature.slept < signature.resume - signature.ts
                    and count >= state.at(rules.deny_at)
                ):
                    text, threshold = _EARLY_DENIAL, rules.deny_at
            elif signature.failed:
                if rules.error_deny_at and count >= state.at(rules.error_deny_at):
                    text, threshold = _FAILURE_DENIAL, rules.error_deny_at
            elif signature.poll and (not signature.waited or self._waited(state, signature, call.ts)):
                stalled = signature.count >= rules.poll_deny_after or (
                    config.poll_deny_seconds and call.ts - signature.since >= config.poll_deny_seconds
                )
                waited = max(signature.spacing, call.ts - signature.ts, state.slept - signature.slept)
                patient = waited >= self._patient_wait
                if signature.nudges and stalled and not state.patient and not patient and count > state.allowance:
                    text, threshold = _POLL_DENIAL, rules.poll_deny_after
            elif (
                count >= state.at(rules.deny_at, self._asked(state, call.tool, command))
                and not (
                    # an unnamed click made again right away, or after anything brought news: it may work
                    signature.unnamed and (signature.last == state.seen or state.news_at > signature.last)
                )
                and not self._waited(state, signature, call.ts)  # a check after a wait: a poll
            ):
                text, threshold = _REPEAT_DENIAL, rules.deny_at
        if text is not None:
            assert signature is not None
            body = text.format(
                count=signature.count,
                tool=call.tool,
                arguments=fp.preview(_PREVIEW),
                elapsed=_elapsed(call.ts - signature.since) if text is _POLL_DENIAL else "",
                left=_elapsed(max(signature.resume - call.ts, 1.0)) if text is _EARLY_DENIAL else "",
                patient=self._patient_wait,
                how=_BLOCKING_WAIT.format(wait=self._patient_wait) if text is _POLL_DENIAL else "",
            )
        elif note.writing is None and note.streak not in state.streaks:
            return None  # neither a write nor a tool failing in a streak: no other denial applies
        else:
            body, count, threshold = self._target_denial(state, call, note)
            if not body:
                return None
            signature = state.signatures.get(fp.digest)
        if call.late is True:  # it ran: the guard records this denial, but none happened to count toward a halt
            return self._action("deny", call, count, body, threshold)
        note.denied = True
        # the agent keeps trying: a denied call is no idle time, so what it is denied for does not decay
        if signature is not None:
            if call.step != signature.denied_step:  # one model response's denials are one: it saw none of them
                signature.denials += 1
                signature.denied_step = call.step
                note.halt = bool(config.halt_after) and signature.denials == config.halt_after
            signature.ts = call.ts
            signature.slept = state.slept
        streak = state.streaks.get(note.streak)
        if streak is not None:
            streak.ts = call.ts
            streak.denied = True
        return self._action("deny", call, count, body, threshold)

    def _read(
        self, fingerprints: FingerprintCache, rules: _Rules, tool: str, args: Any, command: str | None, call_id: str
    ) -> _Note:
        """What a call's arguments say, read once for its call and result.
        Its failure streak is counted on the tool, and for a shell command on
        the program of its last step (``make`` in ``rm -rf build && cd app
        && make``; a pipeline's first program): different programs failing
        the same way are no streak. ``command`` is the call's, read with
        ``shell_command``. A paging call is a paging tool's (``paging_tools``
        or ``kind = "paging"``) or has an argument value such as ``scroll``
        or ``next`` (``_values``)."""
        program = shell_program(command) if command else None
        target, file = call_target(args, command, program, tool=tool)
        if target is None and command is None and isinstance(args, dict) and not _QUERY_KEYS.isdisjoint(args):
            target = tool  # a search tool's queries: the same answer to other queries is a grind too
        values = self._values(args)
        if command is None:  # what the tool's name alone says, memoized (most calls run no command)
            facts = self._tool_facts(tool)
            edits, paging_tool, poll_tool, reads = facts.edits, facts.paging, facts.poll, facts.reads
            if reads and _writes_sql(tool, args):  # a query tool running an UPDATE acts, whatever its name
                reads = False
            polled = (poll_tool and not _typed(tool, args)) or (file and _GROWING.search(target or "") is not None)
        else:  # what the command says is asked only where it can matter
            edits = self._progress.kind(tool, command) if rules.mutating is None else None
            paging_tool = (self._paging_tools is not None and self._paging_tools.tracks(tool)) or self._pressed(command)
            polled = self._polled(tool, args, command)
            reads = None
        mutating = rules.mutating
        writing = edits if mutating is None else "edit" if mutating else None
        return _Note(
            self._fingerprint(fingerprints, rules, tool, args, call_id),
            rules,
            rules.kind == "paging" or bool(values & _PAGING_VALUE) or paging_tool,
            rules.kind == "poll" or bool(values & _POLL_VALUE) or polled or (command is None and _waits(args)),
            writing,
            writing is None
            and mutating is None
            and not (reads if reads is not None else self._reads.reads(tool, command)),  # acts
            (tool, program),  # the failure streak it counts toward
            target,
            file,
        )

    def _pressed(self, command: str) -> bool:
        """Whether a shell command only presses paging or stepping keys
        (``paging_values``), as a computer-use key press does:
        ``xdotool key Tab``, ``tmux send-keys -t app Down``, ``adb shell
        input keyevent KEYCODE_DPAD_DOWN``."""
        pressed = _KEY_PRESS.match(command)
        if pressed is None:
            return False
        keys = [_KEY_PREFIX.sub("", key) for key in pressed.group(1).split()]
        return all(self._paging_values.fullmatch(key) for key in keys)

    def _tool_facts(self, tool: str) -> _ToolFacts:
        """What ``tool``'s name says of a call that runs no shell command,
        remembered for a bounded number of names (a result may come to a
        policy that never saw its call: a hook's next process, another
        replica)."""
        known = self._facts.get(tool)
        if known is not None:
            return known
        reads = self._reads.reads(tool, None)
        facts = _ToolFacts(
            self._progress.kind(tool, None),
            self._paging_tools is not None and self._paging_tools.tracks(tool),
            self._poll_tools is not None and self._poll_tools.tracks(tool),
            reads,
            (reads and keeps_books(tool)) or hands_off(tool),
            not reads and makes(tool),
        )
        if len(self._facts) >= 4096:
            self._facts.clear()
        self._facts[tool] = facts
        return facts

    def _asked(self, state: _AgentLoops, tool: str, command: str | None) -> int:
        """How many of what a call makes (of ``tool``, or a shell ``command``)
        the user asked for (``makes_thing``); 0 for a call that makes nothing."""
        if not state.makes or not self._makes(tool, command):
            return 0
        return makes_thing(state.makes, command or tool)

    def _makes(self, tool: str, command: str | None) -> bool:
        """Whether a call of ``tool``, or a shell ``command``, makes
        something new (``makes``, ``makes_command``)."""
        return self._makes_command(command) if command else self._tool_facts(tool).makes

    def _makes_command(self, command: str) -> bool:
        """Whether shell ``command`` makes something (``makes_command``),
        remembered for a bounded number of commands."""
        known = self._making.get(command)
        if known is None:
            known = makes_command(command)
            if len(self._making) >= 4096:
                self._making.clear()
            self._making[command] = known
        return known

    def _target_denial(self, state: _AgentLoops, call: ToolCall, note: _Note) -> tuple[str, int, int]:
        """A denial that is not about this exact call's record: a tool (or
        program) failing the same way again and again, or the same content
        written to the same file again. Empty text: no denial."""
        rules, fp = note.rules, note.fp
        streak = state.streaks.get(note.streak)
        if (
            streak is not None
            # once something else succeeded after a denial, the next attempt runs: the agent did as
            # the denial advised, and only the attempt tells whether it fixed the cause (one that
            # fails alike is denied after it); denying every later call would lock the tool for good
            and not streak.retry
            and streak.kind  # failures that say nothing (a bare exit code 1: grep found nothing) are no one kind
            and rules.streak_deny_at
            and streak.count >= state.at(rules.streak_deny_at)
            and not (call.ts - streak.ts >= self._decay)
            and not _refused_alike(state, note.streak, streak, others=_REFUSED_OTHERS)
        ):
            count = streak.count
            body = _STREAK_DENIAL.format(tool=_streak_name(note.streak), count=count, kind=streak.kind)
            return body, count, rules.streak_deny_at
        writing = note.writing
        if writing is not None:
            target = write_target(call.args, by_tool=writing == "edit")
            written = state.writes.get(target) if target is not None else None
            if written is not None and written[0] == fp.digest and written[1] + 1 >= state.at(rules.deny_at):
                body = _WRITE_DENIAL.format(
                    target=target, count=written[1] + 1, tool=call.tool, arguments=fp.preview(_PREVIEW)
                )
                return body, written[1] + 1, rules.deny_at
            made = state.edits.get((target, fp.digest), 0) if target is not None else 0
            if made >= state.at(rules.deny_at) and (written is None or written[0] != fp.digest):
                body = _FLIP_DENIAL.format(
                    target=target, count=made + 1, tool=call.tool, arguments=fp.preview(_PREVIEW)
                )
                return body, made + 1, rules.deny_at
            redone = state.redone.get(fp.digest) if target is not None else None
            if redone is not None and redone[1] >= state.at(rules.deny_at):
                body = _REDO_DENIAL.format(
                    target=target, rounds=redone[1], check=redone[2], tool=call.tool, arguments=fp.preview(_PREVIEW)
                )
                return body, redone[1] + 1, rules.deny_at
        return "", 0, 0

    def _fail(
        self,
        state: _AgentLoops,
        key: tuple[str, str | None],
        kind: str,
        result: ToolResult,
        program: str | None,
    ) -> None:
        """Count a failure toward the streak ``key``: one more attempt when
        it fails the same way in a later model response, a new streak when
        it fails otherwise or after ``decay_seconds`` idle."""
        streak = state.streaks.get(key)
        if streak is None or streak.kind != kind or result.ts - streak.ts >= self._decay:
            state.streaks[key] = _Streak(kind, result.step, result.ts, program)
            return
        # parallel calls fail together; a step that never moves on (a runtime that numbers
        # none, a call never answered) must not hide a streak, so a batch is short and quick
        batched = result.step == streak.step and result.ts - streak.ts < _BATCH_SECONDS and streak.batch < _BATCH
        streak.retry = False  # an attempt that ran and failed alike: the next one is denied again
        streak.counted = not batched
        streak.batch = streak.batch + 1 if batched else 1
        streak.count += streak.counted
        streak.step = result.step
        streak.ts = result.ts
        if program != streak.program:
            streak.mixed = True

    def on_status(self, state: _AgentLoops, status: AgentStatus) -> None:
        if status.status == "compacted":
            # The runtime dropped earlier results from the model's view: a
            # re-read now brings them back, it does not repeat them.
            state.new_epoch()

    def on_result(self, state: _AgentLoops, result: ToolResult, fingerprints: FingerprintCache) -> Action | None:
        note = state.calls.pop(result.call_id, None)
        if result.denied_by is not None or (note is not None and note.denied):
            # a call this policy denied that ran anyway (in shadow mode, in a replay of a
            # transcript the guard was not in, or where a runtime ignored the denial): its
            # result is not observed, so what follows is what enforcing would do
            if note is None or not note.halt:
                return None
            signature = state.signatures.get(note.fp.digest)
            denials = signature.denials if signature is not None else self.config.halt_after
            text = _HALT.format(tool=result.tool, denials=denials)
            return self._action("halt", result, denials, text, self.config.halt_after)
        content = result.content
        # a result no longer than the shortest head is read whole by every
        # check, so one set pass answers them all
        found = self._all_checks.matching(content) if len(content) <= _CANCELLED_HEAD else None
        # the two checks every result is put to, read from ``found`` inline (``_says``)
        if found >> _CANCELLED_CHECK & 1 if found is not None else self._says(_CANCELLED_CHECK, content, None):
            return None  # cancelled because a sibling failed, or interrupted: not this call's own outcome
        tracked = True  # a call gets a note only when it is tracked
        if note is None:
            rules = self.rules(result.tool)
            if rules.kind == "exclude":
                return None
            command = shell_command(result.args)
            tracked = self._calls.tracks_command(result.tool, command)
            note = self._read(fingerprints, rules, result.tool, result.args, command, result.call_id)
        rules, fp = note.rules, note.fp
        failed = result.is_error or bool(
            found >> _ERROR_CHECK & 1 if found is not None else self._says(_ERROR_CHECK, content, None)
        )
        program = note.streak[1]  # a shell command's program; None for a call that runs none
        codes = _NO_CODES  # the exit statuses a failed shell command's result states
        if failed and program is not None:
            codes = _exit_codes(content)
            if (codes == _SUCCEEDED and not result.is_error) or (codes and _no_failure(result.args, program, codes)):
                failed = False  # compared as any output: a text that reads like an error, from a command that ran
        progress = None if failed else note.writing
        if progress is not None:
            target = write_target(result.args, by_tool=progress == "edit")
            rewrite = False
            made = 0
            if target is not None:
                written = state.writes.get(target)
                times = written[1] + 1 if written is not None and written[0] == fp.digest else 1
                rewrite = times > 1
                _keep(state.writes, target, (fp.digest, times))
                if not rewrite:
                    made = state.edits.get((target, fp.digest), 0) + 1
                    _keep(state.edits, (target, fp.digest), made)
            elif progress == "command":
                # a shell write whose text does not fix what it writes (`git checkout a.py`,
                # `cp a.py.orig a.py`) may have changed any file: no write is known to be in place
                state.writes.clear()
                state.edits.clear()
                state.redo = None
            # the same edit made again right away, with the same outcome, changes
            # nothing: it opens no new epoch (a line-range edit made again that
            # reports a longer file did change it)
            written_shape = self._normalizer.shape(result.content)
            opener = (fp.digest, written_shape.digest)
            if not rewrite and opener != state.opener:
                state.new_epoch(opener)
                if tracked:
                    self._observe(state, result, fp, written_shape, False, False)
                if tracked and made == state.at(rules.deny_at):
                    text = _FLIP_ADVICE.format(
                        count=made, target=target, tool=result.tool, arguments=fp.preview(_PREVIEW)
                    )
                    return self._action("remind", result, made, text, rules.deny_at)
                if tracked and target is not None:
                    state.redo = fp.digest
                    redone = state.redone.get(fp.digest)
                    if redone is not None and redone[1] == state.at(rules.deny_at) - 1:
                        text = _REDO_ADVICE.format(
                            count=redone[1] + 1,
                            target=target,
                            rounds=redone[1],
                            check=redone[2],
                            tool=result.tool,
                            arguments=fp.preview(_PREVIEW),
                        )
                        return self._action("remind", result, redone[1] + 1, text, rules.deny_at)
                return None
        if not tracked:
            if not failed and result.ts == 0:
                # a transcript without times: the sleep's own word for how long (a clock says better,
                # where there is one: a sleep may return early, run in the background, outlive its
                # tool's limit); one the shell refused (Claude Code blocks long ones) waited for nothing
                state.slept += declared_wait(result.args, shell_command(result.args))
            return None
        if not failed and result.ts == 0 and program is not None:
            # a check that sleeps first (`sleep 60 && kubectl get pods`) waited that long before it looked
            state.slept += declared_wait(None, shell_command(result.args))
        clicked = self._clicked(result.tool, result.args, content) if note.acts and not failed else 0
        if note.paging or clicked == _PAGING_VALUE:
            return None
        streak_key = note.streak
        poll = (
            note.polled
            or clicked == _POLL_VALUE
            or (not failed and not _source_file(note) and self._says(_POLL_CHECK, content, found))
        )
        reading = None
        if not (poll or failed or note.file or note.acts) and self._normalizer.is_reading(content):
            # the clock read on its own: a poll while it moves, the same reading again a repeat
            reading = content.strip()
            last = state.signatures.get(fp.digest)
            poll = last is None or last.reading != reading
        if (
            poll
            and not failed
            and program is None  # a tool's own answer: a shell poll may wait for the next run after it
            and _FINISHED.search(content[:_STATE_HEAD])
            and not self._says(_POLL_CHECK, content, found)
        ):
            poll = False  # what it waited for has finished: checking again is a repeat, not a poll
        if not poll and state.waited_at >= 0:
            # the agent waited (an untracked sleep, for at least the shortest back-off) since this
            # call's last result: it checks again for something to happen, a poll, whether the
            # check succeeds or fails
            last = state.signatures.get(fp.digest)
            poll = waited = last is not None and last.count > 0 and self._waited(state, last, result.ts)
        else:
            waited = False
        if not poll and state.patient and self._checks_on(note, program, result.tool, result.args, failed):
            poll = True  # the user asked to keep checking on something: an unchanged check is a poll
        transient = failed and not poll and self._says(_TRANSIENT_CHECK, content, found)
        if failed and not poll:
            shape = Shape(_TRANSIENT if transient else _FAILED)
            if not transient:
                # a search that reports finding nothing as its failure: no kind of error a streak counts
                # (an edit whose text was not found is a failure of its own)
                searched = not note.acts and note.writing is None
                kind = "" if searched and self._failed_finding_nothing(content) else error_kind(result.content)
                self._fail(state, streak_key, kind, result, None)
                if program is not None and not codes:
                    # a shell tool refusing a command ran no program (no exit status): a streak of the
                    # tool's own, whatever the program
                    self._fail(state, (result.tool, ""), kind, result, program)
        elif not poll and len(content) <= _OPAQUE_CHARS and self._says(_OPAQUE_CHECK, content, found):
            # an image or a document the transcript shows only as a placeholder:
            # whether it changed cannot be told, so it is never the same result
            shape = Shape(_OPAQUE + state.seen.to_bytes(8, "big"))
            _succeed(state, streak_key)
        elif note.file:
            # a file's content: any change is news (a check after a wait too); but for a file read as a
            # poll (a status file saying its job runs), its heartbeat's time
            shape = (ResultNormalizer.exact if waited or not poll else ResultNormalizer.timeless)(result.content)
            _succeed(state, streak_key)
        else:
            shape = self._normalizer.shape(error_head(result.content))
            if failed:  # a failed poll: neither part of a streak nor the end of its tool's
                state.streaks.pop(streak_key, None)
            else:
                _succeed(state, streak_key)
        if state.redo is not None and (note.acts or failed) and note.writing is None:
            # what the first call to act after an edit returned: a failure by its text
            outcome = self._normalizer.shape(error_head(content)).digest if failed else shape.digest
            _redone(state, state.redo, fp.digest + outcome, result.tool)
        making = self._made(state, result, fp, shape, program is not None) if note.acts and not failed else None
        args = result.args
        batch = (
            not failed
            and (
                program in _SQL_CLIENTS
                or program in _CONTAINER_RUNNERS
                or (isinstance(args, dict) and not _SQL_ARGUMENTS.isdisjoint(args))
            )
            and _changed_a_batch(result.tool, args, content, program)
        )
        made = (making is not None and making > 1) or batch  # one more made, or a batch changed: news, not a counter
        last = state.signatures.get(fp.digest) if batch else None
        previous = last.result if last is not None else None
        signature, gap = self._observe(
            state,
            result,
            fp,
            shape,
            failed and not poll,
            poll,
            program is None,
            made,
            clicked == _UNNAMED_VALUE,
            clicked == _STEPPED_VALUE,
        )
        if reading is not None:
            signature.reading = reading
        signature.waited = waited
        signature.transient = bool(transient)
        signature.unnamed = clicked == _UNNAMED_VALUE
        if transient:
            signature.resume = result.ts + stated_wait(content, _STATE_HEAD)
        if making is not None:
            signature.made = making
        if batch and making is None:  # a maker's own count says more
            # a batch whose WHERE still matches the rows it changed answers alike for ever: told once, never denied
            signature.made = signature.made + 1 if previous == shape.digest else 1
            if signature.made == BATCHES_ADVISED:
                text = _BATCH_ADVICE.format(
                    count=signature.made, tool=result.tool, answer=one_line(content[: 4 * _PREVIEW], _PREVIEW)
                )
                return self._action("remind", result, signature.made, text, BATCHES_ADVISED)
        if note.acts and not failed and not poll and state.acted.get(fp.digest) != shape.digest:
            # an action (a click, a pull, a build, an unknown tool) that brought news may have
            # changed what every other call sees: look again from here, as after an edit
            _keep(state.acted, fp.digest, shape.digest)
            state.act(fp.digest, signature)
            # a call with no arguments asks for one more; past what the user asked for, told once
            if (
                making is not None
                and making >= rules.deny_at
                and result.args
                and making == state.at(rules.deny_at, self._asked(state, result.tool, shell_command(result.args)))
            ):
                text = _MADE_ADVICE.format(
                    count=making,
                    tool=result.tool,
                    arguments=fp.preview(_PREVIEW),
                    answer=one_line(content[: 4 * _PREVIEW], _PREVIEW),
                )
                return self._action("remind", result, making, text, rules.deny_at)
            return None
        if failed and not transient:
            state.failed_at = state.seen
        if not gap:
            state.run = 0
            state.advised = False
        elif not failed and not poll:
            state.run += 1
        count = signature.count
        if transient:
            if count == state.at(rules.transient_at):
                text = _TRANSIENT_ADVICE.format(
                    count=count,
                    tool=result.tool,
                    arguments=fp.preview(_PREVIEW),
                    deny_at=rules.transient_deny_at or "more",
                )
                return self._action("remind", result, count, text, rules.transient_at)
            return None
        if failed and not poll:
            if count == state.at(rules.error_at):
                text = _FAILURE_ADVICE.format(count=count, tool=result.tool, arguments=fp.preview(_PREVIEW))
                return self._action("remind", result, count, text, rules.error_at)
            streak = state.streaks[streak_key]
            if (
                streak.counted
                and streak.count == state.at(rules.error_at)
                and streak.kind
                and not _refused_alike(state, streak_key, streak)
            ):
                text = _STREAK_ADVICE.format(
                    tool=_streak_name(streak_key),
                    count=streak.count,
                    kind=streak.kind,
                    deny_at=rules.streak_deny_at or "more",
                )
                return self._action("remind", result, streak.count, text, rules.error_at)
            shell = state.streaks.get((result.tool, ""))
            if (
                shell is not None
                and shell.mixed
                and shell.counted
                and shell.kind
                and shell.count in (state.at(rules.error_at), state.at(rules.streak_deny_at or rules.error_at))
            ):
                text = _TOOL_STREAK_ADVICE.format(tool=result.tool, count=shell.count, kind=shell.kind)
                return self._action("remind", result, shell.count, text, rules.error_at)
            return None
        if poll:
            if state.patient or count <= state.allowance:
                return None
            return self._back_off(signature, result, fp, rules)
        if signature.unnamed:
            # clicks one after another, nothing looked at in between: whether they did anything
            # cannot be told, so they are told once, never denied (a look in between tells)
            if gap != 1 or count != state.at(rules.deny_at):
                return None
            text = _UNNAMED_ADVICE.format(count=count, tool=result.tool, arguments=fp.preview(_PREVIEW))
            return self._action("remind", result, count, text, rules.deny_at)
        grind = self._grind(state, result, note, shape.digest, found)
        if grind is not None:
            return grind
        if state.advised or not gap or count <= state.allowance:
            return None
        if state.makes and count <= self._asked(state, result.tool, shell_command(result.args)):
            return None
        # a repeat a few calls back means a cycle is forming, unless a call
        # failed in between: re-reading after a failed edit is how it is fixed
        forming = 1 < gap <= self.config.advise_span and state.failed_at <= state.seen - gap
        if state.run >= self.config.advise_at or forming:
            state.advised = True
            text = _CYCLE_ADVICE.format(run=state.run, tool=result.tool, arguments=fp.preview(_PREVIEW))
            return self._action("remind", result, count, text, self.config.advise_at)
        return None

    def _failed_finding_nothing(self, content: str) -> bool:
        """Whether a failure's first line says only that nothing was found
        (``nothing_found``), whole or after the prefixes a runtime wraps an
        exception in: ``Error executing tool 'web_search' with arguments
        {...}: Exception: No results found! Try a shorter query.``"""
        parts = content.lstrip()[:_STATE_HEAD].partition("\n")[0].split(": ", 3)
        regexes = self._checks[_NOTHING_CHECK][0]
        tails = (": ".join(parts[at:]) for at in range(len(parts)))
        return any(len(tail) <= _NOTHING_FOUND_CHARS and regexes.search(tail) for tail in tails)

    def _says(self, check: int, content: str, found: int | None) -> bool:
        """Whether ``check``'s patterns match ``content`` (the head it
        reads): from ``found``, one set pass over a short result, when given."""
        if found is not None:
            return bool(found >> check & 1)
        regexes, head, anchored = self._checks[check]
        text = content[:head] if head else content
        return regexes.match(text) if anchored else regexes.search(text)

    def _grind(
        self, state: _AgentLoops, result: ToolResult, note: _Note, digest: bytes, found: int | None
    ) -> Action | None:
        """Count a successful result against its target's run: the same
        target (program, file or URL) answering the same thing to other
        arguments. Arguments that differ only in paging arguments (offset,
        cursor, page, ...) are paging, not a grind; an empty result, or one
        saying only that nothing was found, is no answer at all. A result
        headed by its call's own command, URL or query (Gemini CLI's
        ``Command: …``, a fetch server's ``Contents of <url>:``) is compared
        without it: another command quoted is no other answer."""
        rules, fp, target = note.rules, note.fp, note.target
        if not rules.grind_at:
            return None
        if target is None:
            return None  # nothing named to grind on: an action tool's "ok" to new arguments is no answer
        key = (result.tool, target)
        content, args = result.content, result.args
        empty = content.startswith(_EMPTY_HEAD)
        if isinstance(args, dict) and not _QUOTED_KEYS.isdisjoint(args):
            unquoted = _unquoted(args, content)
            if unquoted is not None:
                content, found, empty = unquoted, None, _EMPTY_OUTPUT in unquoted
                shape = ResultNormalizer.exact(content) if note.file else self._normalizer.shape(error_head(content))
                digest = shape.digest
        # a search's whole answer is that it found nothing (``nothing_found``); a search tool's
        # few words (a placeholder, a count) are too little to call another query's answer the same
        if (
            empty
            or digest == self._empty
            or (len(content) <= _NOTHING_FOUND_CHARS and self._says(_NOTHING_CHECK, content, found))
            or (target == result.tool and len(content) < _ANSWER_CHARS)
        ):
            state.grinds.pop(key, None)
            return None
        grind = state.grinds.get(key)
        if grind is None or grind.result != digest or result.ts - grind.ts >= self._decay:
            _keep(state.grinds, key, _Grind(digest, fp.digest, result.args, result.ts))
            return None
        grind.ts = result.ts
        if grind.fp == fp.digest:
            return None  # the same call again: the repeat rules judge it
        paging = _same_but(grind.args, result.args, self._paging_args)
        grind.fp = fp.digest
        grind.args = result.args
        if paging:
            return None
        grind.count += 1
        if grind.count < rules.grind_at or grind.advised:
            return None
        grind.advised = True
        text = _GRIND_ADVICE.format(target=target, count=grind.count, tool=result.tool, arguments=fp.preview(_PREVIEW))
        return self._action("remind", result, grind.count, text, rules.grind_at)

    def on_user_message(self, state: _AgentLoops, message: UserMessage) -> None:
        if self._interjection(message.text) and not asks_to_repeat(message.text):
            return
        state.new_epoch()
        state.writes.clear()
        state.edits.clear()
        state.redone.clear()
        state.redo = None
        if self.config.requested_repeats:
            state.allowance = requested_repeats(message.text)
            state.makes = requested_makes(message.text)
            state.patient = asks_to_keep_polling(message.text)
        else:
            state.allowance = 0
            state.makes = {}
            state.patient = False

    def _observe(
        self,
        state: _AgentLoops,
        result: ToolResult,
        fp: Fingerprint,
        shape: Shape,
        failed: bool,
        poll: bool,
        prose: bool = False,
        made: bool = False,
        unnamed: bool = False,
        stepped: bool = False,
    ) -> tuple[_Signature, int]:
        """Count one result of a tracked call against its signature. The
        gap: how many tracked results back the signature's previous one was,
        when this one repeats it unchanged; 0 when it brings news. A result
        that differs from the previous one only by a counter grown by one
        (``tick 4``, ``tick 5``) repeats it, unless the call is a poll or the
        agent waited (an untracked ``sleep``) since the previous one; an
        occurrence after an idle gap of ``decay_seconds`` starts over; nor
        is a ``stepped`` click's page, whose number grew by the step. A
        ``prose`` answer (a call that runs no shell command) saying in new
        words that nothing was found repeats one that said so too. A result
        that ``made`` one more of something (``_made``) brings news, and so
        does an ``unnamed`` click's acknowledgement when anything brought
        news since (a look that saw the page change, or that cannot tell)."""
        signature = state.remember(fp.digest, self.config.window)
        state.seen += 1
        gap = 0
        same = (
            not made
            and signature.count
            and (
                signature.result == shape.digest
                or (
                    not poll
                    and not stepped
                    and signature.last > state.waited_at
                    and signature.shape is not None
                    and shape.counts_on(signature.shape)
                )
            )
        )
        books = self._tool_facts(result.tool).books
        if same and (books or unnamed) and state.news_at > signature.last:
            # the agent's own plan or todo list restated, or a click that says only that it clicked,
            # while its work brought news: no repeat
            same = False
        if poll:
            amounts = _amounts(result.content, result.ts)
            if same and amounts != signature.amounts:
                same = False  # a count, a byte total or a lag moved: the job advances
            signature.amounts = amounts
        elif prose and signature.count and not same and not failed:
            # a subagent or an answering tool asked the same again says it found nothing in new words
            unfound = _NOT_FOUND.search(_first_sentence(result.content))
            same = unfound and signature.unfound
            signature.unfound = unfound
        if same and not (result.ts - signature.ts >= self._decay):
            signature.count += 1
            gap = state.seen - signature.last
        else:
            if not books:  # news of the work, not of the books kept on it
                state.news_at = state.seen
            signature.count = 1
            signature.result = shape.digest
            signature.since = result.ts
            signature.nudges = 0
            # a wait the poll was told of stands; after an idle gap (another job) it starts over
            if same or result.ts - signature.ts >= self._decay:
                signature.told = 0
            signature.level = signature.told
            signature.denials = 0
            signature.denied_step = None
        signature.shape = shape
        signature.last = state.seen
        signature.spacing = max(result.ts - signature.ts, state.slept - signature.slept)
        signature.ts = result.ts
        signature.slept = state.slept
        signature.failed = failed
        signature.poll = poll
        return signature, gap

    def _made(self, state: _AgentLoops, result: ToolResult, fp: Fingerprint, shape: Shape, shell: bool) -> int | None:
        """How many results in a row this call of a tool, or a ``shell``
        command, that makes something (``guard.policies.reads.makes``,
        ``makes_command``) has answered with one more item than the last
        (``Shape.makes_next``): ``None`` for any other call."""
        if not self._makes(result.tool, shell_command(result.args) if shell else None):
            return None
        last = state.signatures.get(fp.digest)
        if last is None or last.shape is None or result.ts - last.ts >= self._decay or not shape.makes_next(last.shape):
            return 1
        return last.made + 1

    def _back_off(self, signature: _Signature, result: ToolResult, fp: Fingerprint, rules: _Rules) -> Action | None:
        """A nudge for an unchanged poll, naming the next wait. Waits the
        agent already keeps between polls are skipped, so a patient poller
        is not nagged; before a poll is denied it is always nudged once."""
        config = self.config
        count = signature.count
        at = rules.poll_nudge_at
        stalled = count >= rules.poll_deny_after or bool(
            config.poll_deny_seconds and result.ts - signature.since >= config.poll_deny_seconds
        )
        final = stalled and not signature.nudges and signature.spacing < self._patient_wait
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
        signature.level = signature.told = min(level + 1, len(waits))
        signature.nudges += 1
        text = _POLL_ADVICE.format(
            count=count,
            tool=result.tool,
            arguments=fp.preview(_PREVIEW),
            elapsed=_elapsed(result.ts - signature.since),
            wait=wait,
            how=_BLOCKING_WAIT.format(wait=wait),
        )
        return self._action("remind", result, count, text, at)

    def _waited(self, state: _AgentLoops, signature: _Signature, ts: float) -> bool:
        """Whether the agent waited (an untracked sleep, for at least the
        shortest back-off) since ``signature``'s last result or denial: then
        the same call checks for something to happen, a poll."""
        return (
            signature.last <= state.waited_at
            # a clock stepped back (NTP, a machine resumed) hides how long: the agent did wait
            and not (
                0 <= ts - signature.ts < self._shortest_wait
                and state.slept - signature.slept < self._shortest_wait  # nor did its sleeps say so
            )
        )

    @staticmethod
    def _checks_on(note: _Note, program: str | None, tool: str, args: Any, failed: bool) -> bool:
        """Whether a call that succeeded checks on something a user may ask
        to keep watching (an order, a job, a page): a tool's own read (one
        known to read, or named for reading: ``fetch_url``), not a file's,
        not a search, not a shell command (whose polls are read from the
        command)."""
        return (
            not failed
            and program is None
            and (not note.acts or names_a_read(tool))
            and note.writing is None
            and not note.file
            and not (isinstance(args, dict) and not _QUERY_KEYS.isdisjoint(args))
        )

    def _polled(self, tool: str, args: Any, command: str) -> bool:
        """A poll by its arguments: a poll tool's call (not typing input) or
        a poll command (``sudo``-like words in front of a step dropped, as
        for reads). A call that succeeded is also a poll when its result
        reports a pending state (``poll_states``)."""
        if self._poll_tools is not None and self._poll_tools.tracks(tool) and not _typed(tool, args):
            return True
        if not command.strip():
            return True  # an empty shell command reads more output of the running one
        if self._poll_commands.search(command):
            return True
        plain = without_prefixes(command)  # sudo systemctl status app, FORCE_COLOR=0 gh run list
        return plain is not command and self._poll_commands.search(plain)

    def _action(self, kind: ActionKind, event: ToolCall | ToolResult, count: int, text: str, threshold: int) -> Action:
        return action_for(event, policy=self.name, kind=kind, count=count, text=text, threshold=threshold)
