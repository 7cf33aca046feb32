"""Policy ``remind``: advisory reminders on consecutive identical calls.

Counts runs of consecutive calls to the same tool with the
same canonical arguments, and at configured run lengths adds a reminder after
the result. It never blocks or rewrites a call.
"""

from __future__ import annotations

from msgspec.structs import force_setattr

from bus import ToolResult, UserMessage
from guard.actions import Action, action_for
from guard.calls import CallSelector, Interjections
from guard.fingerprint import FingerprintCache
from guard.policy import Policy
from guard.section import (
    MOST,
    ConfigError,
    Section,
    check_bool,
    check_int,
    check_names,
    check_patterns,
    check_regexes,
    default_of,
)

__all__ = ["DETAILED_REMINDER", "GENTLE_REMINDER", "RemindPolicy"]

GENTLE_REMINDER = (
    "You are repeating the exact same tool call with identical arguments. Carefully analyze the previous "
    "result before calling again: if the task is not complete, try a different approach or different "
    "arguments instead of repeating the call."
)

DETAILED_REMINDER = (
    "Repeated tool call detected:\n"
    "- tool: {tool}\n"
    "- consecutive_calls: {count}\n"
    "- arguments: {arguments}\n"
    "The repeated calls are not making progress. Do not call this tool with these exact arguments again. "
    "Inspect the latest result and choose a different action, different arguments, or finish the task if "
    "enough evidence has been gathered."
)


class _Chain:
    """One agent's current run: the digest of its last tracked call and how
    many times in a row it has been made."""

    __slots__ = ("count", "digest")

    def __init__(self) -> None:
        self.digest = b""
        self.count = 0


class RemindConfig(Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Policy ``remind``: advisory reminders on consecutive repeats."""

    thresholds: tuple[int, ...] = (3, 5, 8)
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ("todo_write",)
    exclude_commands: tuple[str, ...] = ()
    ignored_args: tuple[str, ...] = ()
    interjections: tuple[str, ...] = ()
    arguments_preview_chars: int = 500
    repeat_every: int = 0

    def __post_init__(self) -> None:
        check_bool("remind.enabled", self.enabled)
        self.check_mode("remind")
        thresholds = self.thresholds
        if not isinstance(thresholds, (list, tuple)) or not thresholds:
            raise ConfigError("remind.thresholds", thresholds, "must be a non-empty list of integers >= 2")
        seen: set[int] = set()
        for value in thresholds:
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError("remind.thresholds", value, "each threshold must be an integer >= 2")
            if value < 2:
                raise ConfigError("remind.thresholds", value, "each threshold must be an integer >= 2")
            if value > MOST:
                raise ConfigError("remind.thresholds", value, f"each threshold must be an integer from 2 to {MOST}")
            if value in seen:
                raise ConfigError("remind.thresholds", value, "thresholds must not repeat")
            seen.add(value)
        force_setattr(self, "thresholds", tuple(sorted(thresholds)))
        check_patterns("remind.include", self.include)
        check_patterns("remind.exclude", self.exclude)
        force_setattr(self, "include", tuple(self.include))
        force_setattr(self, "exclude", tuple(self.exclude))
        check_regexes("remind.exclude_commands", self.exclude_commands, default_of(self, "exclude_commands"))
        check_names("remind.ignored_args", self.ignored_args)
        check_regexes("remind.interjections", self.interjections, default_of(self, "interjections"))
        for key in ("exclude_commands", "ignored_args", "interjections"):
            force_setattr(self, key, tuple(getattr(self, key)))
        check_int("remind.arguments_preview_chars", self.arguments_preview_chars, 1)
        check_int("remind.repeat_every", self.repeat_every, 0)


class RemindPolicy(Policy[_Chain]):
    name = "remind"
    plugin = "repeat-tool-reminder"
    shareable = True
    section = RemindConfig

    def __init__(self, config: RemindConfig) -> None:
        self._calls = CallSelector(config.include, config.exclude, config.exclude_commands, config.ignored_args)
        self._interjection = Interjections(config.interjections)
        self._thresholds = frozenset(config.thresholds)
        self._first = config.thresholds[0]
        self._last = config.thresholds[-1]
        self._every = config.repeat_every
        self._preview = config.arguments_preview_chars

    def new_state(self) -> _Chain:
        return _Chain()

    def on_result(self, state: _Chain, result: ToolResult, fingerprints: FingerprintCache) -> Action | None:
        if not self._calls.tracks(result.tool, result.args):
            return None  # untracked calls neither count nor reset
        fp = self._calls.fingerprint(fingerprints, result.tool, result.args, result.call_id)
        if state.count and state.digest == fp.digest:
            state.count += 1
        else:
            state.digest = fp.digest
            state.count = 1
        count = state.count
        if count in self._thresholds:
            threshold = count
        elif self._every and count > self._last and (count - self._last) % self._every == 0:
            threshold = self._last
        else:
            return None
        if count == self._first:
            text = GENTLE_REMINDER
        else:
            text = DETAILED_REMINDER.format(tool=result.tool, count=count, arguments=fp.preview(self._preview))
        return action_for(result, policy=self.name, kind="remind", count=count, text=text, threshold=threshold)

    def on_user_message(self, state: _Chain, message: UserMessage) -> None:
        if self._interjection(message.text):
            return
        state.digest = b""
        state.count = 0
