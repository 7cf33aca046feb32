"""The guard's configuration: one section per policy, validated when built.

Build it in Python (``Config(remind=RemindConfig(thresholds=(2, 4)))``) or
load it from TOML or YAML with ``load_config``. Every bad value raises
``ConfigError`` naming the key, the value and the rule; nothing falls back
silently to a default.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from bus import MAX_NESTING, NotRegularFileError, read_regular
from guard._regex import lazy_compile
from guard.policies.loops import LoopsConfig, LoopsToolConfig
from guard.policies.registry import BUILTIN, build_plugin, installed_plugins
from guard.policies.remind import RemindConfig
from guard.policies.rescue import RescueConfig
from guard.policies.turns import TurnsConfig
from guard.section import MODES, ConfigError, Section, default_of

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
    "every_policy",
    "load_config",
    "parse_config",
    "shadowed",
    "to_toml",
]


class Config(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """All policies' settings. With no arguments only ``remind`` runs.

    One field per built-in policy (``guard.policies.registry.BUILTIN``),
    each that policy's own ``Section``; ``plugins`` holds the sections of
    policies installed packages publish (``repeat_tool_guard.policies``),
    by section name, each built and so checked when the config is."""

    remind: RemindConfig = RemindConfig()
    turns: TurnsConfig = TurnsConfig(enabled=False)
    rescue: RescueConfig = RescueConfig(enabled=False)
    loops: LoopsConfig = LoopsConfig(enabled=False)
    plugins: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)

    def __post_init__(self) -> None:
        for policy in BUILTIN:
            kind = policy.section
            if not isinstance(getattr(self, policy.name), kind):
                raise ConfigError(policy.name, getattr(self, policy.name), f"must be a {kind.__name__}")
        if not isinstance(self.plugins, Mapping):
            raise ConfigError("plugins", self.plugins, "must be a table of sections, one per plugin policy")
        if self.plugins:
            found = installed_plugins()
            for name, settings in self.plugins.items():
                if not isinstance(name, str):
                    raise ConfigError("plugins", name, "a section's name must be a string")
                if not isinstance(settings, Mapping):
                    raise ConfigError(str(name), settings, "must be a table of settings")
                build_plugin(name, settings, found)

    def sections(self) -> dict[str, Section | dict[str, Any]]:
        """Every section by name: the built-in ones, then the plugins'."""
        return {**{policy.name: getattr(self, policy.name) for policy in BUILTIN}, **self.plugins}


_CAMEL_HUMP = lazy_compile(r"(?<=[a-z0-9])(?=[A-Z])")
_AT = lazy_compile(r"^(?P<rule>.*?)(?: - at (?P<key>`key` in )?`\$(?P<path>[^`]*)`)?$", re.DOTALL)
_STEP = lazy_compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]")


def _lookup(data: Any, path: str) -> Any:
    """The value at a msgspec error path such as ``.remind.thresholds[1]``;
    for a path through a table's keys (``.loops.tools[...].kind``), the table."""
    for name, index in _STEP.findall(path.split("[...]", 1)[0]):
        data = data[name] if name else data[int(index)]
    return data


_GOT = lazy_compile(r"got `(\w+)`")
_UNKNOWN_FIELD = lazy_compile(r"unknown field `([^`]*)`")
_JSON_TYPES = {str: "str", int: "int", float: "float", bool: "bool", list: "array", dict: "object", type(None): "null"}


