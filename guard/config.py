"""The guard's configuration: one section per policy, validated when built.

Build it in Python (``Config(remind=RemindConfig(thresholds=(2, 4)))``) or
load it from TOML or YAML with ``load_config``. Every bad value raises
``ConfigError`` naming the key, the value and the rule; nothing falls back
silently to a default.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec
from msgspec.structs import force_setattr

from bus import MAX_NESTING, NotRegularFileError, read_regular
from guard._text import one_line, shown
from guard.calls import DEFAULT_IGNORED_ARGS, DEFAULT_INTERJECTIONS, LOOPS_INTERJECTIONS
from guard.normalize import DEFAULT_RESULT_NORMALIZE
from guard.patterns import PatternError, check_regexes
from guard.progress import DEFAULT_MUTATING_COMMANDS, DEFAULT_MUTATING_TOOLS

__all__ = [
    "MAX_CONFIG_BYTES",
    "MODES",
    "PRESETS",
    "RECOMMENDED",
    "SHADOW_ENV",
    "TURNS_THRESHOLD_ENV",
    "Config",
    "ConfigError",
    "LoopsConfig",
    "LoopsToolConfig",
    "RemindConfig",
    "RescueConfig",
    "TurnsConfig",
    "apply_environment",
    "load_config",
    "parse_config",
    "shadowed",
    "to_toml",
]


class ConfigError(ValueError):
    """A configuration value broke a rule. ``key`` is dotted (``remind.thresholds``).

    The message is one line: a long value is shown cut short, and a long
    key or rule is too.
    """

    def __init__(self, key: str, value: Any, rule: str) -> None:
        self.key = key
        self.value = value
        self.rule = rule
        super().__init__(f"{one_line(key, 100)} = {shown(value)}: {one_line(rule, 300)}")


def _check_bool(key: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ConfigError(key, value, "must be true or false")


def _check_int(key: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(key, value, f"must be an integer >= {minimum}")


def _check_patterns(key: str, value: Any) -> None:
    if not isinstance(value, (list, tuple)):
        raise ConfigError(key, value, "must be a list of tool-name patterns")
    for item in value:
        if not isinstance(item, str) or not item:
            raise ConfigError(key, item, "each pattern must be a non-empty string")


@functools.cache
def _defaults(section: type[msgspec.Struct]) -> dict[str, Any]:
    return {field.name: field.default for field in msgspec.structs.fields(section)}


def _default(section: msgspec.Struct, name: str) -> Any:
    """The default of ``section``'s field ``name``."""
    return _defaults(type(section))[name]


def _check_regexes(key: str, value: Any, default: Any = None) -> None:
    if value is default:
        # The defaults are valid. Compiling them to check would cost every
        # start of the command hook (the sections' defaults are built at import).
        return
    if not isinstance(value, (list, tuple)):
        raise ConfigError(key, value, "must be a list of regular expressions")
    for item in value:
        if not isinstance(item, str):
            raise ConfigError(key, item, "each entry must be a string")
    try:
        check_regexes(key, value)
    except PatternError as exc:
        raise ConfigError(key, exc.pattern, exc.reason) from None


def _check_names(key: str, value: Any) -> None:
    if not isinstance(value, (list, tuple)):
        raise ConfigError(key, value, "must be a list of names")
    for item in value:
        if not isinstance(item, str) or not item:
            raise ConfigError(key, item, "each entry must be a non-empty string")


MODES = ("enforce", "shadow")
"""A section's ``mode``: ``enforce`` delivers its actions; ``shadow`` computes
and records every action but delivers none (nothing reaches the model,
nothing is denied, no halt is asked)."""


