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
session of its own) holds a pipe from the asking process and ends the group
when that pipe closes without a word: so the ask dies with its asker whatever
signal ends it, SIGKILL included (a Claude Code hook that timed out, say).
The group is named to the watchdog right after the ask starts; an asker
killed within that instant leaves the ask unwatched. POSIX only.

On Linux the command is started by a small reaper process (this Python,
``-I -S``) that makes itself the subreaper of everything the command starts
(``PR_SET_CHILD_SUBREAPER``): a descendant that leaves the group (``setsid``,
a daemonizing double fork) is still re-parented to the reaper, not to init,
and when the ask ends (answered, timed out, cancelled, or its asker gone:
``PR_SET_PDEATHSIG``) the reaper kills every descendant it has and reaps
them before it exits. What still escapes: a process that is handed to
another parent outside the tree (started through a service manager, ``at``,
a container runtime or ``ssh``), and, without Linux, any descendant that
leaves the process group.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import sys
import time
from collections.abc import Iterator
from contextvars import ContextVar
from typing import IO, TYPE_CHECKING

import msgspec

from bus import ToolCall
from bus._codec import as_logged

if TYPE_CHECKING:
    import subprocess

    from anyio.abc import ByteReceiveStream

__all__ = ["ASK_MODEL_ENV", "AskCommand", "AskOutcome", "answer_by", "as_argument"]

_DEADLINE: ContextVar[float] = ContextVar("repeat_tool_guard_answer_by", default=math.inf)
_SHORTEST_ASK = 1.0
"""Seconds an ask needs at the least; with less left before its answer is
due, it is not started."""


@contextlib.contextmanager
def answer_by(deadline: float) -> Iterator[None]:
    """Asks started within (in this task and the tasks it starts) end by
    ``deadline`` (``time.monotonic()``), whatever their own timeout: the
    answer they hold up is due then, since whoever waits for it (a hook
    posting to ``serve``) waits no longer. An ask with less than a second
    left is not started: its escalation fails, and the denial goes out
    without advice, in time. Nested, the earliest deadline holds."""
    token = _DEADLINE.set(min(deadline, _DEADLINE.get()))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


ASK_MODEL_ENV = "ASK_MODEL"
"""The environment variable that tells the ask command which model to use."""

_STDERR_TAIL = 2048
"""Bytes of a failed ask's stderr kept, at most, for its last line."""
_REAPER_GRACE = 2.0
"""Seconds the reaper has to end its tree before its group is killed outright."""

_WATCHDOG = (
    # The group to guard, then one word: "done" when the ask ended normally,
    # end of file when its asker died.
    'read -r pgid && [ -n "$pgid" ] || exit 0; read -r word; [ "$word" = done ] && exit 0; '
    # TERM first: the reaper then takes down what left the group
    'kill -s TERM -- "-$pgid" 2>/dev/null; sleep 1; kill -s KILL -- "-$pgid" 2>/dev/null'
)

_REAPER_FAILED = "repeat-tool-guard ask reaper: "

