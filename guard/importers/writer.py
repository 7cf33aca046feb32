"""Writing an imported session as a session log, with the bus's own writer."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import msgspec
from msgspec.structs import force_setattr

from bus import AgentStatus, AnyEvent, SessionLog, ToolCall
from guard.importers._session import ImportedSession

__all__ = ["WriteSummary", "write_log"]


class WriteSummary(msgspec.Struct, frozen=True, kw_only=True):
    """What ``write_log`` wrote: the log's path and session id, how many
    events, tool calls and agents, and what the import skipped by reason."""

    path: str
    session: str
    events: int
    calls: int
    agents: int
    skipped: dict[str, int]


_BATCH = 256
"""Events written to the log with one system write."""


def write_log(session: ImportedSession, path: str | os.PathLike[str]) -> WriteSummary:
    """Stream ``session`` into a new session log at ``path``.

    Events are numbered ``seq`` 1, 2, ... in order; the header's ``ts`` is
    the first event's. Like every session log, an existing file is never
    overwritten (``FileExistsError``).
    """
    events = session.events()
    first = next(events, None)
    start = first.ts if first is not None else 0.0
    counts = {"events": 0, "calls": 0}
    agents = 0
    with SessionLog(Path(path), session=session.session, clock=lambda: start) as log:
        if first is not None:
            pending: list[AnyEvent] = []
            try:
                for seq, event in enumerate(itertools.chain((first,), events), 1):
                    force_setattr(event, "seq", seq)
                    pending.append(event)
                    counts["events"] = seq
                    if type(event) is ToolCall:
                        counts["calls"] += 1
                    elif type(event) is AgentStatus and event.status == "started":
                        agents += 1
                    if len(pending) == _BATCH:
                        batch, pending = pending, []
                        log.write_many(batch)
            finally:  # what the importer made before it failed is in the log, as without batches
                log.write_many(pending)
    return WriteSummary(
        path=str(path),
        session=session.session,
        events=counts["events"],
        calls=counts["calls"],
        agents=agents,
        skipped=dict(session.report.skipped),
    )
