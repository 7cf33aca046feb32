"""Merging the guard's hooks into an agent CLI's settings file and taking them out again.

A hook handler is the guard's when its command runs the guard's hook or
holds the failure fallback every command ``hook-settings`` prints has
(``claude_hooks.is_guard_command``), when it posts to ``/hooks/<cli>`` (an
HTTP hook), or calls the guard's MCP server (an ``mcp_tool`` hook).
Everything else in the file (other hooks, other settings, their order, its
text and numbers as written) is left as it is.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bus import NotRegularFileError, read_regular
from guard.adapters.claude_hooks import is_guard_command
from guard.hook_forward import HOOK_AGENTS

__all__ = [
    "SettingsFileError",
    "add_toml_table",
    "install",
    "installed_elsewhere",
    "remove_toml_table",
    "settings_file",
]

_ROUTES = tuple(f"/hooks/{name}" for name in HOOK_AGENTS)
_FAILED_TEXT = b"repeat-tool-guard hook failed"  # in every command hook-settings prints, quotes aside


class SettingsFileError(ValueError):
    """The settings file is not one the guard can merge into; the message says why."""


def settings_file(agent: str, scope: str) -> Path:
    """Where ``agent`` reads hooks: for the user (``scope`` ``user``) or the
    project in the current directory (``project``). The user's file is
    where the CLI itself looks: under ``$CLAUDE_CONFIG_DIR`` (Claude Code),
    ``$CODEX_HOME`` (Codex) or ``$GEMINI_CLI_HOME/.gemini`` (Gemini CLI)
    when that is set, else in the home directory. ``SettingsFileError``
    when the variable the file is found by is set to no absolute path: the
    file would be one under the filesystem's root or the working
    directory, which the CLI never reads."""
    if scope == "project":
        base = Path.cwd()
        return {"claude-code": base / ".claude" / "settings.json", "codex": base / ".codex" / "hooks.json"}.get(
            agent, base / ".gemini" / "settings.json"
        )
    if agent == "codex":
        return _configured("CODEX_HOME", ".codex") / "hooks.json"
    if agent == "claude-code":
        return _configured("CLAUDE_CONFIG_DIR", ".claude") / "settings.json"
    gemini_home = os.environ.get("GEMINI_CLI_HOME")
    home = _absolute("GEMINI_CLI_HOME", gemini_home) if gemini_home else _home()
    return home / ".gemini" / "settings.json"


def _configured(name: str, folder: str) -> Path:
    """The CLI's own folder: ``$name`` when it is set (empty is unset, as
    the CLIs read it), else ``folder`` in the home directory."""
    value = os.environ.get(name)
    return _absolute(name, value) if value else _home() / folder


def _home() -> Path:
    """The user's home: ``$HOME`` when it is set (an absolute path, or
    ``SettingsFileError``), else the password database's."""
    home = os.environ.get("HOME")
    return Path.home() if home is None else _absolute("HOME", home)


def _absolute(name: str, value: str) -> Path:
    if not os.path.isabs(value):
        raise SettingsFileError(
            f"{name} = {value!r} is no absolute path to find the CLI's settings under: "
            "set it to one, or name the file with --file"
        )
    return Path(value)


