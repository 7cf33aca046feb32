"""The one way recorded events are applied to a guard, used by ``replay``
(``replay_log``), the command hook's resume, ``follow`` (a session another
process moved on) and a fleet worker's catch-up.

One withhold rule (``regenerated``): the guard's own recorded output, its
policies' context messages and halt requests (``Guard.owns``), is never read
back; the guard, seeing the same events, makes it again. Everything else is
applied as recorded, a denied call's result included: the denial is the
runtime's record of what happened to the call, and the policies must see it.

One seam for the policies (``replaying``): while history is applied, each
policy is told so through ``Policy.replaying`` and answers from the record
(an escalation is never asked again, a trip never recorded again).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator

from bus import AgentStatus, AnyEvent, ContextMessage, Event
from guard.guard import Guard
from guard.policy import History

__all__ = ["OUTPUT_TYPES", "regenerated", "replaying"]

OUTPUT_TYPES = (ContextMessage, AgentStatus)
"""The event types the guard's own output has."""


def regenerated(guard: Guard, event: Event) -> bool:
    """Whether ``event``, read from a record, is ``guard``'s own output,
    which a restore withholds and the guard regenerates: a context message
    or halt request of one of its policies."""
    return type(event) in OUTPUT_TYPES and guard.owns(event)


@contextlib.contextmanager
def replaying(
    guard: Guard, history: Iterable[AnyEvent] | str | os.PathLike[str], *, answered: bool = True
) -> Iterator[None]:
    """While inside, every policy of ``guard`` that has the
    ``Policy.replaying`` seam applies the recorded ``history`` (events, or
    the session log at a path, read only if a policy asks for it)."""
    recorded = History(history, answered=answered)
    with contextlib.ExitStack() as stack:
        for policy in guard.policies:
            seam = getattr(policy, "replaying", None)
            if seam is not None:
                stack.enter_context(seam(recorded))
        yield
