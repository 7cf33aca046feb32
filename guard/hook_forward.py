"""The command hook's client for a running ``repeat-tool-guard serve``.

A command hook is a process per hook event; most of its time is the
interpreter and the guard's imports. When a local ``serve`` is running, the
hook posts its stdin to the server's ``/hooks/claude-code`` and prints the
answer instead, so a hook event costs a bare interpreter start and one
loopback round trip. This module imports only ``_socket`` (the C module:
``socket`` would build its enums, which costs more than the round trip) and
nothing of the guard, since it runs before anything else is imported.

``forward`` answers ``None`` when nothing listens there, and raises
``ForwardError`` when the server did not answer the event (it timed out,
answered anything but 200, or a body that is not one JSON object); either
way the caller answers in-process instead.
"""

from __future__ import annotations

import _json
import _socket
import os
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "CONNECT_TIMEOUT",
    "FORWARDING_MAIN",
    "HOOK_AGENTS",
    "HOOK_PATH",
    "PAYLOAD_LIMIT",
    "SERVE_ENV",
    "WAIT_HEADER",
    "ForwardError",
    "check_target",
    "forward",
    "forwarding_argv",
    "hook_route",
    "read_payload",
    "serve_target",
    "shown_target",
]

SERVE_ENV = "REPEAT_TOOL_GUARD_SERVE"
"""The environment variable naming the server a ``hook`` forwards to when no ``--serve`` is given."""

HOOK_AGENTS = ("claude-code", "codex", "gemini-cli")
"""The CLIs ``hook --agent`` answers; ``serve`` answers each at ``/hooks/<name>``."""

HOOK_PATH = "/hooks/claude-code"

FORWARDING_MAIN = "import sys; from guard.cli import main; sys.exit(main())"
"""What a forwarding hook's interpreter runs (``python -P -c FORWARDING_MAIN
hook ...``): the ``repeat-tool-guard`` script pip writes imports ``re`` before
the guard starts, about half a bare interpreter start that a forwarding hook
never needs otherwise."""


def forwarding_argv() -> list[str]:
    """The start of a forwarding hook's command: this installation's
    interpreter by absolute path, ``-P`` (no working directory on
    ``sys.path``: a project's own ``guard`` package must not answer), ``-c
    FORWARDING_MAIN``."""
    import sys

    return [sys.executable, "-P", "-c", FORWARDING_MAIN]


PAYLOAD_LIMIT = 8 * 1024 * 1024
"""Bytes a hook payload may have, on stdin as in a request to ``serve``: a
tool result (a file read, a command's output) rides in it, so this is
generous; past it the hook reads no further (``/dev/zero`` never ends)."""


def read_payload() -> bytes:
    """The hook's stdin, at most ``PAYLOAD_LIMIT`` bytes; ``ValueError``
    naming the limit for a longer one."""
    import sys

    if sys.stdin is None:
        raise ValueError("stdin is closed: the hook reads its event from stdin as one JSON object")
    data = sys.stdin.buffer.read(PAYLOAD_LIMIT + 1)
    if len(data) > PAYLOAD_LIMIT:
        raise ValueError(f"the hook payload on stdin is over {PAYLOAD_LIMIT // (1024 * 1024)} MiB: not read")
    return data


CONNECT_TIMEOUT = 0.1
"""Seconds to wait for the connection: a local server accepts at once, and
one that does not must not hold up the tool call."""

ANSWER_TIMEOUT = 30.0
"""Seconds to wait for the whole answer once connected (``rescue``'s ask can
take a while): a server that trickles it is cut off all the same."""

WAIT_HEADER = "Repeat-Tool-Guard-Wait"
"""The request header in which a hook says how many seconds it waits for
its answer: ``serve`` ends a ``rescue`` ask in time for the answer to reach
the hook, rather than record a denial the hook gave up waiting for."""

_MAX_ANSWER = 16 * 1024 * 1024


class ForwardError(Exception):
    """The server was reached but did not answer the event; the message says why."""


_FLAGS = frozenset({"hook", "-v", "--verbose"})
_VALUED = frozenset({"--config", "--state-dir", "--serve", "--agent"})


def serve_target(argv: Sequence[str]) -> str | None:
    """Where ``hook`` forwards: ``--serve URL`` in ``argv`` (the command line
    after the program's name), else ``$REPEAT_TOOL_GUARD_SERVE``, else
    nowhere. An empty value means nowhere, so a ``--serve ''`` in settings
    turns the variable off. A command line with anything else in it (a typo,
    ``--help``, an option only the in-process hook knows, such as
    ``--shadow``: a server answers in its own mode) forwards nowhere, so the
    hook's own parser answers it."""
    target = os.environ.get(SERVE_ENV)
    for option, value in _options(argv):
        if option not in _VALUED or (option == "--agent" and value not in HOOK_AGENTS):
            return None
        if option == "--serve":
            target = value
    return target or None


def hook_route(argv: Sequence[str]) -> str:
    """The server's route for the CLI ``--agent`` names in ``argv``
    (``/hooks/codex``; Claude Code's by default)."""
    route = HOOK_PATH
    for option, value in _options(argv):
        if option == "--agent":
            route = f"/hooks/{value}" if value in HOOK_AGENTS else HOOK_PATH
    return route


def _options(argv: Sequence[str]) -> list[tuple[str, str]]:
    """``argv``'s options with their values (``--x v`` and ``--x=v`` alike);
    the hook's flags are left out."""
    found: list[tuple[str, str]] = []
    words = iter(argv)
    for word in words:
        if word in _FLAGS:
            continue
        option, equals, value = word.partition("=")
        if option in _VALUED and not equals:
            value = next(words, "")
        found.append((option, value))
    return found