def _at(data: Any, path: str, rule: str) -> tuple[str, Any]:
    """The dotted key and the value a msgspec error path names. Through a
    table's keys (``.loops.tools[...].deny_at``) msgspec does not say which
    key: it is the first whose value there has the type the rule says it
    got (``loops.tools."search_*".deny_at``), or for an unknown field, the
    first that holds it (``loops.tools."search_*".identity_arg``)."""
    head, through, rest = path.partition("[...]")
    if through:
        table, got, unknown = _lookup(data, head), _GOT.search(rule), _UNKNOWN_FIELD.search(rule)
        for name, entry in table.items() if isinstance(table, dict) else ():  # pragma: no branch - one matches
            try:
                value = _lookup(entry, rest)
            except (KeyError, IndexError, TypeError):
                continue
            if unknown is not None:
                if isinstance(value, dict) and unknown[1] in value:
                    return f'{head.lstrip(".")}."{name}"{rest}.{unknown[1]}', value[unknown[1]]
            elif got is None or _JSON_TYPES.get(type(value)) == got[1]:  # pragma: no branch
                return f'{head.lstrip(".")}."{name}"{rest}', value
    return path.lstrip("."), _lookup(data, path)


def _check_text(key: str, value: Any) -> None:
    """Raise ``ConfigError`` for a string in ``value`` (keys included) that
    is no valid Unicode text: a lone surrogate, which YAML's ``\\ud800``
    escape makes and nothing downstream (a file name, a command, a log
    line) can carry."""
    if isinstance(value, str):
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise ConfigError(key, value, "must be valid Unicode text (it holds a lone surrogate)") from None
    elif isinstance(value, Mapping):
        for name, item in value.items():
            _check_text(key, name)
            _check_text(f"{key}.{name}", item)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check_text(f"{key}[{index}]", item)


def _unknown_key(section: type[Section], key: str) -> str:
    fields = section.__struct_fields__
    snake = _CAMEL_HUMP.sub("_", key).lower()
    hint = f"did you mean {snake}?" if snake in fields else f"known: {', '.join(fields)}"
    return f"unknown key ({hint})"


def parse_config(data: Mapping[str, Any], *, origin: str = "config") -> Config:
    """Build a ``Config`` from a parsed mapping (the contents of a file).

    A section present is enabled unless it says ``enabled = false``; an
    absent section keeps its default. A section no built-in policy has must
    name an installed one, whose class is built with its keys.
    """
    if not isinstance(data, Mapping):
        raise ConfigError(origin, data, "must be a table of policy sections")
    builtin = {policy.name: policy.section for policy in BUILTIN}
    found = None
    prepared: dict[str, Any] = {}
    plugins: dict[str, dict[str, Any]] = {}
    for name, section in data.items():
        kind = builtin.get(name)
        if kind is None:
            found = installed_plugins() if found is None else found
            if name not in found:
                known = ", ".join([*builtin, *found])
                shown_name = name if isinstance(name, str) and name.isidentifier() else repr(name)
                raise ConfigError(shown_name, section, f"unknown section (known: {known})")
        if not isinstance(section, Mapping):
            raise ConfigError(name, section, "must be a table of settings")
        for key, value in section.items():
            if not isinstance(key, str):
                raise ConfigError(f"{name}.{key!r}", value, "keys must be strings")
            _check_text(f"{name}.{key}", value)
            if kind is not None and key not in kind.__struct_fields__:
                raise ConfigError(f"{name}.{key}", value, _unknown_key(kind, key))
        if kind is None:
            plugins[name] = {"enabled": True, **section}
            build_plugin(name, plugins[name], found)
        else:
            prepared[name] = {"enabled": True, **section}
    try:
        config = msgspec.convert(prepared, Config)
    except msgspec.ValidationError as exc:
        if isinstance(exc.__cause__, ConfigError):
            raise exc.__cause__ from None
        match = _AT.match(str(exc))
        assert match is not None
        # Keys are known by now, so the path names fields and indexes only.
        rule, path = match["rule"].rstrip("."), match["path"] or ""
        if match["key"]:
            rule = f"a key: {rule}"
        key, value = _at(prepared, path, rule)
        raise ConfigError(key, value, rule) from None
    # Built and checked above; a struct's __post_init__ would build them again.
    return msgspec.structs.replace(config, plugins=plugins) if plugins else config


