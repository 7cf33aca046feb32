"""What a call acts on: the file, URL or shell program named in its arguments.

``loops`` counts some things per target rather than per exact call: the same
program or file returning the same answer under ever new arguments (a grind),
and the same content written to the same file again (no progress). A target
is read from the arguments a runtime's tools name it with, never guessed from
free text: a shell ``command``'s program (of its last step), a redirection or
``tee`` target, or a ``path``-like or ``url``-like argument.
"""

from __future__ import annotations

import re
from typing import Any

from guard._regex import lazy_compile
from guard.patterns import shell_command

__all__ = ["PATH_ARGS", "call_target", "shell_program", "write_target"]

PATH_ARGS: tuple[str, ...] = (
    "file_path",
    "path",
    "filepath",
    "filename",
    "file",
    "target_file",
    "notebook_path",
    "absolute_path",
    "url",
    "uri",
)
"""Argument names that name the file or URL a tool acts on, first found wins."""

_SHELL_SEGMENTS = lazy_compile(r"&&|\|\||[;\n]")
# a quoted word (an unclosed quote is left alone: what follows it is read as it was written)
_QUOTED = lazy_compile(r'\'[^\']*\'|"(?:[^"\\]|\\.)*"')
_SEPARATOR_CHARS = lazy_compile(r"[;&|\n]")
# a heredoc's operator and delimiter word (<<EOF, <<-'EOF', << "PY")
_HEREDOC = lazy_compile(r"""<<-?[ \t]*(['"]?)([A-Za-z_][\w.-]*)\1""")
_SETUP = frozenset({"cd", "export", "source", ".", "set", "pushd", "popd", "ulimit", "umask"})
_PREFIXES = frozenset({"sudo", "time", "timeout", "nohup", "env", "exec", "command"})
# SWE-agent's multi-line commands (`edit 12:14`, the new text, then `end_of_edit`): the lines
# after the first are the command's text, as a heredoc's body is; the command names its end
_BLOCK = lazy_compile(r"\s*([a-z_]+)[ \t][^\n<]*\n(?:.*\n)?[ \t]*end_of_\1[ \t]*\n?\s*\Z", re.DOTALL)
# The file a command writes: `> f`, `>> f`, `tee [-a] f` (not 2>&1, not /dev/null).
_WRITES = lazy_compile(r"(?:(?<![0-9&>])>>?|\btee\s+(?:-a\s+)?)\s*(['\"]?)([^\s;&|<>'\"]+)\1")


def shell_program(command: str) -> str | None:
    """The program of a shell command's last step (``make`` in ``rm -rf
    build && cd app && make``; a pipeline's first program), leading
    ``sudo``/``timeout``/``VAR=value`` words skipped; a one-word command is
    itself. A quoted argument (``python -c "a; b"``), a heredoc's body and
    the text of SWE-agent's ``edit`` (up to its ``end_of_edit`` line) are
    data: no step starts inside them."""
    if not any(c.isspace() for c in command.strip()):
        return command.strip() or None
    if "end_of_" in command and (block := _BLOCK.match(command)) is not None:
        return block.group(1)
    if "<<" in command:
        command = _without_heredocs(command)
    if ("'" in command or '"' in command) and _SHELL_SEGMENTS.search(command):
        command = _QUOTED.sub(_blank_separators, command)
    program = None
    for segment in _SHELL_SEGMENTS.split(command):
        words = segment.strip().lstrip("({ ").split()
        while words and (words[0] in _PREFIXES or "=" in words[0] or words[0][:1] in "-0123456789"):
            words = words[1:]
        if words and words[0] not in _SETUP:
            program = words[0].rsplit("/", 1)[-1]
    return program


def _blank_separators(quoted: re.Match[str]) -> str:
    return _SEPARATOR_CHARS.sub(" ", quoted.group())


def _without_heredocs(command: str) -> str:
    """``command`` with each heredoc's body and closing delimiter line taken
    out; a body that never closes runs to the end, as the shell reads it."""
    out: list[str] = []
    start = 0
    while (found := _HEREDOC.search(command, start)) is not None:
        body = command.find("\n", found.end())
        if body < 0:
            break
        out.append(command[start:body])
        delimiter = found.group(2)
        end = body
        for line in command[body + 1 :].split("\n"):
            end += len(line) + 1
            if line.strip() == delimiter:
                break
        else:
            return "".join(out)
        start = end
    out.append(command[start:])
    return "".join(out)


def _naming(args: Any) -> tuple[str, str] | None:
    """The first ``PATH_ARGS`` argument naming something, and its value."""
    if not isinstance(args, dict):
        return None
    for key in PATH_ARGS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return key, value.strip()
    return None


