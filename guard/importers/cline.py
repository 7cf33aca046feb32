"""Cline and Roo Code task histories (``tasks/<task id>/api_conversation_history.json``),
and Cline 4's session files (``sessions/<id>/<id>.messages.json``).

The file is the conversation exactly as the model saw it: a JSON list of
Anthropic-style ``{role, content, ts?}`` messages. An assistant message is
one model response. Its calls are ``tool_use`` blocks (native tool calling)
or, in older versions, the first XML tool block in its text
(``<read_file><path>a.py</path></read_file>``). The next user message
answers them: with ``tool_result`` blocks by id, or with one text block per
call opening ``[<tool> for '<what>'] Result:``, in call order. The result
of a call that asked the user (``ask_followup_question``,
``plan_mode_respond``) holds what the user typed in reply, which is a user
message too. The other files of the task folder (``ui_messages.json``,
``task_metadata.json``) are the extension's own records and are left to
this one.

Cline 4 (its CLI and the extension built on its SDK) writes a session as
one document, ``{version, sessionId, agent, messages}``, whose messages are
the same Anthropic-style blocks; a user message's text blocks are what the
user typed, as they are or in ``<user_input>`` tags (no ``<task>`` tags),
beside the files attached to it (``file`` blocks). Its ``<id>.json``
manifest, ``<id>.compaction.json`` and ``hooks.jsonl`` are its own records. See ``docs/importers/cline.md``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bus import AnyEvent, ToolResult
from guard._tags import tagged
from guard.importers._session import Builder, ImportedSession, nested, parse_time, text_of
from guard.importers._source import Format, Sample

__all__ = ["FORMAT", "belongs_to_session"]

NAME = "cline"
MAIN = "main"

HISTORY = "api_conversation_history.json"
_PANEL = "ui_messages.json"
"""What Cline's panel shows of a task, kept beside its conversation."""
_COMPANIONS = frozenset({_PANEL, "task_metadata.json", "context_history.json", "metadata.json"})
SESSION_SUFFIX = ".messages.json"
"""How a Cline 4 session file's name ends (``<session id>.messages.json``)."""
_COMPACTED_SUFFIX = ".compaction.json"
"""How the name of a Cline 4 session's compacted context ends (the context Cline sends the model)."""
_HOOKS_LOG = "hooks.jsonl"
_COMPACTED_KEYS = frozenset({"source_message_count", "source_prefix_hash", "source_last_message_key"})
# the tags Cline 4 may wrap what the user typed in, with their attributes (<user_input mode="act">...)
_USER_INPUT = re.compile(r"<(user_input|user_command)(?:\s[^>]*)?>(.*?)</\1>", re.DOTALL)
_MARKERS = ("<task>", "<environment_details>")
_XML_TOOLS = frozenset(
    {
        "execute_command",
        "read_file",
        "write_to_file",
        "replace_in_file",
        "apply_diff",
        "insert_content",
        "search_and_replace",
        "search_files",
        "list_files",
        "list_code_definition_names",
        "codebase_search",
        "browser_action",
        "use_mcp_tool",
        "access_mcp_resource",
        "ask_followup_question",
        "attempt_completion",
        "plan_mode_respond",
        "new_task",
        "switch_mode",
        "update_todo_list",
        "fetch_instructions",
        "load_mcp_documentation",
        "web_fetch",
        "condense",
        "new_rule",
        "report_bug",
    }
)
_RESULT_HEADER = re.compile(r"^\[([^\]\s]+)(?: for .*?)?\] Result:", re.DOTALL)
_EXIT = re.compile(r"(?:Command failed with exit code|Exit code:) (-?\d+)")
_FAILED = ("The tool execution failed with the following error:", "<error>")
_DENIED = "The user denied this operation"
_PROMPT_TAGS = frozenset({"task", "feedback", "answer", "user_message"})
_REPLIES = {"ask_followup_question": "answer", "plan_mode_respond": "user_message"}
"""The tools that ask the user, and the tag their result holds the reply in."""


