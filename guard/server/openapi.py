"""The server's OpenAPI 3.1 document, its schemas derived from the wire
Structs (so the document cannot drift from what the server decodes)."""

from __future__ import annotations

from typing import Any

import msgspec

from guard.adapters.claude_hooks import HOOK_EVENTS
from guard.adapters.codex_hooks import CODEX
from guard.adapters.gemini_hooks import GEMINI_CLI
from guard.server.events import EventAnswer, EventIn

__all__ = ["ErrorBody", "openapi_document"]


class ErrorBody(msgspec.Struct, frozen=True):
    """Every 4xx/5xx answer: one line saying what was wrong."""

    error: str


def _error(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
    }


_AUTH_ERRORS = {"401": _error("the bearer token is missing or wrong (only when the server has one)")}
_BODY_ERRORS = {
    "400": _error("the body is not JSON, or the hook payload lacks a usable session_id"),
    "413": _error("the body is larger than the server's limit"),
}


def openapi_document(version: str) -> dict[str, Any]:
    """The document served at ``/openapi.json``."""
    (event_in, answer, _), components = msgspec.json.schema_components(
        (EventIn, EventAnswer, ErrorBody), ref_template="#/components/schemas/{name}"
    )
    session_param = {
        "name": "session",
        "in": "path",
        "required": True,
        "description": "the session's id: 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit",
        "schema": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"},
    }
    hook_payload = {
        "type": "object",
        "description": "A Claude Code hook payload, as Claude Code posts it. Events handled: "
        + ", ".join(HOOK_EVENTS)
        + "; any other event is answered with {}.",
        "required": ["session_id", "hook_event_name"],
        "properties": {"session_id": {"type": "string"}, "hook_event_name": {"type": "string"}},
        "additionalProperties": True,
    }
    hook_answer = {
        "type": "object",
        "description": "Claude Code's hook output: hookSpecificOutput (permissionDecision deny with its "
        "reason, additionalContext), continue: false with stopReason for a halt; {} for nothing to say.",
        "additionalProperties": True,
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "repeat-tool-guard serve",
            "version": version,
            "description": "A resident repeat-tool-guard: per-session guard state in memory, every event "
            "in the session's log, answers over HTTP.",
        },
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{}, {"bearer": []}],
        "paths": {
            "/v1/sessions/{session}/events": {
                "post": {
                    "summary": "Publish one event of a session and get the guard's answer",
                    "operationId": "postEvent",
                    "parameters": [session_param],
                    "requestBody": {"required": True, "content": {"application/json": {"schema": event_in}}},
                    "responses": {
                        "200": {
                            "description": "the guard's answer",
                            "content": {"application/json": {"schema": answer}},
                        },
                        "409": _error("the event contradicts the session (a call already open, an agent not live)"),
                        "422": _error("the body is not an event of the four types, or a field is invalid"),
                        **_BODY_ERRORS,
                        **_AUTH_ERRORS,
                    },
                }
            },
            "/hooks/claude-code": {
                "post": {
                    "summary": "Answer a Claude Code HTTP hook",
                    "operationId": "claudeCodeHook",
                    "requestBody": {"required": True, "content": {"application/json": {"schema": hook_payload}}},
                    "responses": {
                        "200": {
                            "description": "the hook's answer",
                            "content": {"application/json": {"schema": hook_answer}},
                        },
                        **_BODY_ERRORS,
                        **_AUTH_ERRORS,
                    },
                }
            },
            "/hooks/codex": _cli_hook("Codex", "codexHook", sorted(CODEX.seams)),
            "/hooks/gemini-cli": _cli_hook("Gemini CLI", "geminiCliHook", sorted(GEMINI_CLI.seams)),
            "/healthz": {
                "get": {
                    "summary": "Ready to answer",
                    "operationId": "healthz",
                    "security": [{}],
                    "responses": {"200": {"description": 'ready: {"status": "ok", "sessions": <live sessions>}'}},
                }
            },
            "/metrics": {
                "get": {
                    "summary": "Prometheus metrics (text exposition format)",
                    "operationId": "metrics",
                    "responses": {"200": {"description": "metrics", "content": {"text/plain": {}}}, **_AUTH_ERRORS},
                }
            },
            "/openapi.json": {
                "get": {
                    "summary": "This document",
                    "operationId": "openapi",
                    "responses": {"200": {"description": "the OpenAPI document"}, **_AUTH_ERRORS},
                }
            },
        },
    }


def _cli_hook(cli: str, operation: str, events: list[str]) -> dict[str, Any]:
    """The route of a CLI without HTTP hooks: its command hook posts the payload here (curl)."""
    return {
        "post": {
            "summary": f"Answer a {cli} hook (its command hook forwards the payload)",
            "operationId": operation,
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "description": f"A {cli} hook payload. Events handled: {', '.join(events)}; "
                            "any other event is answered with {}.",
                            "required": ["session_id", "hook_event_name"],
                            "additionalProperties": True,
                        }
                    }
                },
            },
            "responses": {
                "200": {"description": f"the hook's answer, in {cli}'s hook output format"},
                **_BODY_ERRORS,
                **_AUTH_ERRORS,
            },
        }
    }