# Run argv[1:] as the reaper's child; every descendant re-parents to the
# reaper, which kills and reaps them all when the command ends or on SIGTERM
# (sent by the asker on timeout, or by the kernel when the asker dies). The
# command's own exit status (or signal) becomes the reaper's.
_REAPER = """
import ctypes, os, signal, subprocess, sys
parent = os.getppid()
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(36, 1, 0, 0, 0)
libc.prctl(1, signal.SIGTERM, 0, 0, 0)
def tree():
    children = {}
    for name in os.listdir('/proc'):
        if name.isdigit():
            try:
                with open('/proc/' + name + '/stat', 'rb') as f:
                    ppid = int(f.read().rsplit(b')', 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(name))
    found, todo = [], [os.getpid()]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found
def end_all():
    while True:
        for pid in tree():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
def on_term(signum, frame):
    end_all()
    os._exit(128 + signum)
signal.signal(signal.SIGTERM, on_term)
if os.getppid() != parent:
    on_term(signal.SIGTERM, None)
try:
    child = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL)
except OSError as exc:
    sys.stderr.write(FAILED + type(exc).__name__ + ': ' + (exc.strerror or str(exc)) + chr(10))
    sys.exit(127)
while True:
    pid, status = os.waitpid(-1, 0)
    if pid == child.pid:
        break
end_all()
if os.WIFSIGNALED(status):
    if os.WTERMSIG(status) != signal.SIGKILL:
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
    os.kill(os.getpid(), os.WTERMSIG(status))
os._exit(os.waitstatus_to_exitcode(status))
""".replace("FAILED", repr(_REAPER_FAILED))
_REAPED = sys.platform == "linux"


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
        for name, value in (("timeout_ms", timeout_ms), ("max_output", max_output)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"AskCommand({name}=...) must be an integer >= 1, got {value!r}")
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

        The question is passed as ``as_argument`` writes it.
        """
        import anyio

        try:
            anyio.get_current_task()
        except RuntimeError:  # no event loop (anyio's NoEventLoopError, or sniffio's error before 4.10)
            return anyio.run(self.ask, question, call)
        started = time.monotonic()
        advice, reason, truncated = await self._run(as_argument(question))
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

        timeout = self.timeout_ms / 1000
        left = _DEADLINE.get() - time.monotonic()
        if left < timeout:  # the answer is due before the ask's own timeout
            if left < _SHORTEST_ASK:
                return None, "not asked: its answer is due before an ask could end (the hook waits no longer)", False
            timeout = left
        env = {**os.environ, ASK_MODEL_ENV: self.model}
        argv = [self.command, question]
        if _REAPED:  # pragma: no branch - elsewhere the command runs as the group's leader itself
            found = _resolve(self.command)
            if isinstance(found, OSError):
                return None, _start_failure(self.command, found), False
            argv = [sys.executable, "-I", "-S", "-c", _REAPER, found, question]
        try:
            watchdog = _start_watchdog()
        except OSError as exc:  # pragma: no cover - /bin/sh is POSIX
            return None, f"the ask's watchdog could not start: /bin/sh: {exc}", False
        try:
            # Shielded: a cancellation landing mid-spawn would leak the child.
            with anyio.CancelScope(shield=True):
                process = await anyio.open_process(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    env=env,
                    start_new_session=True,
                )
                _watch(watchdog, f"{process.pid}\n")
        except (OSError, ValueError) as exc:  # ValueError: a model or question the OS cannot take (NUL, lone surrogate)
            _watch(watchdog, "\n")  # no group to guard
            _release(watchdog)
            return None, _start_failure(self.command, exc), False
        stdout = bytearray()
        stderr = bytearray()
        dropped = [0]
        try:
            with anyio.move_on_after(timeout) as scope:
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
            with anyio.CancelScope(shield=True):
                if _REAPED and process.returncode is None:  # timed out or cancelled: the reaper ends its tree
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(process.pid, signal.SIGTERM)
                    with anyio.move_on_after(_REAPER_GRACE):
                        await process.wait()
                _kill_group(process.pid)
                _release(watchdog)
                await process.aclose()
        if scope.cancelled_caught:
            return None, f"timed out after {round(timeout * 1000)} ms (process group killed)", False
        status = process.returncode
        if _REAPED and status == 127 and stderr.startswith(_REAPER_FAILED.encode()):
            failure = bytes(stderr[len(_REAPER_FAILED) :]).decode("utf-8", "replace").strip()
            return None, _start_failure(self.command, OSError(failure)), False
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


def as_argument(text: str) -> str:
    """``text`` as one argument of a command can carry it: an argv element
    holds no NUL byte, so each (a tool's binary output, say) becomes U+FFFD,
    and no lone surrogate (text cut mid-character), so each is written as
    the session log writes it (``\\udc80``, six bytes). Its UTF-8 length is
    the argument's; writing it again changes nothing."""
    return str(as_logged(text.replace("\x00", "\ufffd")))


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


def _resolve(command: str) -> str | OSError:
    """The executable ``command`` names (a path, or a name on ``PATH``), or
    the error starting it would raise: checked here, since the reaper, not
    this process, starts it."""
    if os.sep in command:
        if not os.path.exists(command):
            return FileNotFoundError(command)
        if os.path.isdir(command) or not os.access(command, os.X_OK):
            return PermissionError(command)
        return command
    import shutil  # here: with it come bz2 and lzma, which every command hook would pay for

    found = shutil.which(command)
    if found is None:
        return FileNotFoundError(command)
    return found


def _start_failure(command: str, exc: OSError | ValueError) -> str:
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
    """Keep the last ``_STDERR_TAIL`` bytes, and the one before them: ``_tail``
    reads from it whether the tail starts a line."""
    async for chunk in stream:
        into += chunk
        if len(into) > _STDERR_TAIL + 1:
            del into[: len(into) - _STDERR_TAIL - 1]


def _tail(data: bytearray) -> str:
    """The last line of what the ask wrote on stderr, whole: its reader
    redacts it before cutting it short, so a secret in it must be whole
    when the redaction rules see it. When bytes before the tail were
    dropped, the tail's first line is a fragment that may start inside a
    key, and is never returned: a last line longer than the tail is
    replaced by a note saying so."""
    lines = bytes(data).decode("utf-8", "replace").splitlines()
    fragment = lines.pop(0) if len(data) > _STDERR_TAIL else ""
    kept = "\n".join(lines).strip()
    if not kept and fragment.strip():
        return f"(its last line of stderr is longer than {_STDERR_TAIL} bytes: not kept)"
    return kept.splitlines()[-1] if kept else ""


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
