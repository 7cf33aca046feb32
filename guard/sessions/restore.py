"""The one way recorded events are applied to a guard, used by ``replay``
(``replay_log``), the command hook's resume, ``follow`` (a session another
process moved on) and a fleet worker's catch-up.

One withhold rule (``regenerated``): the guard's own recorded output, the
context messages and halt requests its policies label as theirs, is never
read back; the guard, seeing the same events, makes it again. Everything else is
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

from msgspec import UNSET

from bus import AgentStatus, AnyEvent, ContextMessage, Event
from guard.guard import Guard
from guard.policy import History

__all__ = ["OUTPUT_TYPES", "regenerated", "replaying"]

OUTPUT_TYPES = (ContextMessage, AgentStatus)
"""The event types the guard's own output has."""


def regenerated(guard: Guard, event: Event) -> bool:
    """Whether ``event``, read from a record, is ``guard``'s own output,
    which a restore withholds and the guard regenerates: a context message
    one of its policies labels, or a halt request one of them names as its
    ``by``. A halt request that names nobody is applied as recorded (a
    runtime or another plugin may have asked for it)."""
    kind = type(event)
    if kind is ContextMessage:
        return guard.owns(event)
    if kind is AgentStatus:
        assert isinstance(event, AgentStatus)
        return event.status == "halt-requested" and event.by is not UNSET and guard.owns(event)
    return False


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