def call_target(
    args: Any, command: str | None, program: str | None = None, *, tool: str = ""
) -> tuple[str | None, bool]:
    """What a call acts on, and whether it reads a file (both from one
    reading of its arguments; ``command`` is its ``shell_command``, which
    the caller has read).

    The target is the program of its shell command (``program`` when the
    caller has read it already), else the file or URL its arguments name (a
    URL without its query, so the same endpoint asked other questions is one
    target); ``None`` without one. It reads a file when it is a tool's call
    on a file it names (a ``path`` or ``file_path`` argument, not a URL, and
    no shell command beyond a one-word sub-command such as ``view``), or
    when a ``tool`` whose name says it reads files (the MCP filesystem
    server's ``read_multiple_files``) reads the files a ``paths`` list names, with
    nothing to search them for: what it returns is those files' content
    (a test runner or a linter given ``paths`` answers with its own report)."""
    found = _naming(args)
    if found is None:
        if command is not None and command.strip():
            return (program if program is not None else shell_program(command)), False
        files = _listed(args)
        return (files, True) if files is not None and _reads_files(tool) else (None, False)
    named = found[1]
    if "://" in named:
        return named.split("?", 1)[0].split("#", 1)[0], False
    return named, command is None or not any(c.isspace() for c in command.strip())


_NAME_WORDS = lazy_compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")  # snake_case, kebab-case and camelCase words
_READING = frozenset({"read", "view", "get", "cat", "open", "load", "show"})
_FILES = frozenset({"file", "files", "content", "contents"})


def _reads_files(tool: str) -> bool:
    """Whether ``tool``'s name says it reads files (``read_multiple_files``,
    ``view_files``, ``get_file_contents``): a verb of reading and a word
    for files among its words."""
    words = {word.lower() for word in _NAME_WORDS.findall(tool)}
    return not _READING.isdisjoint(words) and not _FILES.isdisjoint(words)


def _listed(args: Any) -> str | None:
    """The files a ``paths`` list of file names names, joined by ", ", when
    the call names nothing to look for in them (a ``pattern`` or a
    ``query``); ``None`` otherwise."""
    if not isinstance(args, dict) or "pattern" in args or "query" in args:
        return None
    paths = args.get("paths")
    if not isinstance(paths, list) or not paths:
        return None
    if not all(isinstance(path, str) and path.strip() and "://" not in path for path in paths):
        return None
    return ", ".join(path.strip() for path in paths)


# Writes whose content is the command's own text: a heredoc into cat or tee, or one echo/printf.
_LITERAL_HEREDOC = lazy_compile(r"^\s*(?:cd\s+[^;&|]+&&\s*)?(?:cat|tee)\b[^|;&]*<<")
_LITERAL_ECHO = lazy_compile(r"^\s*(?:cd\s+[^;&|]+&&\s*)?(?:echo|printf)\s[^|;&`$\n]*>>?\s*[^\s;&|<>]+\s*$")


# the files a Codex patch (apply_patch) names, one header line each
_PATCHED = lazy_compile(r"(?m)^\*\*\* (?:Update|Add|Delete) File: ([^\n]+?)[ \t]*$")
_PATCH_KEYS = ("input", "patch")


def _patched(text: str) -> str | None:
    """The files a Codex patch text changes (``*** Update File: a.py``),
    joined by ", "; ``None`` when it names none."""
    if "*** Begin Patch" not in text:
        return None
    files = _PATCHED.findall(text)
    return ", ".join(files) if files else None


def write_target(args: Any, *, by_tool: bool) -> str | None:
    """The file a writing call writes, when the call alone says what it
    writes: for an editing tool's call (``by_tool``) the file its arguments
    name (a page given as a ``url`` is none: one opened again, or a request
    sent to it again, answers anew, where the same content written to a
    file once more changes nothing), or the files of a Codex patch (``apply_patch``, its text the
    call's ``input`` or the whole of its arguments); for a shell command, a
    patch given to ``apply_patch``, a heredoc into ``cat``/``tee`` or a
    single ``echo``/``printf``, the file it redirects or ``tee``s to.
    ``None`` otherwise (``git diff > patch.txt`` writes what ``git diff``
    says, which the command's text does not fix)."""
    if by_tool:
        if isinstance(args, str):
            return _patched(args)
        found = _naming(args)
        if found is None and isinstance(args, dict):
            texts = (args.get(key) for key in _PATCH_KEYS)
            return next((files for text in texts if isinstance(text, str) and (files := _patched(text))), None)
        if found is None or (found[0] == "url" and "://" in found[1] and not found[1].startswith("file://")):
            return None
        return found[1]
    command = shell_command(args)
    if command is None:
        return None
    if "apply_patch" in command or "applypatch" in command:
        return _patched(command)
    first = command.split("\n", 1)[0]
    if "<<" in first:  # a heredoc: its body is data, the target is on the first line
        if not _LITERAL_HEREDOC.match(first):
            return None
        command = first
    elif not _LITERAL_ECHO.match(command):
        return None  # what it writes is some program's output, not the command's own text
    targets = [name for _, name in _WRITES.findall(command) if name != "/dev/null"]
    return targets[-1] if targets else None
