"""The resident server's sessions: live guard state in memory, persisted
events, restoration after a restart, eviction of idle sessions.

``SessionStore`` owns every live session and is the one seam between the
HTTP layer and where a session's events persist: the file-backed store keeps
one session log per session in a state directory; another backend (a Redis
stream per session, say) subclasses ``SessionStore`` and implements
``restore`` and nothing else.
"""

from __future__ import annotations

import abc
import contextlib
import errno
import fcntl
import math
import os
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import anyio

from bus import Event, LogWriteError, ToolCall, ToolResult, open_regular, private_dir, read_log
from bus._codec import encode_line
from bus._logging import LazyLogger
from guard.actions import Action
from guard.adapters.claude_hooks import CLAUDE_CODE, HALTED_BY, ClaudeHooks, HookRuntime
from guard.config import Config
from guard.guard import ActionListener, Guard
from guard.policies.registry import build_policies
from guard.server.scope import current, note
from guard.sessions.answer import retry_key
from guard.sessions.link import AgentLink, GuardLink
from guard.sessions.live import check_max_sessions
from guard.sessions.resume import resume_link

if TYPE_CHECKING:
    from guard.sessions.fleet import FleetCounts

__all__ = ["FileSessionStore", "Session", "SessionStore", "StoreError"]

_log = LazyLogger("guard.server")

_DENIALS_KEPT = 256
_ANSWERS_KEPT = 64
_RECORDED_KEPT = 32
_RECORDED_MAX = 4096
_GONE = "removed while the server ran; events are refused until the server is restarted"
_REPLACED = (
    "removed and made again while the server ran (its logs and lock went with the old one); "
    "events are refused until the server is restarted"
)


class StoreError(Exception):
    """A session's events could not be recorded (a full disk, a file size
    limit, a lost connection to Redis) or its history could not be read.
    Nothing the request produced is recorded, and the session's live state is
    dropped, so its next request rebuilds it from what was recorded; the
    server answers 503."""