def check_target(url: str) -> str:
    """``url`` if the hook can forward to it, else ``ValueError`` saying why."""
    _address(url)
    return url


def shown_target(url: str) -> str:
    """``url`` as a message may quote it: a password in it shown as ``***``
    (``bus.redis_log.redact_url``, imported only when a message needs it),
    and at most 200 characters."""
    if "://" in url:
        from bus.redis_log import redact_url

        url = redact_url(url)
    return url if len(url) <= 200 else url[:200] + "…"


def _address(url: str, route: str = HOOK_PATH) -> tuple[int, str | tuple[str, int], str, str]:
    """Socket family, address, host header and path of ``url``: ``unix:PATH``
    (the server's ``--uds``) or ``http://HOST:PORT[/PATH]`` on loopback; the
    path is ``route`` unless the URL names one."""
    if url.startswith("unix:"):
        return _socket.AF_UNIX, url[len("unix:") :], "localhost", route
    if not url.startswith("http://"):
        raise ValueError(f"--serve {shown_target(url)!r}: must be unix:PATH or http://HOST:PORT")
    rest = url[len("http://") :]
    where, slash, path = rest.partition("/")
    host, colon, port = where.rpartition(":")
    if not colon or not port.isdecimal() or not 0 < int(port) < 65536:
        raise ValueError(f"--serve {shown_target(url)!r}: must name a port from 1 to 65535 (http://127.0.0.1:8787)")
    host = host.strip("[]")
    if host not in ("localhost", "127.0.0.1", "::1"):
        raise ValueError(
            f"--serve {shown_target(url)!r}: the hook forwards to this machine only (localhost, 127.0.0.1, ::1)"
        )
    family = _socket.AF_INET6 if ":" in host else _socket.AF_INET
    address = ("127.0.0.1" if host == "localhost" else host, int(port))
    return family, address, where, (slash + path) if path else route


def forward(url: str, body: bytes, route: str = HOOK_PATH) -> bytes | None:
    """The server's answer to the hook payload ``body`` (its JSON, as it
    sent it) posted to ``route`` (``hook_route``), or ``None`` if nothing
    listens at ``url``. ``ForwardError`` when a server was reached but did
    not answer with 200; ``ValueError`` when ``url`` is no local server's address."""
    family, address, host, path = _address(url, route)
    sock = _socket.socket(family, _socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT)
        try:
            sock.connect(address)
        except OSError:  # no such socket, refused, or not accepting in time: no server to ask
            return None
        deadline = time.monotonic() + ANSWER_TIMEOUT
        sock.settimeout(ANSWER_TIMEOUT)
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"{WAIT_HEADER}: {ANSWER_TIMEOUT:g}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        try:
            sock.sendall(head.encode("ascii") + body)
            raw = _read_all(sock, deadline)
        except OSError as exc:
            raise ForwardError(f"{shown_target(url)}: {exc.strerror or type(exc).__name__}") from None
    finally:
        sock.close()
    return _object(url, _body(url, raw))


def _read_all(sock: _socket.socket, deadline: float) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(0, f"no whole answer within {ANSWER_TIMEOUT:g} s")
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue  # the deadline, told above
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > _MAX_ANSWER:
            raise OSError(0, "answer too large")


class _Strict:
    """What the standard library's C scanner asks of its decoder: plain
    JSON, no ``NaN``, no hooks. The scanner alone, without the ``json``
    package, which would import ``re`` on every forwarded hook."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    memo: dict[str, str] = {}  # noqa: RUF012 - the scanner's own memo, cleared by it

    @staticmethod
    def parse_constant(name: str) -> None:
        raise ValueError(name)


_scan = _json.make_scanner(_Strict())  # type: ignore[arg-type]  # typeshed wants a JSONDecoder: any object with these does


def _object(url: str, body: bytes) -> bytes:
    """``body`` if it is one JSON object (every hook answer is), else
    ``ForwardError``: whatever else answers there is not the guard."""
    value: object = None
    text = ""
    try:
        text = body.decode("utf-8").strip()
        value, end = _scan(text, 0)
    except (UnicodeDecodeError, StopIteration, ValueError, RecursionError):
        end = -1
    if type(value) is not dict or end != len(text):
        raise ForwardError(f"{shown_target(url)}: the answer is not one JSON object")
    return body


def _body(url: str, raw: bytes) -> bytes:
    """The body of a 200 response, its framing (length or chunks) checked."""
    head, sep, body = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = lines[0].split(b" ", 2)
    if not sep or len(status) < 2 or not status[0].startswith(b"HTTP/1."):
        raise ForwardError(f"{shown_target(url)}: not an HTTP answer")
    if status[1] != b"200":
        raise ForwardError(f"{shown_target(url)} answered {status[1].decode('ascii', 'replace')}")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip()
    if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
        return _unchunk(url, body)
    length = headers.get(b"content-length")
    if length is None or not length.isdigit() or int(length) != len(body):
        raise ForwardError(f"{shown_target(url)}: the answer was cut short")
    return body


def _unchunk(url: str, body: bytes) -> bytes:
    out: list[bytes] = []
    while True:
        size_line, sep, body = body.partition(b"\r\n")
        try:
            size = int(size_line.split(b";")[0], 16)
        except ValueError:
            raise ForwardError(f"{shown_target(url)}: the answer was cut short") from None
        if not sep or len(body) < size + 2:
            raise ForwardError(f"{shown_target(url)}: the answer was cut short")
        if size == 0:
            return b"".join(out)
        out.append(body[:size])
        body = body[size + 2 :]
