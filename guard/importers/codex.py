"""Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

One ``{"timestamp", "type", "payload"}`` object per line. Tool calls are
``response_item`` payloads of type ``function_call``, ``custom_tool_call`` and
``local_shell_call``; their outputs carry the same ``call_id``. A model
response is the run of model items (reasoning, assistant message, calls)
between two inputs (a user message or a tool output), so parallel calls share
a step. See ``docs/importers/codex.md``.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from typing import Any

import msgspec

from bus import AnyEvent
from guard.importers._session import Builder, ImportedSession, parse_args, parse_time, text_of
from guard.importers._source import Format, Sample, read_jsonl

__all__ = ["FORMAT"]

NAME = "codex"
MAIN = "main"

_LINE_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
# tool_search_call: the model searching the tools it may load, run by Codex itself (its output lists them)
_CALLS = frozenset({"function_call", "custom_tool_call", "local_shell_call", "tool_search_call"})
_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output", "tool_search_output"})
_MODEL_ITEMS = frozenset({"reasoning", "web_search_call"}) | _CALLS
_BARE_ITEMS = _MODEL_ITEMS | _OUTPUTS | {"message"}
# What Codex itself puts in the user's role: the environment, AGENTS.md, a skill the user named (its SKILL.md)
_INJECTED = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions", "<turn_aborted>", "<skill>")
_MCP_FAILED = "tool call error:"
_PATCH_FAILED = "apply_patch verification failed:"  # a patch whose hunks do not apply, or do not parse
# A command Codex could not run, or that its sandbox stopped, written as plain text
# (after a "Total output lines: N" header when the output was cut short).
_RUN_FAILED = re.compile(r"(?:Total output lines: \d+\n\n)?(?:failed in sandbox|execution error):")
_REJECTED = ("exec command rejected by user", "patch rejected by user", "rejected by user")
# The header newer versions put before a command's output: "Exit code: N"
# (shell, shell_command) or "Process exited with code N" (exec_command).
_EXIT_LINE = re.compile(r"^(?:Exit code:|Process exited with code) (-?\d+)$", re.MULTILINE)
_HEADER_LINES = 6
# Code mode's exec (and its wait) opens that header with the script's state: "Script completed",
# "Script running with cell ID N", "Script terminated", or this, for a script that threw (its
# error follows the output as "Script error:\n..."), the one Codex reports as no success.
_SCRIPT_FAILED = "Script failed"


def _is_bare(sample: Sample) -> bool:
    """Whether ``sample`` is a rollout of the bare layout (before September
    2025): a first line ``{id, timestamp, instructions, git}`` without a
    ``type``, then response items without the envelope and
    ``{"record_type": "state"}`` markers."""
    if not sample.lines:
        return False
    head, rest = sample.lines[0], sample.lines[1:]
    if "type" in head or not ("id" in head and "timestamp" in head):
        return False
    return any("record_type" in line or line.get("type") in _BARE_ITEMS for line in rest)


def _sniff(sample: Sample) -> str | None:
    for line in sample.lines:
        if line.get("type") in _LINE_TYPES and "payload" in line:
            return None
    if _is_bare(sample):
        return None
    return "no line is a {type, payload} rollout item (nor a bare-layout {id, timestamp} header and items)"


def _sessions(sample: Sample) -> Iterator[ImportedSession]:
    path = sample.path
    session = path.stem
    if _is_bare(sample) and sample.lines[0].get("id"):
        session = str(sample.lines[0]["id"])
    for line in sample.lines:
        payload = line.get("payload")
        if line.get("type") == "session_meta" and isinstance(payload, dict) and payload.get("id"):
            session = str(payload["id"])
            break

    def produce(b: Builder) -> Iterator[AnyEvent]:
        return _events(sample, b)

    yield ImportedSession(format=NAME, session=session, path=path, label=str(path), produce=produce)


def _named(payload: dict[str, Any]) -> Any:
    """A call's tool name as Codex's hooks give it: a tool of a namespace
    (an app's MCP tools, ``mcp__codex_apps__github``; the multi-agent
    tools, ``multi_agent_v1``) is named with its namespace before it
    (``mcp__codex_apps__github_fetch_pr``, ``multi_agent_v1wait_agent``),
    so two servers' tools of one name are two tools, and a session judged
    imported is judged as it was live."""
    name, namespace = payload.get("name"), payload.get("namespace")
    return namespace + name if isinstance(name, str) and isinstance(namespace, str) else name


def _output(raw: Any) -> tuple[str, bool]:
    """A tool output's text and whether it failed. Shell outputs are a JSON
    string ``{"output", "metadata": {"exit_code"}}``, or (newer versions) text
    whose header names the exit code (in code mode, the script's state:
    ``Script failed``); older ones an object ``{"content", "success"}``. An
    MCP tool's result is, in older versions, the JSON text of its content
    items, or ``tool call error: ...`` when it failed. A command the sandbox
    stopped is plain text ``failed in sandbox: ...`` (``execution error:
    ...`` when it could not run), a patch that does not apply ``apply_patch
    verification failed: ...``. Others are plain text."""
    if isinstance(raw, dict):
        return text_of(raw.get("content")), raw.get("success") is False
    text = raw if isinstance(raw, str) else text_of(raw)
    header, found, _ = text.partition("\nOutput:")
    if found and header.count("\n") < _HEADER_LINES:
        match = _EXIT_LINE.search(header)
        script_failed = header.partition("\n")[0] == _SCRIPT_FAILED
        return text, script_failed or (match is not None and match.group(1) != "0")
    if text.startswith((_MCP_FAILED, _PATCH_FAILED)) or _RUN_FAILED.match(text):
        return text, True
    if text.startswith(("{", "[{")):
        try:
            parsed = msgspec.json.decode(text)
        except msgspec.DecodeError:
            return text, False
        if isinstance(parsed, dict) and "output" in parsed:
            metadata = parsed.get("metadata")
            code = metadata.get("exit_code") if isinstance(metadata, dict) else None
            return text_of(parsed["output"]), isinstance(code, int) and code != 0
        if isinstance(parsed, list) and all(isinstance(item, dict) and "type" in item for item in parsed):
            return text_of(parsed), False  # an MCP tool's content items, as older versions wrote them
    return text, False


def _user_text(payload: dict[str, Any]) -> str | None:
    text = text_of(payload.get("content"))
    if not text.strip() or text.lstrip().startswith(_INJECTED):
        return None
    return text


def _lines(sample: Sample, b: Builder) -> Iterator[dict[str, Any]]:
    """The rollout's lines in the envelope layout. A bare-layout rollout's
    items are wrapped as ``response_item``s; its header and state markers
    are dropped, and its items, which carry no time, take the header's."""
    lines = read_jsonl(sample.path, b.report)
    if not _is_bare(sample):
        yield from lines
        return
    for line in lines:
        if "record_type" in line:
            continue
        if "type" not in line:
            yield {"timestamp": line.get("timestamp"), "type": "session_meta", "payload": line}
        else:
            yield {"type": "response_item", "payload": line}