class Session:
    """One session's live state: its ``GuardLink`` (bus, guard and log), the
    translators of its two routes (``hooks`` for Claude Code hook payloads,
    ``agents`` for the events API; a session is driven through one of them),
    and a lock, held by the request using it (the store takes the session's
    requests in turns, so its events reach the guard and the log in the
    order they were answered, and evicts no session in use).

    ``close`` is called by the store once the session is evicted; the store
    never hands out a closed session.
    """

    def __init__(
        self, session_id: str, link: GuardLink, close: Callable[[], object], plugins: Iterable[str] = ()
    ) -> None:
        self.id = session_id
        self.link = link
        self.guards = frozenset({*plugins, HALTED_BY})
        """The names the guard's own denials carry (its policies' plugins, and
        a halted agent's): no client may claim a denial under one."""
        self.agents: dict[str, AgentLink] = {}
        """The events API's live agents by id."""
        self.hooks: ClaudeHooks
        self._other_hooks: dict[str, ClaudeHooks] = {}
        self.relink()
        self.lock = anyio.Lock(fast_acquire=True)
        self.last_used = 0.0
        self.closed = False
        self._close = close
        self._denied: OrderedDict[tuple[str, str], bytes] = OrderedDict()
        self.answers: OrderedDict[str, bytes] = OrderedDict()
        """The latest ``_ANSWERS_KEPT`` answers to calls and results by
        ``retry_key``, encoded, so a client's retry gets the original answer
        and publishes nothing twice. A retry comes once its client gave up
        waiting, long before that many other calls and results of the
        session are answered."""
        self.recorded: OrderedDict[str, float] = OrderedDict()
        """When the latest call and result of each recent ``retry_key`` was
        recorded (its ``ts``): a request that reached the server before then
        is a stale copy of one already answered. Only a request in flight can
        be one: past the latest ``_RECORDED_KEPT``, entries older than every
        request of the session in flight are dropped (``forget_recorded``)."""
        self.late: dict[str, tuple[str, bytes, int]] = {}
        """Each agent's call recorded from its result (posted before it) when
        that was the agent's latest event: its id, fingerprint digest and
        seq. The call posted after all, the same, is that call, not a new one."""
        self.pending: list[Event] = []
        """The events of the request in progress, not yet recorded."""
        self.fetch_answers: Callable[[Sequence[str]], Awaitable[None]] | None = None
        """Set by a store whose copy may lack answers given elsewhere (by
        another replica): brings the answers of these retry keys into
        ``answers`` from the record before they are looked up."""
        link.bus.record(self._heard)

    def _heard(self, event: Event) -> None:
        self.pending.append(event)
        self.note_recorded(event)

    def note_recorded(self, event: Event) -> None:
        """Remember when a call or result was recorded, by its ``retry_key``."""
        if isinstance(event, (ToolCall, ToolResult)) and event.agent is not None:
            kind = "tool/call" if isinstance(event, ToolCall) else "tool/result"
            key = retry_key(kind, event.agent.id, event.call_id)
            self.recorded[key] = event.ts
            self.recorded.move_to_end(key)
            if len(self.recorded) > _RECORDED_MAX:
                self.recorded.popitem(last=False)

    def forget_recorded(self, before: float) -> None:
        """Drop the record times beyond the latest ``_RECORDED_KEPT`` that
        are older than ``before``, the arrival of the session's oldest
        request in flight (no request that arrived after a record can be a
        stale copy of it)."""
        recorded = self.recorded
        while len(recorded) > _RECORDED_KEPT:
            key = next(iter(recorded))
            if recorded[key] >= before:
                break
            del recorded[key]

    def relink(self) -> None:
        """Take the routes' agents from the link: after events applied from
        elsewhere (another replica's) adopted or forgot some, both routes
        see the agents a restore would give them."""
        self.agents = {agent.agent.id: agent for agent in self.link.links()}
        self.hooks = ClaudeHooks(self.link)
        self._other_hooks = {}

    def hooks_for(self, runtime: HookRuntime) -> ClaudeHooks:
        """The translator of ``runtime``'s hook route (``hooks`` for Claude Code's)."""
        if runtime is CLAUDE_CODE:
            return self.hooks
        hooks = self._other_hooks.get(runtime.name)
        if hooks is None:
            hooks = self._other_hooks[runtime.name] = ClaudeHooks(self.link, runtime=runtime)
        return hooks

    def remember_answer(self, key: str, answer: bytes) -> None:
        self.answers[key] = answer
        self.answers.move_to_end(key)
        if len(self.answers) > _ANSWERS_KEPT:
            self.answers.popitem(last=False)

    def remember_denial(self, agent_id: str, call_id: str, call: bytes) -> None:
        """The guard denied this call and its denial is recorded as its
        result; ``call`` is the call's fingerprint digest (its tool and arguments)."""
        self._denied[(agent_id, call_id)] = call
        self._denied.move_to_end((agent_id, call_id))
        if len(self._denied) > _DENIALS_KEPT:
            self._denied.popitem(last=False)

    def forget_denial(self, agent_id: str, call_id: str) -> None:
        """A new call took this id: the denial no longer answers for it."""
        self._denied.pop((agent_id, call_id), None)

    def denied_call(self, agent_id: str, call_id: str) -> bytes | None:
        """The fingerprint digest of the recent call of this agent with this
        id, when the guard denied it; ``None`` when none was denied."""
        return self._denied.get((agent_id, call_id))

    @property
    def finished(self) -> bool:
        """No agent of the session is live (a Claude Code ``SessionEnd``, or
        every agent disposed through the events API)."""
        return not self.link.links()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._close()