def install(path: Path, settings: dict[str, Any], *, uninstall: bool = False) -> str:
    """Put ``settings``' hooks into the file at ``path`` (or, with
    ``uninstall``, take every hook of the guard's out), replacing any of the
    guard's hooks already there. The file is rewritten only when that
    changes it, after a copy to ``<path>.bak-<time>`` (``-N`` added when
    that name is taken); a symbolic link stays a link and its target is
    rewritten. Returns what happened, in a few words.

    An uninstall that finds none of the guard's hooks leaves the file as
    it is and says so. A rewritten file keeps the text as written (UTF-8,
    not ``\\uXXXX`` escapes) and each number as its literal (``1e1``,
    ``1.50``), only laid out anew (two-space indents).

    ``SettingsFileError`` for a file it cannot merge into: not a regular
    file (a directory, a FIFO, a device), not readable, or not a JSON
    object (``NaN`` and numbers too large for a float included: the CLIs'
    own parsers refuse them)."""
    target = Path(os.path.realpath(path))
    raw = _read(target)
    try:
        current = _parse(path, raw) if raw is not None else {}
        merged, removed = _without_guard(current)
        if uninstall and not removed:
            return "no guard hooks found: left as it is"
        if not uninstall:
            hooks = merged.setdefault("hooks", {})
            for event, groups in settings["hooks"].items():
                hooks.setdefault(event, []).extend(groups)
        if merged == current:
            return "unchanged"
        data = (_json(merged) + "\n").encode()
    except RecursionError:
        raise SettingsFileError(f"{str(path)!r} is nested too deeply to be a settings file") from None
    backup = _rewrite(path, target, raw, data)
    done = "guard hooks removed" if uninstall else "guard hooks installed"
    return done + (f" (backup: {backup.name})" if backup is not None else "")


def _rewrite(path: Path, target: Path, raw: bytes | None, data: bytes) -> Path | None:
    """Replace the file ``target`` (``path`` resolved; ``raw`` its bytes,
    ``None`` when there is none yet) with ``data``: a backup first, then a
    whole new file put in its place, so a failure (a full disk) leaves the
    file as it was and no partial copy behind. The new file has
    ``target``'s permissions (0600 for a file that was not there) from
    the moment it is made: settings may hold secrets. Returns the backup."""
    backup = temporary = None
    try:
        mode = target.stat().st_mode & 0o7777 if raw is not None else 0o600
        if raw is not None:
            backup = _backup(target, raw, mode & 0o777)
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = _written(target.with_name(f".{target.name}.{os.getpid()}.tmp"), data, mode)
        os.replace(temporary, target)
    except OSError as exc:
        for left in (temporary, backup):
            if left is not None:
                with contextlib.suppress(OSError):
                    left.unlink()
        raise SettingsFileError(f"{str(path)!r} left as it was: {exc.strerror or exc}") from None
    return backup


_MAX_SETTINGS = 16 * 1024 * 1024


def _read(path: Path, advice: str = "pass a settings file with --file") -> bytes | None:
    """The settings file's bytes, ``None`` when there is none yet."""
    try:
        with read_regular(path, what="settings file") as file:
            raw = file.read(_MAX_SETTINGS + 1)
    except FileNotFoundError:
        return None
    except NotRegularFileError as exc:
        raise SettingsFileError(f"{exc}; {advice}") from None
    except OSError as exc:
        raise SettingsFileError(f"{str(path)!r}: {exc.strerror or exc}") from None
    if len(raw) > _MAX_SETTINGS:
        raise SettingsFileError(f"{str(path)!r} is larger than 16 MiB: not a settings file")
    return raw


def _backup(path: Path, raw: bytes, mode: int) -> Path:
    """A copy of ``raw`` beside ``path`` under a name no file has, made
    with ``mode`` (``path``'s permissions: settings may hold secrets)."""
    stamp = time.strftime("%Y%m%d%H%M%S")
    backup, number = path.with_name(f"{path.name}.bak-{stamp}"), 1
    while True:
        try:
            return _written(backup, raw, mode)
        except FileExistsError:
            number += 1
            backup = path.with_name(f"{path.name}.bak-{stamp}-{number}")


