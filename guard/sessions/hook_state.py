"""A session's live guard for a process that answers one event and exits
(the Claude Code command hook): taken from disk, handed over, put back."""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from bus import LogWriteError, open_regular, private_dir
from guard._text import error_text
from guard.config import Config
from guard.guard import Guard
from guard.sessions.link import GuardLink
from guard.sessions.snapshot import load_snapshot, save_snapshot, snapshot_path

__all__ = ["HookAbandoned", "hook_session"]


class HookAbandoned(Exception):
    """The CLI stopped waiting for this hook (``hook_session``'s
    ``abandoned``): nothing of its event was recorded in the session log."""

    def __init__(self) -> None:
        super().__init__(
            "the agent CLI stopped waiting for this hook (the process that started it is gone): "
            "the call it asked about is not recorded"
        )


@asynccontextmanager
async def hook_session(
    state_dir: Path,
    session: str,
    config: Config,
    *,
    log_actions: bool = True,
    on_replay: Callable[[str], None] | None = None,
    abandoned: Callable[[], bool] | None = None,
) -> AsyncIterator[GuardLink]:
    """The link of ``session`` as the previous process left it, for the
    body to apply one event to; on leaving, its state is saved for the next.

    The session's events live in ``<state_dir>/<session>.jsonl`` (a normal
    session log with one header: ``repeat-tool-guard replay`` reads it), and
    the guard's state as of the log's end in
    ``<session>.<config digest>.snapshot``, one for each config hooks of the
    session run under. Inside, an exclusive lock on ``<session>.lock`` is
    held; the guard (``config`` as given, ``log_actions`` as ``Guard``'s)
    is restored from its config's snapshot and caught up on the events a
    hook under another config recorded since, the body's events are
    appended to the log, and a new snapshot is saved: constant work per
    call, however long the session. When the snapshot cannot be used (see
    ``guard.sessions.snapshot``), the log is replayed instead and
    ``on_replay`` is told why; so it is when the new snapshot cannot be
    saved (the answer stands: the next call replays). The body's
    events land in the log together as it ends (``SessionLog.held``): a
    process killed inside it records none of them. A log that is not a session log
    any more is renamed ``*.unreadable-<time>`` and a new one begun
    (``on_replay`` is told where). Both files are created 0600; the log is
    not written through a symbolic link.
    An event the log could not record (a full disk) raises
    ``LogWriteError`` on leaving, and the log is left whole.

    ``abandoned`` says whether the caller's CLI has stopped waiting for the
    answer to a call it asked about (a CLI that, at its hook timeout,
    signals only the shell it started, which leaves this process running):
    asked while the lock is awaited and once the body is done, before
    anything is recorded, it makes the event leave no trace in the log
    (``HookAbandoned``), as a hook killed at the timeout leaves none; the
    call's result, if the CLI ran it anyway, comes as a late call's.
    """
    tell = on_replay if on_replay is not None else _unheard
    private_dir(state_dir)
    path = state_dir / f"{session}.jsonl"
    saved = snapshot_path(path, config)
    lock = open_regular(state_dir / f"{session}.lock", os.O_RDWR | os.O_CREAT, 0o600, what="lock file")
    try:
        _take(lock, abandoned)
        guard = Guard(config, log_actions=log_actions)
        restored = await load_snapshot(saved, path, session, guard)
        if isinstance(restored, str):
            from guard.sessions.resume import resume_link  # only when the snapshot cannot be used

            if path.exists() or saved.exists():
                tell(f"{restored}; replaying {str(path)!r}")
            guard = Guard(config, log_actions=log_actions)
            restored = await resume_link(path, session, guard=guard, mark_resume=False, on_unreadable=tell)
        link, log = restored
        with log:
            try:
                # The event's lines land together once it is answered: a hook killed
                # while it decides (an ask past the CLI's hook timeout) records none of
                # them, and the result of the call, if it ran, comes as a late call's.
                with log.held():
                    yield link
                    if abandoned is not None and abandoned():
                        log.discard_held()
                        raise HookAbandoned
            except LogWriteError:
                pass  # counted in the log's failures; raised below, naming how many
            if log.error is None:  # a log short of an event gets no snapshot: the next call replays it
                try:
                    save_snapshot(saved, link, guard, log)
                except Exception as exc:  # the answer stands: the snapshot only saves the next call a replay
                    detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else error_text(exc)
                    tell(f"the snapshot {str(saved)!r} could not be saved ({detail}); the next call replays")
    finally:
        os.close(lock)
    if log.error is not None:
        raise LogWriteError(log.error.errno, f"{log.failures} event(s) not recorded: {log.error}")


_LOCK_POLL = 0.005
"""Seconds between tries for a session's lock while ``abandoned`` is asked."""


def _take(lock: int, abandoned: Callable[[], bool] | None) -> None:
    """Wait for the exclusive lock on ``lock``; asking ``abandoned`` while
    another process of the session holds it."""
    if abandoned is None:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if abandoned():
                raise HookAbandoned from None
            time.sleep(_LOCK_POLL)


def _unheard(why: str) -> None:
    """What a caller that gave no ``on_replay`` is not told."""