class _Section(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    enabled: bool = True
    mode: str = "enforce"

    def _check_mode(self, section: str) -> None:
        if self.mode not in MODES:
            raise ConfigError(f"{section}.mode", self.mode, 'must be "enforce" or "shadow"')


class RemindConfig(_Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Policy ``remind`` (seeds 000/001): advisory reminders on consecutive repeats."""

    thresholds: tuple[int, ...] = (3, 5, 8)
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ("todo_write",)
    exclude_commands: tuple[str, ...] = ()
    ignored_args: tuple[str, ...] = ()
    interjections: tuple[str, ...] = ()
    arguments_preview_chars: int = 500
    repeat_every: int = 0

    def __post_init__(self) -> None:
        _check_bool("remind.enabled", self.enabled)
        self._check_mode("remind")
        thresholds = self.thresholds
        if not isinstance(thresholds, (list, tuple)) or not thresholds:
            raise ConfigError("remind.thresholds", thresholds, "must be a non-empty list of integers >= 2")
        seen: set[int] = set()
        for value in thresholds:
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError("remind.thresholds", value, "each threshold must be an integer >= 2")
            if value < 2:
                raise ConfigError("remind.thresholds", value, "each threshold must be an integer >= 2")
            if value in seen:
                raise ConfigError("remind.thresholds", value, "thresholds must not repeat")
            seen.add(value)
        force_setattr(self, "thresholds", tuple(sorted(thresholds)))
        _check_patterns("remind.include", self.include)
        _check_patterns("remind.exclude", self.exclude)
        force_setattr(self, "include", tuple(self.include))
        force_setattr(self, "exclude", tuple(self.exclude))
        _check_regexes("remind.exclude_commands", self.exclude_commands, _default(self, "exclude_commands"))
        _check_names("remind.ignored_args", self.ignored_args)
        _check_regexes("remind.interjections", self.interjections, _default(self, "interjections"))
        for key in ("exclude_commands", "ignored_args", "interjections"):
            force_setattr(self, key, tuple(getattr(self, key)))
        _check_int("remind.arguments_preview_chars", self.arguments_preview_chars, 1)
        _check_int("remind.repeat_every", self.repeat_every, 0)


class TurnsConfig(_Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Policy ``turns`` (seed 002): the same call on N consecutive turns.

    ``threshold`` consecutive turns draw one advisory (0 switches the policy
    off); if the call goes on, ``deny_after`` more turns deny it and
    ``halt_after`` more after that request a halt (0 switches a rung off).
    Tools outside ``include`` or in ``exclude``, and calls whose shell
    ``command`` matches one of ``exclude_commands`` (deliberate polling
    through a shell tool), are invisible to it; ``exempt`` and
    ``exempt_commands`` are the older names of the same lists. ``summary_chars`` caps the quoted
    last result. The environment variable ``REPEAT_TOOL_GUARD_TURNS_THRESHOLD``
    overrides ``threshold`` for live guards (``apply_environment``).
    """

    threshold: int = 5
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    exclude_commands: tuple[str, ...] = ()
    exempt: tuple[str, ...] = ()
    exempt_commands: tuple[str, ...] = ()
    ignored_args: tuple[str, ...] = ()
    interjections: tuple[str, ...] = ()
    deny_after: int = 2
    halt_after: int = 2
    summary_chars: int = 200

    def __post_init__(self) -> None:
        _check_bool("turns.enabled", self.enabled)
        self._check_mode("turns")
        _check_int("turns.threshold", self.threshold, 0)
        if self.threshold == 1:
            raise ConfigError(
                "turns.threshold", 1, "must be 0 (off) or an integer >= 2: at 1 every call would be a loop"
            )
        _check_patterns("turns.include", self.include)
        _check_patterns("turns.exclude", self.exclude)
        _check_regexes("turns.exclude_commands", self.exclude_commands)
        for key in ("include", "exclude", "exclude_commands"):
            force_setattr(self, key, tuple(getattr(self, key)))
        _check_patterns("turns.exempt", self.exempt)
        force_setattr(self, "exempt", tuple(self.exempt))
        _check_regexes("turns.exempt_commands", self.exempt_commands, _default(self, "exempt_commands"))
        force_setattr(self, "exempt_commands", tuple(self.exempt_commands))
        _check_names("turns.ignored_args", self.ignored_args)
        _check_regexes("turns.interjections", self.interjections, _default(self, "interjections"))
        force_setattr(self, "ignored_args", tuple(self.ignored_args))
        force_setattr(self, "interjections", tuple(self.interjections))
        _check_int("turns.deny_after", self.deny_after, 0)
        _check_int("turns.halt_after", self.halt_after, 0)
        _check_int("turns.summary_chars", self.summary_chars, 1)


class RescueConfig(_Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Policy ``rescue`` (seed 003): windowed detection, denial, escalation.

    Keys are the seed's names in snake_case; ``mutating_commands``,
    ``escalation_tools`` and ``redact_patterns`` are additions (docs/policies/rescue.md). A relative
    ``ask_command`` or ``log_file`` in a config file is resolved against the
    file's directory by ``load_config``.
    """

    window: int = 12
    nudge_at: int = 3
    rescue_at: int = 5
    stall_at: int = 40
    max_rescues: int = 3
    cooldown_ms: int = 45_000
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ("todo_write", "ask_user", "mcp__claude__*")
    exclude_commands: tuple[str, ...] = ()
    ignored_args: tuple[str, ...] = DEFAULT_IGNORED_ARGS
    interjections: tuple[str, ...] = DEFAULT_INTERJECTIONS
    mutating_tools: tuple[str, ...] = DEFAULT_MUTATING_TOOLS
    mutating_commands: tuple[str, ...] = DEFAULT_MUTATING_COMMANDS
    escalation_tools: tuple[str, ...] = ("mcp__claude__*",)
    ask_command: str = "~/.local/bin/ask-claude"
    ask_model: str = "opus"
    ask_timeout_ms: int = 45_000
    redact_patterns: tuple[str, ...] = ()
    log_file: str = ""

    def __post_init__(self) -> None:
        _check_bool("rescue.enabled", self.enabled)
        self._check_mode("rescue")
        _check_int("rescue.nudge_at", self.nudge_at, 2)
        _check_int("rescue.rescue_at", self.rescue_at, 3)
        _check_int("rescue.window", self.window, 3)
        _check_int("rescue.stall_at", self.stall_at, 0)
        _check_int("rescue.max_rescues", self.max_rescues, 0)
        _check_int("rescue.cooldown_ms", self.cooldown_ms, 0)
        _check_int("rescue.ask_timeout_ms", self.ask_timeout_ms, 1)
        if self.rescue_at <= self.nudge_at:
            raise ConfigError("rescue.rescue_at", self.rescue_at, f"must exceed rescue.nudge_at ({self.nudge_at})")
        if self.window < self.rescue_at:
            raise ConfigError("rescue.window", self.window, f"must be at least rescue.rescue_at ({self.rescue_at})")
        if self.stall_at and self.stall_at < self.rescue_at:
            rule = f"must be 0 (disabled) or at least rescue.rescue_at ({self.rescue_at})"
            raise ConfigError("rescue.stall_at", self.stall_at, rule)
        _check_patterns("rescue.include", self.include)
        _check_patterns("rescue.exclude", self.exclude)
        _check_regexes("rescue.exclude_commands", self.exclude_commands, _default(self, "exclude_commands"))
        _check_names("rescue.ignored_args", self.ignored_args)
        _check_regexes("rescue.interjections", self.interjections, _default(self, "interjections"))
        _check_patterns("rescue.mutating_tools", self.mutating_tools)
        _check_regexes("rescue.mutating_commands", self.mutating_commands, _default(self, "mutating_commands"))
        _check_patterns("rescue.escalation_tools", self.escalation_tools)
        _check_regexes("rescue.redact_patterns", self.redact_patterns, _default(self, "redact_patterns"))
        for key in ("ask_command", "ask_model"):
            value = getattr(self, key)
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"rescue.{key}", value, "must be a non-empty string")
        if not isinstance(self.log_file, str):
            raise ConfigError("rescue.log_file", self.log_file, "must be a string ('' disables the trip log)")
        for key in (
            "include",
            "exclude",
            "exclude_commands",
            "ignored_args",
            "interjections",
            "mutating_tools",
            "mutating_commands",
            "escalation_tools",
        ):
            force_setattr(self, key, tuple(getattr(self, key)))
        force_setattr(self, "redact_patterns", tuple(self.redact_patterns))

    def relative_to(self, base: Path) -> RescueConfig:
        """This section with a relative ``ask_command`` path (one with a
        slash; a bare name is looked up on ``PATH``) and a relative
        ``log_file`` resolved against ``base``."""
        changes: dict[str, str] = {}
        command = self.ask_command
        if "/" in command and not command.startswith("~") and not Path(command).is_absolute():
            changes["ask_command"] = str(base / command)
        log_file = self.log_file
        if log_file and not log_file.startswith("~") and not Path(log_file).is_absolute():
            changes["log_file"] = str(base / log_file)
        return msgspec.structs.replace(self, **changes) if changes else self


def _check_positive_list(key: str, value: Any) -> None:
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(key, value, "must be a non-empty list of integers >= 1")
    for item in value:
        _check_int(key, item, 1)


_TOOL_KINDS = ("", "poll", "paging", "exclude")


class LoopsToolConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
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

    def check(self, key: str) -> None:
        """Validate under the dotted ``key`` (``loops.tools."Bash"``)."""
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
                _check_int(f"{key}.{name}", value, minimum)
        _check_names(f"{key}.ignored_args", self.ignored_args)
        _check_names(f"{key}.identity_args", self.identity_args)
        if self.mutating is not None:
            _check_bool(f"{key}.mutating", self.mutating)
        force_setattr(self, "ignored_args", tuple(self.ignored_args))
        force_setattr(self, "identity_args", tuple(self.identity_args))


class LoopsConfig(_Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Policy ``loops``: result-aware detection of repeats, cycles, stalled
    polls and failure streaks (docs/policies/loops.md). Off unless its
    section is present; the ``recommended`` preset turns it on."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ("sleep", "wait")
    exclude_commands: tuple[str, ...] = (r"^\s*sleep\s+[0-9.]+[smhd]?\s*;?\s*$",)
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
    error_results: tuple[str, ...] = (r"ERROR:\s", r"<tool_use_error>")
    transient_errors: tuple[str, ...] = (
        r"(?i)\b(?:429|50[0-4]|529)\b[^\n]{0,40}\b(?:too many requests|internal server error|bad gateway|service "
        r"unavailable|gateway time-?out|overloaded|error|status)\b",
        r"(?i)\b(?:status|http|code|error)[\s:=\"']*(?:429|50[0-4]|529)\b",
        r"(?i)\b(?:rate[ _-]?limit(?:ed)?|too many requests|overloaded|temporarily unavailable|service unavailable|"
        r"try again later|connection (?:reset|aborted|timed out)|econnreset|etimedout|read timed? ?out|"
        r"request timed? ?out|deadline exceeded|network is unreachable|temporary failure in name resolution)\b",
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
    decay_seconds: int = 900
    paging_tools: tuple[str, ...] = ("*scroll*", "*page_down*", "*page_up*", "*next_page*", "*paginate*", "*load_more*")
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
        r"prev(?:ious)?(?:[ _-]?page)?|more|load[ _-]?more)$",
    )
    tools: dict[str, LoopsToolConfig] = msgspec.field(default_factory=dict)
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
    poll_nudge_at: int = 4
    poll_nudge_every: int = 2
    poll_waits: tuple[int, ...] = (5, 10, 30, 60)
    poll_deny_after: int = 12
    poll_deny_seconds: int = 600
    mutating_tools: tuple[str, ...] = DEFAULT_MUTATING_TOOLS
    mutating_commands: tuple[str, ...] = DEFAULT_MUTATING_COMMANDS

    def __post_init__(self) -> None:
        _check_bool("loops.enabled", self.enabled)
        self._check_mode("loops")
        _check_bool("loops.requested_repeats", self.requested_repeats)
        for key in ("include", "exclude", "poll_tools", "mutating_tools", "paging_tools"):
            _check_patterns(f"loops.{key}", getattr(self, key))
        _check_names("loops.paging_args", self.paging_args)
        for key in (
            "exclude_commands",
            "interjections",
            "error_results",
            "transient_errors",
            "cancelled_results",
            "paging_values",
            "result_normalize",
            "poll_commands",
            "poll_states",
            "mutating_commands",
        ):
            _check_regexes(f"loops.{key}", getattr(self, key), _default(self, key))
        _check_names("loops.ignored_args", self.ignored_args)
        _check_int("loops.advise_at", self.advise_at, 1)
        _check_int("loops.advise_span", self.advise_span, 0)
        _check_int("loops.deny_at", self.deny_at, 2)
        _check_int("loops.window", self.window, self.deny_at)
        _check_int("loops.halt_after", self.halt_after, 0)
        _check_int("loops.error_at", self.error_at, 2)
        _check_int("loops.error_deny_at", self.error_deny_at, 0)
        if self.error_deny_at and self.error_deny_at <= self.error_at:
            rule = f"must be 0 (never deny) or more than loops.error_at ({self.error_at})"
            raise ConfigError("loops.error_deny_at", self.error_deny_at, rule)
        _check_int("loops.streak_deny_at", self.streak_deny_at, 0)
        if self.streak_deny_at and self.streak_deny_at <= self.error_at:
            rule = f"must be 0 (never deny) or more than loops.error_at ({self.error_at})"
            raise ConfigError("loops.streak_deny_at", self.streak_deny_at, rule)
        _check_int("loops.poll_nudge_at", self.poll_nudge_at, 2)
        _check_int("loops.poll_nudge_every", self.poll_nudge_every, 1)
        _check_positive_list("loops.poll_waits", self.poll_waits)
        _check_int("loops.poll_deny_after", self.poll_deny_after, self.poll_nudge_at + 1)
        _check_int("loops.poll_deny_seconds", self.poll_deny_seconds, 0)
        _check_int("loops.transient_at", self.transient_at, 2)
        _check_int("loops.transient_deny_at", self.transient_deny_at, 0)
        if self.transient_deny_at and self.transient_deny_at <= self.transient_at:
            rule = f"must be 0 (never deny) or more than loops.transient_at ({self.transient_at})"
            raise ConfigError("loops.transient_deny_at", self.transient_deny_at, rule)
        _check_int("loops.grind_at", self.grind_at, 0)
        if self.grind_at == 1:
            raise ConfigError("loops.grind_at", 1, "must be 0 (off) or an integer >= 2")
        _check_int("loops.grind_deny_at", self.grind_deny_at, 0)
        if self.grind_deny_at and self.grind_deny_at <= self.grind_at:
            rule = f"must be 0 (never deny) or more than loops.grind_at ({self.grind_at})"
            raise ConfigError("loops.grind_deny_at", self.grind_deny_at, rule)
        _check_int("loops.decay_seconds", self.decay_seconds, 0)
        if not isinstance(self.tools, dict):
            raise ConfigError("loops.tools", self.tools, "must be a table of tool-name globs")
        for glob, settings in self.tools.items():
            if not isinstance(glob, str) or not glob:
                raise ConfigError("loops.tools", glob, "each key must be a non-empty tool-name glob")
            if not isinstance(settings, LoopsToolConfig):
                raise ConfigError(f'loops.tools."{glob}"', settings, "must be a table of settings")
            settings.check(f'loops.tools."{glob}"')
        for key in self.__struct_fields__:
            value = getattr(self, key)
            if isinstance(value, list):
                force_setattr(self, key, tuple(value))


class Config(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """All policies' settings. With no arguments only ``remind`` runs."""

    remind: RemindConfig = RemindConfig()
    turns: TurnsConfig = TurnsConfig(enabled=False)
    rescue: RescueConfig = RescueConfig(enabled=False)
    loops: LoopsConfig = LoopsConfig(enabled=False)

    def __post_init__(self) -> None:
        for name, kind in _SECTION_TYPES.items():
            if not isinstance(getattr(self, name), kind):
                raise ConfigError(name, getattr(self, name), f"must be a {kind.__name__}")


_SECTION_TYPES: dict[str, type[msgspec.Struct]] = {
    "remind": RemindConfig,
    "turns": TurnsConfig,
    "rescue": RescueConfig,
    "loops": LoopsConfig,
}
_SECTIONS = tuple(_SECTION_TYPES)
_CAMEL_HUMP = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_AT = re.compile(r"^(?P<rule>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.DOTALL)
_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]")


def _lookup(data: Any, path: str) -> Any:
    """The value at a msgspec error path such as ``.remind.thresholds[1]``;
    for a path through a table's keys (``.loops.tools[...].kind``), the table."""
    for name, index in _STEP.findall(path.split("[...]", 1)[0]):
        data = data[name] if name else data[int(index)]
    return data


def _unknown_key(section: str, key: str) -> str:
    fields = _SECTION_TYPES[section].__struct_fields__
    snake = _CAMEL_HUMP.sub("_", key).lower()
    hint = f"did you mean {snake}?" if snake in fields else f"known: {', '.join(fields)}"
    return f"unknown key ({hint})"


def parse_config(data: Mapping[str, Any], *, origin: str = "config") -> Config:
    """Build a ``Config`` from a parsed mapping (the contents of a file).

    A section present is enabled unless it says ``enabled = false``; an
    absent section keeps its default.
    """
    if not isinstance(data, Mapping):
        raise ConfigError(origin, data, "must be a table of policy sections")
    prepared: dict[str, Any] = {}
    for name, section in data.items():
        if name not in _SECTIONS:
            raise ConfigError(str(name), section, f"unknown section (known: {', '.join(_SECTIONS)})")
        if not isinstance(section, Mapping):
            raise ConfigError(name, section, "must be a table of settings")
        for key, value in section.items():
            if not isinstance(key, str):
                raise ConfigError(f"{name}.{key!r}", value, "keys must be strings")
            if key not in _SECTION_TYPES[name].__struct_fields__:
                raise ConfigError(f"{name}.{key}", value, _unknown_key(name, key))
        prepared[name] = {"enabled": True, **section}
    try:
        return msgspec.convert(prepared, Config)
    except msgspec.ValidationError as exc:
        if isinstance(exc.__cause__, ConfigError):
            raise exc.__cause__ from None
        match = _AT.match(str(exc))
        assert match is not None
        # Keys are known by now, so the path names fields and indexes only.
        rule, path = match["rule"], match["path"] or ""
        raise ConfigError(path.lstrip("."), _lookup(prepared, path), rule.rstrip(".")) from None


TURNS_THRESHOLD_ENV = "REPEAT_TOOL_GUARD_TURNS_THRESHOLD"
"""Overrides ``turns.threshold`` (file or Python value) for live guards."""

SHADOW_ENV = "REPEAT_TOOL_GUARD_SHADOW"
"""Set to ``1`` (``true``, ``yes``, ``on``), puts every policy of a live
guard in shadow mode (``shadowed``): what ``--shadow`` does for adapters."""

_SWITCH = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}

_DIGITS = re.compile(r"\s*[0-9]+\s*")


def apply_environment(config: Config, environ: Mapping[str, str] | None = None) -> Config:
    """``config`` with the environment's overrides applied. The edges that
    start a live guard call it (the adapters' ``GuardLink``, the Claude Code
    hook), so there the environment wins over a file or a Python value; a
    replay or an audit never does, so its result depends on the log and the
    config alone. ``environ`` defaults to ``os.environ``.

    ``REPEAT_TOOL_GUARD_SHADOW=1`` puts every section in shadow mode.
    ``REPEAT_TOOL_GUARD_TURNS_THRESHOLD`` replaces ``turns.threshold`` (0
    switches the policy off; it does not switch on a disabled section). A
    set but bad value, empty included, raises ``ConfigError`` naming the
    variable: nothing falls back silently.
    """
    env = os.environ if environ is None else environ
    shadow = env.get(SHADOW_ENV)
    if shadow is not None:
        if shadow.strip().lower() not in _SWITCH:
            raise ConfigError(SHADOW_ENV, shadow, "must be 1, true, yes, on, 0, false, no or off")
        if _SWITCH[shadow.strip().lower()]:
            config = shadowed(config)
    raw = env.get(TURNS_THRESHOLD_ENV)
    if raw is None:
        return config
    rule = "must be 0 (off) or an integer >= 2 (it overrides turns.threshold)"
    if not _DIGITS.fullmatch(raw):
        raise ConfigError(TURNS_THRESHOLD_ENV, raw, rule)
    try:
        turns = msgspec.structs.replace(config.turns, threshold=int(raw))
    except (ConfigError, ValueError):  # ValueError: more digits than int() takes
        raise ConfigError(TURNS_THRESHOLD_ENV, raw, rule) from None
    return msgspec.structs.replace(config, turns=turns)


def shadowed(config: Config) -> Config:
    """``config`` with every section in ``mode = "shadow"``: what ``--shadow``
    runs (each policy computes and records its actions, none is delivered)."""
    changes = {name: msgspec.structs.replace(getattr(config, name), mode="shadow") for name in _SECTIONS}
    return msgspec.structs.replace(config, **changes)


def _toml_value(value: Any) -> str:
    if value is None:
        raise ValueError("TOML has no null")  # pragma: no cover - callers leave None out
    if isinstance(value, msgspec.Struct):
        fields = [(k, getattr(value, k)) for k in value.__struct_fields__]
        defaults = _defaults(type(value))
        kept = [f"{k} = {_toml_value(v)}" for k, v in fields if v is not None and v != defaults[k]]
        return "{" + ", ".join(kept) + "}"
    if isinstance(value, dict):
        import json

        return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        import json  # here: only printing a config as TOML needs it

        return json.dumps(value, ensure_ascii=False)
    items = [_toml_value(v) for v in value]
    if sum(len(i) + 2 for i in items) <= 80:
        return f"[{', '.join(items)}]"
    return "[\n" + "".join(f"    {i},\n" for i in items) + "]"


def to_toml(config: Config) -> str:
    """``config`` as a TOML file that ``load_config`` reads back to an equal
    ``Config``: every section, every key (how to start a file from a preset)."""
    lines: list[str] = []
    for name in _SECTIONS:
        section = getattr(config, name)
        lines.append(f"[{name}]")
        lines.extend(f"{key} = {_toml_value(getattr(section, key))}" for key in section.__struct_fields__)
        lines.append("")
    return "\n".join(lines)


RECOMMENDED = Config(remind=RemindConfig(enabled=False), loops=LoopsConfig())
"""The ``recommended`` preset: the ``loops`` policy alone, with its
defaults (docs/policies/recommended.md has its measured error rates)."""

PRESETS: dict[str, Config] = {"recommended": RECOMMENDED}
"""Named configurations: wherever a config file is accepted, one of these
names selects the preset instead of a file."""


MAX_CONFIG_BYTES = 64 * 1024
"""The largest config file ``load_config`` reads."""


def load_config(path: str | os.PathLike[str]) -> Config:
    """Load a ``Config`` from a ``.toml`` file, or ``.yaml``/``.yml`` (needs
    PyYAML), or name a preset (``recommended``): the one place a config
    named on a command line or in an adapter is resolved.

    The file must be a regular file (not a FIFO, device or directory) of at
    most ``MAX_CONFIG_BYTES`` (a config is a few hundred bytes; the bound
    keeps parsing fast); a UTF-8 byte order mark is allowed. Nesting deeper
    than ``MAX_NESTING`` levels, a YAML alias (``*name``), a key given twice and a number too
    large to convert are errors, each a one-line ``ConfigError``.
    """
    preset = PRESETS.get(os.fspath(path)) if isinstance(path, str) else None
    if preset is not None:
        return preset
    file = Path(path)
    try:
        with read_regular(file, what="config file") as stream:
            raw = stream.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError("config file", str(file), "no such file") from None
    except NotRegularFileError as exc:
        kind = str(exc).rpartition(" is ")[2]
        raise ConfigError("config file", str(file), f"is {kind}") from None
    except OSError as exc:
        raise ConfigError("config file", str(file), f"cannot be read ({exc.strerror})") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError("config file", str(file), f"is larger than {MAX_CONFIG_BYTES // 1024} KiB")
    suffix = file.suffix.lower()
    if suffix == ".toml":
        data = _parse_toml(file, raw)
    elif suffix in (".yaml", ".yml"):
        data = _parse_yaml(file, raw)
    else:
        raise ConfigError("config file", str(file), "must end in .toml, .yaml or .yml")
    config = parse_config(data, origin=str(file))
    rescue = config.rescue.relative_to(file.resolve().parent)
    return config if rescue is config.rescue else msgspec.structs.replace(config, rescue=rescue)


_TOO_DEEP = f"nests tables or lists deeper than {MAX_NESTING} levels"
_TOO_LONG = f"holds a number of more than {sys.get_int_max_str_digits()} digits"


def _parse_toml(file: Path, raw: bytes) -> Any:
    import tomllib  # here: a hook without --config never parses TOML

    try:
        data = tomllib.loads(raw.decode("utf-8-sig"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError("config file", str(file), f"is not valid TOML ({exc})") from None
    except RecursionError:
        raise ConfigError("config file", str(file), _TOO_DEEP) from None
    except ValueError:  # an integer of more digits than int() converts
        raise ConfigError("config file", str(file), _TOO_LONG) from None
    if _depth(data) > MAX_NESTING:
        raise ConfigError("config file", str(file), _TOO_DEEP)
    return data


def _depth(data: Any) -> int:
    """How deeply ``data`` nests dicts and lists, counted without recursion."""
    deepest = 0
    stack = [(data, 1)]
    while stack:
        node, level = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is not None:
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in children)
    return deepest


def _parse_yaml(file: Path, raw: bytes) -> Any:
    try:
        import yaml
    except ImportError:  # pragma: no cover - depends on the environment
        rule = "YAML needs PyYAML: pip install 'repeat-tool-guard[yaml]'"
        raise ConfigError("config file", str(file), rule) from None
    from guard._yaml import load_yaml

    try:
        return load_yaml(raw.removeprefix(b"\xef\xbb\xbf")) or {}
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        what = "; ".join(part for part in (exc.context, exc.problem) if part)
        raise ConfigError("config file", str(file), f"is not valid YAML ({what}{where})") from None
    except yaml.YAMLError as exc:
        raise ConfigError("config file", str(file), f"is not valid YAML ({exc})") from None
    except ValueError:  # an integer of more digits than int() converts
        raise ConfigError("config file", str(file), _TOO_LONG) from None