def _is_history(doc: Any) -> bool:
    messages = [m for m in doc[:20] if isinstance(m, dict)] if isinstance(doc, list) else []
    return bool(messages) and all(m.get("role") in ("user", "assistant") and "content" in m for m in messages)


def _is_session_file(doc: Any) -> bool:
    """Whether ``doc`` is a Cline 4 session file: a document with a
    ``version`` and a ``messages`` list of ``{role, content}`` messages
    whose content is a list of blocks or a text."""
    if not isinstance(doc, dict) or "version" not in doc or not isinstance(doc.get("messages"), list):
        return False
    messages = [m for m in doc["messages"][:20] if isinstance(m, dict)]
    return all(m.get("role") in ("user", "assistant") and isinstance(m.get("content"), list | str) for m in messages)


def _sniff(sample: Sample) -> str | None:
    doc = sample.document
    if _is_history(doc) and (sample.path.name == HISTORY or any(m in text_of(_first(doc)) for m in _MARKERS)):
        return None
    compacted = sample.path.name.endswith(_COMPACTED_SUFFIX) or (
        isinstance(doc, dict) and not _COMPACTED_KEYS.isdisjoint(doc)
    )
    if compacted:
        return f"a Cline session's compacted context, not the conversation: import its {SESSION_SUFFIX} beside it"
    if _is_session_file(doc):
        return None
    if sample.path.name == _PANEL:
        return f"{_PANEL} is Cline's record of its panel, not the conversation: import {HISTORY} beside it"
    return (
        f"not a task history ({HISTORY}: a list of {{role, content}} messages opening with a <task>)"
        f" nor a session file (<id>{SESSION_SUFFIX}: {{version, sessionId, messages}})"
    )


def _first(history: list[Any]) -> Any:
    return next(m for m in history if isinstance(m, dict))["content"]


def belongs_to_session(path: Path) -> bool:
    """Whether ``path`` is one of a task folder's other records, imported
    with its ``api_conversation_history.json``, or one of a Cline 4
    session folder's, beside its ``<id>.messages.json``."""
    if path.name in _COMPANIONS:
        return (path.parent / HISTORY).is_file()
    if path.name.endswith(SESSION_SUFFIX):
        return False
    if path.suffix == ".json" and (path.parent / f"{path.stem}{SESSION_SUFFIX}").is_file():
        return True  # the session's manifest, <id>.json
    companion = path.name.endswith(_COMPACTED_SUFFIX) or path.name == _HOOKS_LOG
    return companion and any(path.parent.glob(f"*{SESSION_SUFFIX}"))


def _sessions(sample: Sample) -> Iterator[ImportedSession]:
    path = sample.path
    doc = sample.document
    if isinstance(doc, dict):  # a Cline 4 session file; its id opens with its start in milliseconds
        session = text_of(doc.get("sessionId")) or path.name.removesuffix(SESSION_SUFFIX)
        history: list[Any] = doc["messages"]
        began = session.partition("_")[0]
        typed = True
    else:
        session = path.parent.name if path.name == HISTORY else path.stem
        history = doc
        began = session
        typed = False
    start = _millis(began) if began.isdecimal() else None
    yield ImportedSession(
        format=NAME,
        session=session,
        path=path,
        label=str(path),
        produce=lambda b: _events(history, b, start or 0.0, typed=typed),
    )


def _millis(value: Any) -> float | None:
    seconds = parse_time(int(value) if isinstance(value, str) else value)
    return None if seconds is None else seconds / 1000


def _xml_call(text: str) -> tuple[str, dict[str, str]] | None:
    """The first XML tool block of an assistant's text: its tool and params."""
    call = next(tagged(text, _XML_TOOLS), None)
    if call is None:
        return None
    return call[0], {name: value.strip() for name, value in tagged(call[1])}


def _prompt(body: str) -> str:
    """A prompt tag's text without the newline after the opening tag and
    the one before the closing tag."""
    return body.removeprefix("\n").removesuffix("\n")


