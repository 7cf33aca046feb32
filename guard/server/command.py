"""``repeat-tool-guard serve``: its arguments. This module imports nothing
but the standard library, so the CLI can offer the command without loading
the server; the server itself loads only when the command runs."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["DEFAULT_PORT", "add_command"]

DEFAULT_PORT = 8787


def _run(args: argparse.Namespace) -> int:
    from guard.server.runner import run

    return run(args)


def add_command(commands: Any) -> None:
    """Add ``serve`` to the CLI's subcommands (``argparse`` subparsers)."""
    serve = commands.add_parser(
        "serve",
        help="run the resident guard: Claude Code HTTP hooks and a JSON API for any runtime",
        description="Serve the guard over HTTP: POST /hooks/claude-code (Claude Code HTTP hooks), "
        "POST /hooks/codex and /hooks/gemini-cli (their curl command hooks), POST /mcp (Codex mcp_tool hooks), "
        "POST /v1/sessions/{session}/events (any runtime), GET /healthz, GET /metrics, GET /openapi.json. "
        "Each session's state lives in memory and every event in <state-dir>/<session>.jsonl. "
        "Loopback only unless --token-file is given. SIGTERM or SIGINT shuts down gracefully.",
    )
    where = serve.add_mutually_exclusive_group()
    where.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    where.add_argument("--uds", metavar="PATH", help="listen on this Unix socket (mode 0600) instead of TCP")
    serve.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"TCP port (default: {DEFAULT_PORT}; 0 picks a free one)"
    )
    serve.add_argument(
        "--config", metavar="FILE", help="a .toml or .yaml config, or 'recommended' (default: remind only)"
    )
    serve.add_argument(
        "--shadow",
        action="store_true",
        help="record every action the guard would take in the session logs, /metrics and logs; deliver none",
    )
    serve.add_argument(
        "--state-dir",
        metavar="DIR",
        help="where session logs live (default: the hook's state directory + /serve, i.e. "
        "$REPEAT_TOOL_GUARD_STATE/serve, else $XDG_STATE_HOME/repeat-tool-guard/serve, "
        "else ~/.local/state/repeat-tool-guard/serve)",
    )
    serve.add_argument(
        "--token-file",
        metavar="FILE",
        help="require 'Authorization: Bearer <the file's content>' on every route but /healthz; "
        "mandatory for a non-loopback --host",
    )
    serve.add_argument(
        "--max-body", type=int, default=8 * 1024 * 1024, metavar="BYTES", help="largest request body (default: 8 MiB)"
    )
    serve.add_argument(
        "--body-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="a request body must arrive within this long after its headers, else 408 (default: 30)",
    )
    serve.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a web origin (scheme://host[:port]) whose pages may call the server; requests with any other "
        "Origin header are refused (default: none); repeatable",
    )
    serve.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a name clients reach the server by (their Host header), besides the bound address and, on "
        "loopback, localhost; requests naming any other host are refused; repeatable",
    )
    serve.add_argument(
        "--idle-timeout",
        type=float,
        default=900.0,
        metavar="SECONDS",
        help="evict a session from memory after this long unused (default: 900); it is restored from its log",
    )
    serve.add_argument(
        "--max-sessions",
        type=int,
        default=10_000,
        metavar="N",
        help="at most this many sessions in memory; the least recently used idle one goes first (default: 10000)",
    )
    serve.add_argument(
        "--max-live-pages",
        type=int,
        default=32,
        metavar="N",
        help="at most this many live pages (GET /live/events streams) open at once; another is refused with 503 "
        "(default: 32)",
    )
    serve.add_argument(
        "--graceful-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="on SIGTERM/SIGINT, how long in-flight requests may take to finish (default: 30)",
    )
    serve.add_argument(
        "--backend", choices=("asyncio", "trio"), default="asyncio", help="anyio backend to run on (default: asyncio)"
    )
    serve.add_argument(
        "--redis",
        metavar="URL",
        help="fleet mode: keep every session in Redis (redis://HOST:PORT/DB) so several replicas share them; "
        "--state-dir is then unused (asyncio only)",
    )
    serve.add_argument(
        "--redis-prefix", default="rtg", metavar="PREFIX", help="the fleet's key prefix in Redis (default: rtg)"
    )
    serve.add_argument(
        "--redis-ttl",
        type=_whole_number,
        default=0,
        metavar="SECONDS",
        help="with --redis: expire a session's keys this long after its last event (default: 0, never)",
    )
    serve.add_argument(
        "--redis-maxlen",
        type=_whole_number,
        default=0,
        metavar="N",
        help="with --redis: trim each session's stream to about N entries (default: 0, keep all)",
    )
    serve.set_defaults(run=_run)


def _whole_number(text: str) -> int:
    """A count or a number of seconds that may be 0 (none)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 or more")
    return value