def every_policy() -> Config:
    """Every policy the guard knows switched on, each with its defaults: the
    built-in ones and every installed plugin (built with no keys)."""
    sections = {policy.name: policy.section() for policy in BUILTIN}
    plugins = {name: {"enabled": True} for name in installed_plugins()}
    return msgspec.structs.replace(Config(), **sections, plugins=plugins)


TURNS_THRESHOLD_ENV = "REPEAT_TOOL_GUARD_TURNS_THRESHOLD"
"""Overrides ``turns.threshold`` (file or Python value) for live guards."""

SHADOW_ENV = "REPEAT_TOOL_GUARD_SHADOW"
"""Set to ``1`` (``true``, ``yes``, ``on``), puts every policy of a live
guard in shadow mode (``shadowed``): what ``--shadow`` does for adapters."""

_SWITCH = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}

_DIGITS = lazy_compile(r"\s*[0-9]+\s*")


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
    """``config`` with every section in ``mode = "shadow"``, the installed
    policies' included: what ``--shadow`` runs (each policy computes and
    records its actions, none is delivered)."""
    changes: dict[str, Any] = {
        policy.name: msgspec.structs.replace(getattr(config, policy.name), mode="shadow") for policy in BUILTIN
    }
    if config.plugins:
        changes["plugins"] = {name: {**settings, "mode": "shadow"} for name, settings in config.plugins.items()}
    return msgspec.structs.replace(config, **changes)


def _toml_value(value: Any) -> str:
    if value is None:
        raise ValueError("TOML has no null")  # pragma: no cover - callers leave None out
    if isinstance(value, dict):
        import json

        return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        import json  # here: only printing a config as TOML needs it

        # JSON's escapes are TOML's, but TOML also wants DEL escaped
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    items = [_toml_value(v) for v in value]
    if sum(len(i) + 2 for i in items) <= 80:
        return f"[{', '.join(items)}]"
    return "[\n" + "".join(f"    {i},\n" for i in items) + "]"


def to_toml(config: Config) -> str:
    """``config`` as a TOML file that ``load_config`` reads back to an equal
    ``Config``: every section, every key (how to start a file from a preset).
    A table of settings tables (``[loops.tools."<glob>"]``) is written as
    tables after its section's keys, and left out while it is empty as by
    default, so a user can append one."""
    lines: list[str] = []
    for name, section in config.sections().items():
        lines.append(f"[{name}]")
        values = section if isinstance(section, dict) else msgspec.structs.asdict(section)
        tables: list[str] = []
        for key, value in values.items():
            if (
                isinstance(section, msgspec.Struct)
                and isinstance(value, dict)
                and value == default_of(section, key) == {}
            ):
                continue
            if isinstance(value, dict) and value and all(isinstance(v, msgspec.Struct) for v in value.values()):
                for entry, settings in value.items():
                    tables.append(f"\n[{name}.{key}.{_toml_value(entry)}]")
                    tables.extend(_struct_keys(settings))
            else:
                lines.append(f"{key} = {_toml_value(value)}")
        lines.extend(tables)
        lines.append("")
    return "\n".join(lines)


def _struct_keys(value: msgspec.Struct) -> list[str]:
    """``key = value`` lines of a settings table's fields that are set and
    differ from their defaults."""
    fields = [(k, getattr(value, k)) for k in value.__struct_fields__]
    return [f"{k} = {_toml_value(v)}" for k, v in fields if v is not None and v != default_of(value, k)]


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
    if "\x00" in str(file):
        raise ConfigError("config file", str(file), "is no file name (it holds a null byte)")
    try:
        with read_regular(file, what="config file") as stream:
            raw = stream.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        presets = ", ".join(PRESETS)
        raise ConfigError("config file", str(file), f"no such file (and no preset: {presets})") from None
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
    base = file.resolve().parent
    moved = {policy.name: getattr(config, policy.name).relative_to(base) for policy in BUILTIN}
    changes = {name: section for name, section in moved.items() if section is not getattr(config, name)}
    return msgspec.structs.replace(config, **changes) if changes else config


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