def _events(sample: Sample, b: Builder) -> Iterator[AnyEvent]:
    ts = 0.0
    step = 0
    in_response = False
    last_user: tuple[str, str] | None = None
    unnamed = itertools.count(1)
    for line in _lines(sample, b):
        ts = parse_time(line.get("timestamp")) or ts
        if line.get("type") == "compacted":  # its payload (the summary) is not needed
            yield from b.compacted(MAIN, ts)
            continue
        payload = line.get("payload")
        if not isinstance(payload, dict):
            if line.get("type") in _LINE_TYPES:
                b.report.skip("no-payload")
            continue
        kind = payload.get("type")
        if line.get("type") == "event_msg":
            if kind == "user_message":
                text = str(payload.get("message") or "")
                # Recent versions record each prompt twice, as an event and as
                # a response item, one right after the other.
                if text.strip() and last_user != ("response_item", text):
                    yield from b.user(MAIN, text, ts)
                last_user = ("event_msg", text)
            continue
        if line.get("type") == "turn_context":
            b.model(payload.get("model"))
            continue
        if line.get("type") != "response_item":
            continue
        is_user = kind == "message" and payload.get("role") == "user"
        if not is_user:
            last_user = None
        if kind in _MODEL_ITEMS or (kind == "message" and payload.get("role") == "assistant"):
            if not in_response:
                step += 1
                in_response = True
        else:
            in_response = False
        if kind in _CALLS:
            # A local_shell_call made through the chat completions API has
            # call_id null (its id is not written): each is still a call.
            named = payload.get("call_id")
            call_id = str(named if named is not None else payload.get("id") or f"unnamed-{next(unnamed)}")
            if kind == "function_call":
                tool, args = _named(payload), parse_args(payload.get("arguments"))
            elif kind == "custom_tool_call":
                tool, args = _named(payload), payload.get("input")
            elif kind == "tool_search_call":
                tool, args = "tool_search", payload.get("arguments")
            else:
                tool, args = "local_shell", payload.get("action")
            # Codex writes an item once (a resumed session appends to its rollout, a fork copies
            # into a new file), so a line is a record of its own, named by its time (Builder.call).
            yield from b.call(MAIN, call_id, step, tool, args, ts, record=b.record(line.get("timestamp")))
        elif kind in _OUTPUTS:
            found = payload.get("tools") if kind == "tool_search_output" else None
            # the tools a search found, as JSON: their names are what tells one answer from another
            text, failed = (
                (msgspec.json.encode(found).decode(), False) if found is not None else _output(payload.get("output"))
            )
            denied = "user" if text.strip().lower().startswith(_REJECTED) else None
            yield from b.result(
                MAIN, str(payload.get("call_id")), text, ts, is_error=failed or denied is not None, denied_by=denied
            )
        elif is_user:
            prompt = _user_text(payload)
            if prompt is not None and last_user != ("event_msg", prompt):
                yield from b.user(MAIN, prompt, ts)
            if prompt is not None:
                last_user = ("response_item", prompt)


FORMAT = Format(NAME, _sniff, _sessions)