def _outcome(text: str) -> tuple[bool, str | None]:
    """Whether a result reports a failure, and who refused the call."""
    if text.startswith(_DENIED):
        return True, "user"
    code = _EXIT.search(text[:400])
    failed = text.startswith(_FAILED) or (code is not None and int(code.group(1)) != 0)
    return failed, None


def _reply(result: AnyEvent) -> str | None:
    """What the user typed in reply to a call that asked them (``_REPLIES``):
    the first span of its tag in the call's result. Only the first: the
    files the user attached follow it (``<file_content>``) and may hold any
    tag; and any other result (a file read) is no text of the user's."""
    if not isinstance(result, ToolResult) or result.tool not in _REPLIES:
        return None
    return next((_prompt(body) for _, body in tagged(result.content, (_REPLIES[result.tool],))), None)


def _answers(blocks: list[Any]) -> list[str]:
    """The results a user message's text gives, in order: each text block
    opening with a ``[tool …] Result:`` header, without the header."""
    texts = [b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str)]
    return [t[m.end() :].lstrip("\n") for t in texts if (m := _RESULT_HEADER.match(t)) is not None]


def _said(text: str, *, typed: bool) -> list[str]:
    """What the user said in a text block of a user message: what its
    prompt tags hold (the legacy history wraps the user's words in them,
    beside the extension's own context), or, in a session file, the text
    as it is, unless it is only the extension's context."""
    if _RESULT_HEADER.match(text):
        return []
    wrapped = _USER_INPUT.fullmatch(text.strip()) if typed else None  # the whole text in one tag: unwrapped
    bodies = [_prompt(wrapped.group(2))] if wrapped is not None else []
    bodies = bodies or [_prompt(body) for _, body in tagged(text, _PROMPT_TAGS)]
    if bodies or not typed or text.lstrip().startswith("<environment_details>"):
        return bodies
    return [text]


def _events(history: list[Any], b: Builder, start: float, *, typed: bool = False) -> Iterator[AnyEvent]:
    ts = start
    step = 0
    waiting: list[str] = []  # calls of the last response that no tool_result block answered yet
    for number, message in enumerate(history):
        if not isinstance(message, dict):  # a pair of objects, which only OpenHands histories hold
            b.report.skip("not-an-object")
            continue
        ts = _millis(message.get("ts")) or ts
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": text_of(content)}]
        if message.get("role") == "assistant":
            step += 1
            b.model(nested(message, "modelInfo", "modelId") or nested(message, "modelInfo", "id"))
            waiting = []
            uses = [x for x in blocks if isinstance(x, dict) and x.get("type") == "tool_use"]
            for use in uses:
                call_id = str(use.get("id") or f"call-{number}-{len(waiting)}")
                waiting.append(call_id)
                yield from b.call(MAIN, call_id, step, use.get("name"), use.get("input"), ts)
            if not uses:
                found = _xml_call("\n".join(str(x.get("text") or "") for x in blocks if isinstance(x, dict)))
                if found is not None:
                    waiting.append(f"xml-{number}")
                    yield from b.call(MAIN, waiting[0], step, found[0], found[1], ts)
            continue
        results: list[AnyEvent] = []
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                call_id = str(block.get("tool_use_id"))
                text = text_of(block.get("content"))
                failed, denied = _outcome(text)
                if call_id in waiting:
                    waiting.remove(call_id)
                results += b.result(
                    MAIN, call_id, text, ts, is_error=failed or block.get("is_error") is True, denied_by=denied
                )
        for call_id, text in zip(list(waiting), _answers(blocks), strict=False):
            waiting.remove(call_id)
            failed, denied = _outcome(text)
            results += b.result(MAIN, call_id, text, ts, is_error=failed, denied_by=denied)
        yield from results
        texts = [str(x.get("text") or "") for x in blocks if isinstance(x, dict) and x.get("type") == "text"]
        replies = [reply for result in results if (reply := _reply(result)) is not None]
        prompt = "\n".join(replies + [said for text in texts for said in _said(text, typed=typed)])
        if prompt.strip():
            yield from b.user(MAIN, prompt, ts)


FORMAT = Format(NAME, _sniff, _sessions)
