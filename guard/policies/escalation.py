"""Running the ask command: the one place the guard spends money.

The contract is deliberately tiny so that any executable can
answer: the command is started with exactly one argument, the question; it
gets no stdin and no shell; what it prints on stdout with exit status 0 is the
advice. Anything else means "unavailable" and the caller falls back to its
free local denial: a missing or non-executable file, a non-zero exit, empty
output, or no answer within the timeout. Nothing here raises for a failing
command, so a broken ask command can never break the agent's tool call.

The command runs in a new session (its own process group). On timeout, and
whenever the ask ends for any other reason, the whole group is killed, so a
wrapper script's children do not outlive it. A watchdog (``/bin/sh``, in a
session of its own) holds a pipe from the asking process and kills the group
when that pipe closes without a word: so the ask dies with its asker whatever
signal ends it, SIGKILL included (a Claude Code hook that timed out, say).
The group is named to the watchdog right after the ask starts; an asker
killed within that instant leaves the ask unwatched. POSIX only.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import IO, TYPE_CHECKING

import msgspec

from bus import ToolCall

if TYPE_CHECKING:
    import subprocess

    from anyio.abc import ByteReceiveStream

__all__ = ["ASK_MODEL_ENV", "AskCommand", "AskOutcome"]

ASK_MODEL_ENV = "ASK_MODEL"
"""The environment variable that tells the ask command which model to use."""

_STDERR_TAIL = 2048

_WATCHDOG = (
    # The group to guard, then one word: "done" when the ask ended normally,
    # end of file when its asker died.
    'read -r pgid && [ -n "$pgid" ] || exit 0; read -r word; [ "$word" = done ] || kill -s KILL -- "-$pgid" 2>/dev/null'
)


class AskOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """What one ask produced.

    ``advice`` is the command's stdout (decoded as UTF-8 with replacement,
    stripped, capped) when it answered, else ``None`` and ``reason`` says why
    it was unavailable. ``elapsed_ms`` is wall time, for the trip log only.
    """

    advice: str | None
    reason: str
    elapsed_ms: float
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.advice is not None


class AskCommand:
    """One configured ask command. ``ask`` may run concurrently for many agents.

    ``command`` is a path (``~`` is expanded) or a bare name looked up on
    ``PATH``. ``model`` is passed in the environment as ``ASK_MODEL``.
    At most ``max_output`` bytes of stdout are kept; the rest is read and
    discarded so the command is never blocked on a full pipe.
    """

    def __init__(self, command: str, *, model: str, timeout_ms: int, max_output: int = 16_384) -> None:
        self.command = os.path.expanduser(command)
        self.model = model
        self.timeout_ms = timeout_ms
        self.max_output = max_output

    async def ask(self, question: str, call: ToolCall | None = None) -> AskOutcome:
        """Ask the question; never raises for anything the command does.
        ``call`` (the looping call) is for askers that answer from a record;
        the command never sees it beyond the question.

        Called where no event loop runs (a coroutine driven to completion by
        hand, as the command hook does), the ask starts a loop of its own and
        the call blocks until the ask ends.

        An argv element cannot carry a NUL byte, so any in the question (a
        tool's binary output, say) are replaced with U+FFFD.
        """
        import anyio

        try:
            anyio.get_current_task()
        except RuntimeError:  # no event loop (anyio's NoEventLoopError, or sniffio's error before 4.10)
            return anyio.run(self.ask, question, call)
        started = time.monotonic()
        advice, reason, truncated = await self._run(question.replace("\x00", "\ufffd"))
        return AskOutcome(
            advice=advice,
            reason=reason,
            elapsed_ms=round((time.monotonic() - started) * 1000, 3),
            truncated=truncated,
        )

    async def _run(self, question: str) -> tuple[str | None, str, bool]:
        # Imported here: a process that never asks (a Claude Code hook, most
        # of the time) does not pay for them.
        import subprocess

        import anyio

        env = {**os.environ, ASK_MODEL_ENV: self.model}
        try:
            watchdog = _start_watchdog()
        except OSError as exc:  # pragma: no cover - /bin/sh is POSIX
            return None, f"the ask's watchdog could not start: /bin/sh: {exc}", False
        try:
            # Shielded: a cancellation landing mid-spawn would leak the child.
            with anyio.CancelScope(shield=True):
                process = await anyio.open_process(
                    [self.command, question],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    env=env,
                    start_new_session=True,
                )
                _watch(watchdog, f"{process.pid}\n")
        except OSError as exc:
            _watch(watchdog, "\n")  # no group to guard
            _release(watchdog)
            return None, _start_failure(self.command, exc), False
        stdout = bytearray()
        stderr = bytearray()
        dropped = [0]
        try:
            with anyio.move_on_after(self.timeout_ms / 1000) as scope:
                assert process.stdout is not None
                assert process.stderr is not None
                async with anyio.create_task_group() as group:
                    group.start_soon(_drain, process.stdout, stdout, self.max_output, dropped)
                    group.start_soon(_drain_tail, process.stderr, stderr)
                    await process.wait()
                    # The answer is the leader's; stragglers holding the pipes
                    # open must not keep the agent waiting.
                    _kill_group(process.pid)
        finally:
            _kill_group(process.pid)
            _release(watchdog)
            with anyio.CancelScope(shield=True):
                await process.aclose()
        if scope.cancelled_caught:
            return None, f"timed out after {self.timeout_ms} ms (process group killed)", False
        status = process.returncode
        if status != 0:
            detail = _tail(stderr)
            what = f"killed by signal {-status}" if status is not None and status < 0 else f"exit status {status}"
            return None, what + (f": {detail}" if detail else ""), False
        advice = bytes(stdout).decode("utf-8", "replace").strip()
        if not advice:
            return None, "empty output", False
        truncated = dropped[0] > 0
        if truncated:
            advice += f"\n… (+{dropped[0]} more bytes of output dropped)"
        return advice, "ok", truncated


def _start_watchdog() -> subprocess.Popen[bytes]:
    """The watchdog of one ask: it learns the group to guard from ``_watch``."""
    import subprocess

    return subprocess.Popen(
        ["/bin/sh", "-c", _WATCHDOG],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # a signal to the asker's group spares it
    )


def _watch(watchdog: subprocess.Popen[bytes], line: str) -> None:
    stdin: IO[bytes] | None = watchdog.stdin
    assert stdin is not None
    with contextlib.suppress(OSError):  # a watchdog already gone (killed with the asker's session) hears nothing
        stdin.write(line.encode())
        stdin.flush()


def _release(watchdog: subprocess.Popen[bytes]) -> None:
    """The ask ended here: tell the watchdog so, and reap it."""
    _watch(watchdog, "done\n")
    with contextlib.suppress(OSError):
        assert watchdog.stdin is not None
        watchdog.stdin.close()
    watchdog.wait()


def _start_failure(command: str, exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return f"ask command not found: {command}"
    if isinstance(exc, PermissionError):
        return f"ask command is not executable: {command}"
    return f"ask command could not start: {command}: {exc}"


async def _drain(stream: ByteReceiveStream, into: bytearray, cap: int, dropped: list[int]) -> None:
    async for chunk in stream:
        room = cap - len(into)
        if room > 0:
            into += chunk[:room]
        dropped[0] += max(0, len(chunk) - max(room, 0))


async def _drain_tail(stream: ByteReceiveStream, into: bytearray) -> None:
    async for chunk in stream:
        into += chunk
        if len(into) > _STDERR_TAIL:
            del into[: len(into) - _STDERR_TAIL]


def _tail(data: bytearray) -> str:
    lines = bytes(data).decode("utf-8", "replace").strip().splitlines()
    return lines[-1][:200] if lines else ""


def _kill_group(pgid: int) -> None:
    import signal

    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
