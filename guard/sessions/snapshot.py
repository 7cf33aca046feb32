"""The command hook's state between invocations: a snapshot beside the log.

Claude Code starts the command hook as a fresh process for every hook
event. Replaying the session's log to rebuild the guard costs time linear
in the session, so each invocation ends by saving what the next one needs
(the bus's seq; each live agent's step, calls in flight and halt request;
each policy's state for it; the latest answers, for copies of their
events) next to the log, one snapshot per effective config, and the next
one starts from that when it still describes the log: the same snapshot
format, the same effective config, the same log file, at the size it had
or grown by whole events that continue its numbering. Those events (a
hook under another config recorded them: the plugin and a settings hook
both installed) are applied as ``guard.sessions.resume.follow`` applies
another process's, so each hook catches up on what the other recorded
rather than replaying the session. Anything else (no snapshot, another
format or config, a log that shrank, was replaced or grew by anything
else, a file that does not load) falls back to replaying the log, and the
caller is told why.

The snapshot is a pickle, because the policies' states are live Python
objects (their own classes, sets, deques) and a pickle keeps them as they
are, custom policies' included. A policy itself is not in it, only its place
among the guard's policies: the next process's guard, built from the same
config, puts its own there. A pickle runs code
when loaded, so only a regular file owned by this user and writable by no
one else is loaded: the trust already placed in the state directory (mode
0700) and in the config, whose ``ask_command`` runs anyway. It is written to
a temporary file and renamed over the old one, so a reader sees a whole
snapshot or none, and it carries a digest of its record: a snapshot damaged
on disk (a flipped byte can still unpickle, into other counts) is replayed
over, never trusted.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import stat
from pathlib import Path
from typing import Any

import msgspec

from bus import AgentStatus, AnyEvent, Bus, SessionLog, SessionStart
from bus._codec import event_decoder
from guard.config import Config
from guard.fingerprint import blake2b
from guard.guard import Guard
from guard.policy import AnyPolicy, AnyWatch
from guard.sessions.link import GuardLink, LinkState

__all__ = ["SNAPSHOT_BUDGET", "SNAPSHOT_VERSION", "load_snapshot", "save_snapshot", "snapshot_path"]

SNAPSHOT_VERSION = 12
"""The snapshot format. Raise it whenever what a snapshot holds changes
shape or meaning (a policy's state among it), so an older one is replayed
over rather than misread."""

_MAGIC = b"rtg-snapshot\x00"
"""How a snapshot file starts, before the digest of its record."""
_DIGEST_SIZE = 16
_HEADER = len(_MAGIC) + _DIGEST_SIZE

SNAPSHOT_BUDGET = 4 * 1024 * 1024
"""Past this size a snapshot sheds the calls its runtime will never answer
(``_shed``): their arguments would otherwise ride along in every save."""

_IN_FLIGHT = 32
"""How many of an agent's newest open calls may still be running at once
(one model response's tools): older ones than these were never run."""

_ANSWERS_SAVED = 64
"""How many of the link's latest answers a snapshot carries: enough for the
copies of the events just answered (a hook delivered twice), few enough to
keep each save small."""

_AgentRecord = tuple[LinkState, list[AnyWatch] | None]
"""A live agent: where it stands and its watches (each policy's state for it)."""


class _Pickler(pickle.Pickler):
    """Writes each of the guard's policies as its index."""

    def __init__(self, file: io.BytesIO, policies: list[AnyPolicy]) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._places = {id(policy): index for index, policy in enumerate(policies)}

    def persistent_id(self, obj: Any) -> int | None:
        return self._places.get(id(obj))


class _Unpickler(pickle.Unpickler):
    """Reads an index back as the guard's policy at that place."""

    def __init__(self, data: bytes, policies: list[AnyPolicy]) -> None:
        super().__init__(io.BytesIO(data))
        self._policies = policies

    def persistent_load(self, pid: Any) -> AnyPolicy:
        if not isinstance(pid, int) or not 0 <= pid < len(self._policies):
            raise pickle.UnpicklingError(f"no policy at place {pid!r}")
        return self._policies[pid]


def snapshot_path(log: Path, config: Config) -> Path:
    """Where the snapshot of the session log at ``log`` lives for a guard
    of ``config`` (effective: the environment's overrides applied):
    ``<session>.<config digest>.snapshot``, one per config, so hooks of one
    session under two configs never take each other's."""
    digest = blake2b(_config_key(config), digest_size=8).hexdigest()
    return log.with_name(f"{log.stem}.{digest}.snapshot")


def _config_key(config: Config) -> bytes:
    return msgspec.json.encode(config)


def _shed(states: list[LinkState], excess: int) -> bool:
    """Forget, largest first, open calls the runtime will not answer until
    about ``excess`` bytes of their arguments are gone; whether any went.
    Not answered, as the link infers steps: a call of an earlier model
    response than the agent's current one, or of the current one once its
    newest call was answered (the runtime asks the model again only once a
    response's calls are done, so such a call was refused, by the user or
    another hook), or older than the agent's newest ``_IN_FLIGHT`` open
    calls. A result that does come for a forgotten call (a slow call of a
    parallel batch, say) is still recorded, as a result with no call open:
    nothing the runtime reports is lost, only the pairing with its call."""
    sizes: list[tuple[int, LinkState, str]] = []
    for state in states:
        newest = set(list(state.calls)[-_IN_FLIGHT:])
        for call_id, call in state.calls.items():
            if call.step < state.step or state.step_done or call_id not in newest:
                sizes.append((len(pickle.dumps(call.args, pickle.HIGHEST_PROTOCOL)), state, call_id))
    sizes.sort(key=lambda entry: entry[0], reverse=True)
    shed = 0
    for size, state, call_id in sizes:
        if shed >= excess:
            break
        del state.calls[call_id]
        twins = state.twins or {}
        for published in twins.values():
            if call_id in published:
                published.remove(call_id)
        state.twins = {name: published for name, published in twins.items() if published}
        shed += size
    return shed > 0


def _seal(data: memoryview) -> None:
    """Write the header into ``data``: the magic, then the digest of the
    pickled record that follows it."""
    data[:_HEADER] = _MAGIC + blake2b(data[_HEADER:], digest_size=_DIGEST_SIZE).digest()


def _opened(data: bytes) -> bytes | str:
    """The pickled record of the snapshot file ``data``, or why it is none."""
    if not data.startswith(_MAGIC):
        return "the snapshot is not in this guard's format"
    pickled = data[_HEADER:]
    if blake2b(pickled, digest_size=_DIGEST_SIZE).digest() != data[len(_MAGIC) : _HEADER]:
        return "the snapshot is damaged (its digest does not match its record)"
    return pickled


def _log_identity(info: os.stat_result) -> tuple[int, int, int]:
    return (info.st_dev, info.st_ino, info.st_size)


def save_snapshot(path: Path, link: GuardLink, guard: Guard, log: SessionLog) -> None:
    """Save the state of ``link``'s agents and ``guard`` as of the end of
    ``log`` (the caller holds the session's lock)."""
    agents: list[_AgentRecord] = [(a.state(), guard.watches(a.agent)) for a in link.links()]
    answers = link.answers.items()[-_ANSWERS_SAVED:]
    record = (
        SNAPSHOT_VERSION,
        _config_key(guard.config),
        _log_identity(os.stat(log.path)),
        link.bus.seq,
        agents,
        answers,
    )
    buffer = io.BytesIO()
    buffer.write(bytes(_HEADER))  # filled in once the record is written
    _Pickler(buffer, guard.policies).dump(record)
    if buffer.tell() > SNAPSHOT_BUDGET and _shed([state for state, _ in agents], buffer.tell() - SNAPSHOT_BUDGET):
        buffer = io.BytesIO()
        buffer.write(bytes(_HEADER))
        _Pickler(buffer, guard.policies).dump(record)
    data = buffer.getbuffer()
    _seal(data)
    temporary = path.with_name(f"{path.name}.tmp")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise


async def load_snapshot(path: Path, log_path: Path, session: str, guard: Guard) -> tuple[GuardLink, SessionLog] | str:
    """A link and a log continuing the session as the snapshot at ``path``
    saved it, with ``guard`` (fresh, same policies) restored and attached,
    both caught up on the events the log gained since; or, when the
    snapshot cannot be used, why not."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return "there is no snapshot"
    except OSError as exc:
        return f"the snapshot cannot be opened ({exc.strerror})"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
            return "the snapshot is not a file of yours that only you can write"
        with os.fdopen(fd, "rb", closefd=False) as file:
            data = file.read()
    finally:
        os.close(fd)
    pickled = _opened(data)
    if isinstance(pickled, str):
        return pickled
    try:
        record = _Unpickler(pickled, guard.policies).load()
    except Exception as exc:
        return f"the snapshot does not load ({type(exc).__name__}: {exc})"
    if not isinstance(record, tuple) or not record:
        return "the snapshot is not a record of this guard's"
    if record[0] != SNAPSHOT_VERSION:
        return f"the snapshot has format {record[0]!r}; this guard writes format {SNAPSHOT_VERSION}"
    try:
        _, config_key, log_id, seq, agents, answers = record
        if config_key != _config_key(guard.config):
            return "the snapshot was written under another config"
        try:
            current = _log_identity(os.stat(log_path))
        except FileNotFoundError:
            return "the session log is gone"
        start = log_id[2]
        if current[:2] != tuple(log_id[:2]) or current[2] < start:
            return "the session log changed since the snapshot was written"
        places = list(guard.policies)
        if any(
            watches is not None and [getattr(w, "policy", None) for w in watches] != places for _, watches in agents
        ):
            return "the snapshot's policy states do not match the config's policies"
        bus = Bus(seq=seq)
        link = GuardLink(bus)
        state: LinkState
        for state, watches in agents:
            link.adopt(state.agent).restore(state)
            if watches is not None:
                guard.restore(state.agent, watches)
        for key, answer in answers:
            link.answers.restore(key, answer)
    except Exception as exc:  # a record of another shape: written by hand, or by a build with a bug
        return f"the snapshot does not hold what this guard saves ({type(exc).__name__}: {exc})"
    since = _events_since(log_path, start, current[2], seq, link) if current[2] > start else []
    if since is None:
        return "the session log changed since the snapshot was written"
    guard.attach(bus)
    if since:
        from guard.sessions.resume import follow  # only when another hook wrote to the log

        await follow(link, guard, since)
    log = SessionLog(log_path, session=session, append=True, mark_resume=False).attach(bus)
    return link, log


def _events_since(log_path: Path, start: int, end: int, seq: int, link: GuardLink) -> list[AnyEvent] | None:
    """The events the log at ``log_path`` holds from byte ``start`` to
    ``end``, carrying ``link``'s agent handles; ``None`` unless they are
    whole lines, each an event, numbered on from ``seq`` without a gap."""
    with open(log_path, "rb") as file:
        file.seek(start)
        data = file.read(end - start)
    lines = data.split(b"\n")
    if lines.pop():
        return None  # a torn last line
    decode = event_decoder({agent.agent.id: agent.agent for agent in link.links()}).decode
    events: list[AnyEvent] = []
    for number, line in enumerate(lines, seq + 1):
        try:
            event = decode(line)
        except (msgspec.DecodeError, RecursionError):
            return None
        if isinstance(event, SessionStart) or event.seq != number:
            return None
        if type(event) is AgentStatus and event.parent is not None and event.agent is not None:
            event.agent.parent_id = event.agent.parent_id or event.parent
        events.append(event)
    return events
