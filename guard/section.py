"""What every policy's config section shares: the ``enabled`` switch and
``mode``, the error every bad value raises, and the checks the sections run on their
values when built."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Self

import msgspec

from guard._text import one_line, shown
from guard.patterns import PatternError
from guard.patterns import check_regexes as _compile_regexes

__all__ = [
    "MODES",
    "ConfigError",
    "Section",
    "check_bool",
    "check_int",
    "check_mode",
    "check_names",
    "check_patterns",
    "check_positive_list",
    "check_regexes",
    "default_of",
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


def check_bool(key: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ConfigError(key, value, "must be true or false")


MOST = 2**53
"""The largest integer a setting may be: every one is exact as a float, so
a count or a time in milliseconds never overflows where it is divided."""


def check_int(key: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(key, value, f"must be an integer >= {minimum}")
    if value > MOST:
        raise ConfigError(key, value, f"must be an integer from {minimum} to {MOST}")


def check_patterns(key: str, value: Any) -> None:
    if not isinstance(value, (list, tuple)):
        raise ConfigError(key, value, "must be a list of tool-name patterns")
    for item in value:
        if not isinstance(item, str) or not item:
            raise ConfigError(key, item, "each pattern must be a non-empty string")


MODES = ("enforce", "shadow")
"""A section's ``mode``: ``enforce`` delivers its actions; ``shadow`` computes
and records every action but delivers none (nothing reaches the model,
nothing is denied, no halt is asked)."""


def check_mode(key: str, value: Any) -> None:
    if value not in MODES:
        raise ConfigError(key, value, 'must be "enforce" or "shadow"')


@functools.cache
def _defaults(section: type[msgspec.Struct]) -> dict[str, Any]:
    return {
        field.name: field.default_factory() if field.default_factory is not msgspec.NODEFAULT else field.default
        for field in msgspec.structs.fields(section)
    }


def default_of(section: msgspec.Struct, name: str) -> Any:
    """The default of ``section``'s field ``name``."""
    return _defaults(type(section))[name]


_NO_DEFAULT: Any = object()


def check_regexes(key: str, value: Any, default: Any = _NO_DEFAULT) -> None:
    if value is default:
        # The defaults are valid. Compiling them to check would cost every
        # start of the command hook (the sections' defaults are built at import).
        return
    if not isinstance(value, (list, tuple)):
        raise ConfigError(key, value, "must be a list of regular expressions")
    for item in value:
        if not isinstance(item, str):
            raise ConfigError(key, item, "each entry must be a string")
        if not item:
            raise ConfigError(key, item, "an empty regular expression matches everywhere: leave it out")
    try:
        _compile_regexes(key, value)
    except PatternError as exc:
        raise ConfigError(key, exc.pattern, exc.reason) from None


def check_names(key: str, value: Any) -> None:
    if not isinstance(value, (list, tuple)):
        raise ConfigError(key, value, "must be a list of names")
    for item in value:
        if not isinstance(item, str) or not item:
            raise ConfigError(key, item, "each entry must be a non-empty string")


class Section(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of a built-in policy's config section: a frozen Struct whose
    ``__post_init__`` validates every value, raising ``ConfigError``
    (``check_mode`` included: ``mode`` is every section's)."""

    enabled: bool = True
    mode: str = "enforce"

    def check_mode(self, section: str) -> None:
        """Raise ``ConfigError`` unless ``mode`` is one of ``MODES``."""
        check_mode(f"{section}.mode", self.mode)

    @property
    def active(self) -> bool:
        """Whether the guard runs the policy this section configures."""
        return self.enabled

    def relative_to(self, base: Path) -> Self:
        """This section with the paths it holds resolved against ``base``
        (the directory of the config file it was read from)."""
        return self


def check_positive_list(key: str, value: Any) -> None:
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(key, value, "must be a non-empty list of integers >= 1")
    for item in value:
        check_int(key, item, 1)