class SessionStore(abc.ABC):
    """Owns the live sessions of one server.

    ``use(session_id)`` yields the session with its lock held: live, restored
    from where its events persist, or new. A session idle for longer than
    ``idle_seconds`` is evicted by ``evict_idle``; beyond ``max_sessions``
    live sessions the least recently used idle one is evicted as soon as
    another opens. An evicted session's state is gone from memory and comes
    back from its events on its next use.
    """

    def __init__(
        self,
        config: Config | None = None,
        *,
        idle_seconds: float = 900.0,
        max_sessions: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not idle_seconds > 0:
            raise ValueError(f"idle_seconds = {idle_seconds!r}: must be > 0")
        self.config = config
        self.idle_seconds = idle_seconds
        self.max_sessions = check_max_sessions(max_sessions)
        self.on_action: Callable[[Action, Event], None] | None = None
        """Told of every live guard action of every session (not of a restore's history)."""
        self.on_event: Callable[[Event], None] | None = None
        """Told of every event published on a session's bus after its restore."""
        self.restored = 0
        self.evicted = 0
        self.caught_up = 0
        """Requests that found another replica had moved a live session on and
        applied just what it appended (always 0 for a store only this process uses)."""
        self._clock = clock
        self._policies = build_policies(config if config is not None else Config())
        """The config's policies, built once: every session's guard shares the ``shareable`` ones."""
        self._live: OrderedDict[str, Session] = OrderedDict()
        self._requests: dict[str, tuple[anyio.Lock, list[float]]] = {}
        """Each session with requests in flight: the lock they take turns on
        (``_turn``), and when each of them arrived."""

    def new_guard(self, on_action: ActionListener | None = None) -> Guard:
        """A fresh guard for one session. It shares the store's ``shareable``
        policies (their compiled rules follow from the config alone) and
        builds its own of the rest: 10,000 live sessions would otherwise
        hold 10,000 copies, which every full garbage collection walks."""
        policies = build_policies(self.config if self.config is not None else Config(), share=self._policies)
        return Guard(self.config, on_action=on_action, policies=policies)

    def __len__(self) -> int:
        """How many sessions are live in memory."""
        return len(self._live)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._live

    @abc.abstractmethod
    async def commit(self, session: Session, events: list[Event]) -> None:
        """Record ``events``, all a request published on the session's bus,
        before it is answered; ``StoreError`` if they could not be, with
        none of them recorded (the session is then evicted and rebuilt from
        its record on its next use)."""

    @abc.abstractmethod
    async def restore(self, session_id: str) -> Session:
        """The session rebuilt from its persisted events (a new one when it
        has none). The backend appends each new event where the session
        persists (a recorder on the session's bus, as ``SessionLog`` is),
        reports live guard actions to ``on_action`` and events to
        ``on_event``, and gives the ``Session`` a ``close`` that releases
        what it holds."""

    @asynccontextmanager
    async def use(self, session_id: str, *, retry_keys: Sequence[str] = ()) -> AsyncIterator[Session]:
        """The session, its lock held for the duration of the block. A
        session whose agents are all gone when the block ends is evicted.
        ``retry_keys`` are those whose answers the block will look up (a
        store whose copy may lack answers given elsewhere reads them with
        the session)."""
        note(session=session_id)
        async with self._turn(session_id), self._held(session_id, retry_keys) as session:
            yield session

    @asynccontextmanager
    async def _turn(self, session_id: str) -> AsyncIterator[None]:
        """The block runs in its session's turn: one request of a session at
        a time (so a session is restored once however many wait), any number
        of sessions side by side. The request is in flight from when it
        arrived (its scope's ``arrived``, else now) until the block ends;
        then the live session forgets the record times no request still in
        flight can need (``Session.forget_recorded``)."""
        lock, arrivals = self._requests.get(session_id) or (anyio.Lock(fast_acquire=True), [])
        self._requests[session_id] = lock, arrivals
        scope = current()
        since = scope.arrived if scope is not None else time.time()
        arrivals.append(since)
        try:
            async with lock:
                yield
        finally:
            arrivals.remove(since)
            if not arrivals:
                del self._requests[session_id]
            session = self._live.get(session_id)
            if session is not None:
                session.forget_recorded(min(arrivals, default=math.inf))

    @asynccontextmanager
    async def _held(self, session_id: str, retry_keys: Sequence[str]) -> AsyncIterator[Session]:
        """``use``'s session, its lock held (marking it in use: never
        evicted meanwhile), its request's events committed when the block
        ends (see ``use``). Entered in the session's turn, so nothing else
        holds the lock or evicts the session between ``_get`` and the lock.
        A store whose copy may lack what other replicas did (and answered:
        ``retry_keys``) overrides it to bring the copy up to date first."""
        session = await self._get(session_id)
        async with session.lock:
            session.last_used = self._clock()
            try:
                yield session
            except BaseException as exc:
                if not isinstance(exc, Exception):
                    # Cancelled (a shutdown's deadline) before it was answered: what it
                    # published is not recorded, and the live state that saw it is dropped,
                    # so the client's retry is decided afresh from the record.
                    session.pending = []
                    self._evict(session)
                raise
            finally:
                session.last_used = self._clock()
                events, session.pending = session.pending, []
                try:
                    if events:
                        await self.commit(session, events)
                except BaseException:
                    self._evict(session)  # its live state is ahead of its record: rebuilt from the record
                    raise
                if session.finished:
                    self._evict(session)

    async def _get(self, session_id: str) -> Session:
        session = self._live.get(session_id)
        if session is not None:
            self._live.move_to_end(session_id)
            return session
        # In the session's turn (``_turn``): restored once, while the restores
        # of other sessions run side by side, each replay giving way to the
        # other requests every few hundred events.
        session = await self.restore(session_id)
        session.last_used = self._clock()
        self._live[session_id] = session
        self._make_room(keep=session)
        return session

    def _make_room(self, keep: Session) -> None:
        # Sessions in use stay, and so does the one being opened: with every
        # other session busy, the store is over its bound until one is free.
        excess = len(self._live) - self.max_sessions
        if excess <= 0:
            return
        for session in list(self._live.values()):
            if excess <= 0:
                break
            if session is not keep and not session.lock.locked():
                self._evict(session)
                excess -= 1

    def evict_idle(self) -> int:
        """Evict every session unused for ``idle_seconds`` and not in use; how many."""
        deadline = self._clock() - self.idle_seconds
        idle = [s for s in self._live.values() if s.last_used <= deadline and not s.lock.locked()]
        for session in idle:
            self._evict(session)
        return len(idle)

    def _evict(self, session: Session) -> None:
        self._live.pop(session.id, None)  # gone already if the store closed under a request past its grace
        session.close()
        self.evicted += 1

    async def evict_idle_forever(self, every: float | None = None) -> None:
        """Run ``evict_idle`` every ``every`` seconds (a quarter of
        ``idle_seconds``, from 1 s to 30 s, by default) until cancelled: a
        sub-second idle timeout evicts at the next check, and an idle
        server sleeps between checks."""
        period = every if every is not None else min(max(self.idle_seconds / 4, 1.0), 30.0)
        while True:
            await anyio.sleep(period)
            self.evict_idle()

    @abc.abstractmethod
    async def unready(self) -> str | None:
        """Why the store cannot record events now (``/healthz`` answers
        503 with it), or ``None`` when it can."""

    async def fleet_counts(self) -> FleetCounts | None:
        """Counts across every replica sharing this store's sessions, or
        ``None`` for a store only this process uses."""
        return None

    async def aclose(self) -> None:
        """``close``, and release what the store holds beyond its sessions
        (a connection, say); the server calls it at shutdown."""
        self.close()

    def close(self) -> None:
        """Close every live session (the logs among them); the store is empty after."""
        for session in list(self._live.values()):
            del self._live[session.id]
            session.close()


class FileSessionStore(SessionStore):
    """Sessions persisted as session logs: ``<state_dir>/<session>.jsonl``,
    the same format as every session log, so ``replay --check`` reads them.
    A restored session appends to its log after a resume header.

    The header a restore writes (``session/start``, or the resume header of
    a log that goes on) is held back and written with the session's first
    events: a session in which no request recorded anything (each was
    refused) leaves no file, and an existing log no bare resume header.
    A request's events are appended in one write when it ends, before it is
    answered; a write that fails (a full disk, a file size limit) is taken
    back whole and the request fails with ``StoreError``. A log is open
    only while it is read or written, so live sessions hold no file
    descriptor. With ``fsync``, each request's write is also forced to disk
    before the answer (it survives a power cut, not only a crash).

    The store makes its state directory on first use (or ``claim``) and
    never again, and remembers which directory it is (its device and
    inode): a directory removed while the store runs took its sessions'
    logs, and numbering their events anew would answer ``seq`` values
    already given out, so once it is gone, or another directory stands in
    its place, every event is refused (``StoreError``) and ``unready`` says
    why, until the server is restarted."""

    def __init__(
        self, state_dir: str | os.PathLike[str], config: Config | None = None, *, fsync: bool = False, **options: Any
    ) -> None:
        super().__init__(config, **options)
        self.state_dir = Path(state_dir)
        self._dir: tuple[int, int] | None = None
        """The state directory's (device, inode) once made; ``_dir_fd`` holds
        it open, so no directory made in its place can have its inode number."""
        self._dir_fd: int | None = None
        self._lock: IO[str] | None = None
        self._locked: tuple[int, int] | None = None
        """The directory whose ``serve.lock`` ``_lock`` holds."""
        self.fsync = fsync
        guard = self.new_guard()
        self._owns = guard.owns
        self._plugins = guard.plugins
        self._headers: dict[str, bytes] = {}
        """The header lines each live session's log is still owed (see above)."""

    def log_path(self, session_id: str) -> Path:
        return self.state_dir / f"{session_id}.jsonl"

    def claim(self) -> None:
        """Make the state directory if need be, and hold its lock file,
        ``serve.lock`` (holding this process's pid), until ``release``: one
        server owns a state directory at a time. ``StoreError`` when the
        directory cannot be made or another process holds it."""
        try:
            self._ready_dir()
            self._lock = _lock_dir(self.state_dir)
        except BlockingIOError as exc:
            raise StoreError(f"state dir {str(self.state_dir)!r} is {exc.strerror}") from None
        except OSError as exc:
            raise StoreError(f"state dir {str(self.state_dir)!r}: {exc.strerror or exc}") from None
        self._locked = self._dir

    def release(self) -> None:
        """Let go of the state directory's lock (``claim``)."""
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def close(self) -> None:
        """Close every session, and let go of the state directory: the
        store's next use, if any, makes and remembers it anew."""
        super().close()
        if self._dir_fd is not None:
            os.close(self._dir_fd)
            self._dir_fd = self._dir = None

    def _ready_dir(self) -> None:
        """Make the state directory on first use; after that, ``OSError``
        when it is gone or another directory stands in its place. A claimed
        store takes the lock of a directory made in its place (at the first
        check that finds it), so no other server starts on it while this one
        runs and refuses it."""
        if self._dir is None:
            private_dir(self.state_dir)
            self._dir_fd = os.open(self.state_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            info = os.fstat(self._dir_fd)
            self._dir = info.st_dev, info.st_ino
            return
        try:
            info = os.stat(self.state_dir)
        except FileNotFoundError:
            raise FileNotFoundError(errno.ENOENT, _GONE, str(self.state_dir)) from None
        found = info.st_dev, info.st_ino
        if found != self._dir:
            if self._lock is not None and found != self._locked:
                self._locked = found  # tried once for each directory made in its place
                with contextlib.suppress(OSError):
                    lock = _lock_dir(self.state_dir)
                    self._lock.close()
                    self._lock = lock
            raise FileNotFoundError(errno.ENOENT, _REPLACED, str(self.state_dir))

    async def unready(self) -> str | None:
        """The state directory must be a writable directory with room left."""
        try:
            self._ready_dir()
            info = os.statvfs(self.state_dir)
        except OSError as exc:
            return f"state dir {str(self.state_dir)!r}: {exc.strerror or exc}"
        if info.f_bavail == 0 or not os.access(self.state_dir, os.W_OK | os.X_OK):
            return f"state dir {str(self.state_dir)!r} is not writable or its file system is full"
        return None

    async def restore(self, session_id: str) -> Session:
        from guard.server.events import recall  # the answers' wire form lives with the routes

        path = self.log_path(session_id)
        try:
            self._ready_dir()
        except OSError as exc:
            raise StoreError(f"state dir {str(self.state_dir)!r}: {exc.strerror or exc}") from None
        try:
            before = _identity(path)
            link, log = await resume_link(
                path,
                session_id,
                self.config,
                guard=self.new_guard(),
                on_action=self.on_action,
                on_unreadable=partial(_restarted, session_id),
            )
            log.close()  # written by ``commit``, a request at a time
            log.detach(link.bus)
            if self.on_event is not None:
                link.bus.record(self.on_event)
            # at once: a crash from here on leaves no bare header
            self._headers[session_id], continued = _take_back(path, before)
            session = Session(session_id, link, partial(self._headers.pop, session_id, None), self._plugins)
            if continued:
                with read_log(path) as reader:
                    await recall(session, reader, self._owns)
        except OSError as exc:
            reason = str(exc) if isinstance(exc, LogWriteError) else f"session log {str(path)!r}: {exc.strerror or exc}"
            raise StoreError(f"{reason}; the event was not recorded") from None
        if before is not None:
            self.restored += 1
        return session

    async def commit(self, session: Session, events: list[Event]) -> None:
        path = self.log_path(session.id)
        try:
            self._ready_dir()  # a log made again in another directory would number its events anew
        except OSError as exc:
            reason = f"state dir {str(self.state_dir)!r}: {exc.strerror or exc}"
            raise StoreError(f"{reason}; the event was not recorded") from None
        header = self._headers.get(session.id, b"")
        lines = bytearray(header)
        line = bytearray()
        for event in events:
            encode_line(event, line)
            lines += line
            lines.append(10)  # b"\n"
        try:
            _append(path, lines, fsync=self.fsync, create=bool(header))
        except OSError as exc:
            raise StoreError(f"session log {str(path)!r}: {exc.strerror or exc}; the event was not recorded") from None
        if header:
            self._headers[session.id] = b""


def _lock_dir(state_dir: Path) -> IO[str]:
    """``state_dir/serve.lock``, locked (``flock``) and holding this
    process's pid; ``OSError`` (``EWOULDBLOCK``, naming the holder's pid)
    when another process holds it."""
    lock = open(state_dir / "serve.lock", "a+", encoding="utf-8")  # noqa: SIM115 - held until released
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        holder = lock.read().strip() or "another process"
        lock.close()
        raise BlockingIOError(errno.EWOULDBLOCK, f"in use by another server (pid {holder})") from None
    lock.truncate(0)
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    return lock


def _identity(path: Path) -> tuple[int, int, int] | None:
    """The file at ``path`` (device, inode, size), or ``None`` for none."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    return info.st_dev, info.st_ino, info.st_size


def _take_back(path: Path, before: tuple[int, int, int] | None) -> tuple[bytes, bool]:
    """The lines a restore just wrote to the log at ``path``, taken back out
    of it: those past the size the file had (``before``), or the whole file,
    removed, when the restore began it (there was none, or an unreadable
    one was set aside); and whether the restore continued a log that
    stays (one with events to recall)."""
    fd = open_regular(path, os.O_RDWR, what="session log", follow_symlinks=False)
    try:
        info = os.fstat(fd)
        start = before[2] if before is not None and before[:2] == (info.st_dev, info.st_ino) else 0
        written = os.pread(fd, info.st_size - start, start)
        if start:
            os.ftruncate(fd, start)
        else:
            path.unlink()
        return written, bool(start)
    finally:
        os.close(fd)


def _append(path: Path, lines: bytearray, *, fsync: bool, create: bool = False) -> None:
    """Append ``lines`` to the log at ``path`` whole, or raise with none of
    them there: what a failing write left is cut off again (if even that
    fails, the log ends mid-line, and the next resume header starts on a
    line of its own). With ``create`` (the lines begin with the log's
    header) the file is made if need be, and removed again when the write
    fails and leaves it empty."""
    flags = os.O_WRONLY | os.O_APPEND | (os.O_CREAT if create else 0)
    fd = open_regular(path, flags, 0o600, what="session log", follow_symlinks=False, devices=True)
    try:
        size = os.fstat(fd).st_size
        view = memoryview(lines)
        written = 0
        try:
            while written < len(lines):
                written += os.write(fd, view[written:])
            if fsync:
                os.fsync(fd)
        except OSError:
            if written:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)
            if create and not size:
                with contextlib.suppress(OSError):
                    path.unlink()
            raise
        finally:
            view.release()
    finally:
        os.close(fd)


def _restarted(session_id: str, why: str) -> None:
    _log.warning("serve.log_restarted", session=session_id, reason=why)