def _written(path: Path, data: bytes, mode: int) -> Path:
    """``path``, made anew with ``mode`` before anything is in it (never
    over a file or through a link already there: ``FileExistsError``),
    holding ``data``. A write that fails (a full disk) takes the file away
    again before the error goes on: no partial copy is left."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode & 0o777)
    try:
        with os.fdopen(fd, "wb") as file:
            os.fchmod(fd, mode)  # exactly: the umask may have narrowed it
            file.write(data)
    except OSError:
        with contextlib.suppress(OSError):
            path.unlink()
        raise
    return path


@dataclass(frozen=True, slots=True)
class _Number:
    """A number in a settings file, kept as the file writes it (``1e1``,
    ``1.50``, ``-0``): written back as that literal, never reformatted."""

    literal: str


def _float(text: str) -> _Number:
    if math.isinf(float(text)):
        raise ValueError(f"the number {text} is too large for a float")
    return _Number(text)


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _parse(path: Path, raw: bytes) -> dict[str, Any]:
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw, parse_float=_float, parse_int=_Number, parse_constant=_constant)
    except json.JSONDecodeError as exc:
        if exc.doc[exc.pos : exc.pos + 2] in ("//", "/*"):
            raise SettingsFileError(
                f"{str(path)!r} has comments ({exc}), which JSON has not (Gemini CLI reads them; Claude Code "
                "ignores a settings file that has them): install would drop them, so it leaves the file as it is; "
                "take them out, or add what hook-settings prints by hand"
            ) from None
        raise SettingsFileError(f"{str(path)!r} is not JSON ({exc}); fix it or pass another --file") from None
    except ValueError as exc:
        raise SettingsFileError(f"{str(path)!r} is not JSON ({exc}); fix it or pass another --file") from None
    if not isinstance(data, dict):
        raise SettingsFileError(f"{str(path)!r} holds a JSON {type(data).__name__}, not an object")
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict) or not all(isinstance(groups, list) for groups in hooks.values()):
        raise SettingsFileError(f'{str(path)!r}: "hooks" must map each event to a list of hook groups')
    return data


def _is_guard(handler: Any) -> bool:
    if not isinstance(handler, dict):
        return False
    command, url = str(handler.get("command", "")), str(handler.get("url", ""))
    if handler.get("type") == "mcp_tool":
        return handler.get("server") == "repeat_tool_guard"
    return is_guard_command(command) or any(url.rstrip("/").endswith(route) for route in _ROUTES)


def _guard_handlers(settings: dict[str, Any]) -> frozenset[str]:
    """The guard's hook handlers in ``settings`` (a settings file's object,
    or what ``hook-settings`` prints), each as canonical JSON."""
    hooks = settings.get("hooks")
    found = set()
    for groups in hooks.values() if isinstance(hooks, dict) else ():
        for group in groups if isinstance(groups, list) else ():
            handlers = group.get("hooks") if isinstance(group, dict) else None
            for handler in handlers if isinstance(handlers, list) else ():
                if _is_guard(handler):
                    found.add(json.dumps(handler, sort_keys=True))
    return frozenset(found)


def installed_elsewhere(path: Path, other: Path, settings: dict[str, Any]) -> bool:
    """Whether ``other``, the settings file of the other scope (the user's
    for a project's ``path``, or the other way round), already runs the
    guard's hooks with other options than ``settings``' (another command
    or server; the events they are registered for aside, which an earlier
    version may have had fewer of): the CLI would run both, and a call
    would be counted twice (Gemini CLI gives a call no id to tell the two
    apart by). A file's comments, which Gemini CLI reads, are left out; a
    file that still cannot be read holds them when it holds the guard's
    failure message, and one that cannot be read at all holds none."""
    if os.path.realpath(path) == os.path.realpath(other):
        return False
    try:
        raw = _read(Path(os.path.realpath(other)))
    except SettingsFileError:
        return False
    if raw is None:
        return False
    try:
        there = _guard_handlers(_parse(other, _without_comments(raw)))
    except (SettingsFileError, RecursionError):
        return _FAILED_TEXT in raw
    return bool(there) and there != _guard_handlers(settings)


def _without_comments(raw: bytes) -> bytes:
    """``raw`` with its ``//`` and ``/* */`` comments (outside strings)
    blanked, as Gemini CLI reads a settings file."""
    return _COMMENTS.sub(_blank, raw)


_COMMENTS = re.compile(rb'"(?:[^"\\\n]|\\.)*"|//[^\n]*|/\*(?:[^*]|\*(?!/))*(?:\*/|\Z)')


def _blank(found: re.Match[bytes]) -> bytes:
    text = found.group()
    return text if text.startswith(b'"') else b" " * len(text)


def _without_guard(settings: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """A copy of ``settings`` with the guard's hook handlers taken out, and
    the groups, events and ``hooks`` table that taking them out leaves
    empty (one the file has empty stays); and whether any was taken out.
    The copy's ``hooks`` and event lists are its own; the rest it shares."""
    result = dict(settings)
    if "hooks" not in settings:
        return result, False
    hooks: dict[str, list[Any]] = {}
    removed = False
    for event, groups in settings["hooks"].items():
        kept_groups = []
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                kept = [h for h in group["hooks"] if not _is_guard(h)]
                if len(kept) < len(group["hooks"]):
                    removed = True
                    if not kept:
                        continue
                    group = {**group, "hooks": kept}
            kept_groups.append(group)
        if kept_groups or not groups:
            hooks[event] = kept_groups
    if hooks or not settings["hooks"]:
        result["hooks"] = hooks
    else:
        del result["hooks"]
    return result, removed


def _json(value: Any, indent: str = "") -> str:
    """``value`` as ``json.dumps(value, indent=2)`` lays it out, with its
    text as it is rather than escaped to ASCII, and each ``_Number`` as its
    literal."""
    if isinstance(value, _Number):
        return value.literal
    if isinstance(value, str):
        return _string(value)
    inner = indent + "  "
    if isinstance(value, dict) and value:
        members = [f"{inner}{_string(key)}: {_json(item, inner)}" for key, item in value.items()]
        return "{\n" + ",\n".join(members) + f"\n{indent}}}"
    if isinstance(value, list) and value:
        return "[\n" + ",\n".join(inner + _json(item, inner) for item in value) + f"\n{indent}]"
    return json.dumps(value, allow_nan=False)


def _string(text: str) -> str:
    """``text`` as a JSON string, every character as it is but those JSON
    must escape, and a lone surrogate (UTF-8 has none) as its ``\\uXXXX``."""
    written = json.dumps(text, ensure_ascii=False)
    try:
        written.encode()
    except UnicodeEncodeError:
        return json.dumps(text)
    return written


_TOML_ADVICE = "it is the config.toml beside the hooks file: make it a file or move it"


def _parse_toml(path: Path, raw: bytes | None) -> tuple[str, dict[str, Any]]:
    """The text of the TOML file at ``path`` (``raw``, ``None`` for none)
    and what it holds; ``SettingsFileError`` for one that is not TOML."""
    import tomllib

    try:
        text = raw.decode("utf-8") if raw is not None else ""
        return text, tomllib.loads(text)
    except UnicodeDecodeError:
        raise SettingsFileError(f"{str(path)!r} is not UTF-8 text: not a TOML file") from None
    except tomllib.TOMLDecodeError as exc:
        raise SettingsFileError(f"{str(path)!r} is not valid TOML ({exc}): left as it is") from None


def check_toml(path: Path) -> None:
    """``SettingsFileError`` unless the TOML file at ``path`` (if there is
    one) can be read and parsed: asked before a change that also touches
    the file beside it, so that neither is changed when this one cannot be."""
    _parse_toml(path, _read(Path(os.path.realpath(path)), _TOML_ADVICE))


def add_toml_table(path: Path, table: str) -> str:
    """Append ``table`` (one TOML table, its header first) to the file at
    ``path`` unless the file defines that table already, however it spells
    it (a quoted name, an inline table, dotted keys); the file is backed up
    first (as ``install`` backs up). Returns what happened;
    ``SettingsFileError`` for a file it cannot add to: one that is not
    TOML, or one the table would make invalid (its parent defined as
    something else)."""
    import tomllib

    header = table.splitlines()[0].strip()
    target = Path(os.path.realpath(path))
    raw = _read(target, _TOML_ADVICE)
    text, current = _parse_toml(path, raw)
    found: Any = current
    for key in _table_keys(tomllib.loads(table)):
        found = found.get(key) if isinstance(found, dict) else None
    if found is not None:
        return f"{header} is there already (left as it is)"
    separator = "" if not text else ("\n" if text.endswith("\n") else "\n\n")
    updated = f"{text}{separator}{table}"
    try:
        tomllib.loads(updated)
    except tomllib.TOMLDecodeError as exc:
        raise SettingsFileError(
            f"{str(path)!r}: adding {header} would make it invalid TOML ({exc}); left as it is"
        ) from None
    _rewrite(path, target, raw, updated.encode("utf-8"))
    return f"{header} added"


def remove_toml_table(path: Path, header: str) -> str:
    """Take the table ``header`` (``[mcp_servers.repeat_tool_guard]``, as
    ``add_toml_table`` writes it) out of the TOML file at ``path``: its
    header line and the lines up to the next table, the file backed up
    first. A file without it, or that spells it otherwise (an inline table,
    dotted keys), is left as it is, and the answer says so."""
    import tomllib

    target = Path(os.path.realpath(path))
    raw = _read(target, _TOML_ADVICE)
    if raw is None:
        return f"no such file: {header} is not there"
    text, expected = _parse_toml(path, raw)
    lines = text.splitlines(keepends=True)
    start = next((n for n, line in enumerate(lines) if line.strip() == header), None)
    if start is None:
        return (
            f"{header} is not there as a table of its own: left as it is"
            if _holds(expected, header)
            else (f"{header} is not there: left as it is")
        )
    end = next((n for n in range(start + 1, len(lines)) if lines[n].lstrip().startswith("[")), len(lines))
    # comments and blank lines after the table's last key belong to what follows (the next table, or
    # the user's notes at the end of the file)
    while end - 1 > start and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")):
        end -= 1
    while end < len(lines) and not lines[end].strip() and (start == 0 or not lines[start - 1].strip()):
        end += 1  # one blank line, not two, where the table was; none at the top
    updated = "".join(lines[:start] + lines[end:])
    if end == len(lines):  # the last table, as install appends it: the blank line before it goes too
        updated = updated.rstrip("\n") + "\n" if updated.strip() else ""
    try:
        left = tomllib.loads(updated)
    except tomllib.TOMLDecodeError:
        left = None  # the header line was inside a string
    *parents, name = header.strip("[]").split(".")
    table: Any = expected
    for key in parents:
        table = table.get(key) if isinstance(table, dict) else None
    if not isinstance(table, dict) or table.pop(name, None) is None or _pruned(left) != _pruned(expected):
        return f"{header} is not there as a table of its own: left as it is"
    _rewrite(path, target, raw, updated.encode("utf-8"))
    return f"{header} removed"


def _holds(data: dict[str, Any], header: str) -> bool:
    """Whether the TOML ``data`` has the table ``header`` names, however spelt."""
    table: Any = data
    for key in header.strip("[]").split("."):
        table = table.get(key) if isinstance(table, dict) else None
    return table is not None


def _pruned(value: Any) -> Any:
    """``value`` without the tables left empty (a parent only a removed table made)."""
    if not isinstance(value, dict):
        return value
    pruned = {key: _pruned(inner) for key, inner in value.items()}
    return {key: inner for key, inner in pruned.items() if inner != {} or not isinstance(value[key], dict)}


def _table_keys(level: dict[str, Any]) -> list[str]:
    """The keys leading to the one table ``level`` (a parsed table) defines."""
    key, inner = next(iter(level.items()))
    if isinstance(inner, dict) and inner and all(isinstance(value, dict) for value in inner.values()):
        return [key, *_table_keys(inner)]
    return [key]
