"""The contract between the guard and its policies.

A policy is plain logic over one agent's state: the ``Guard`` owns the bus
wiring, the per-agent state table and the delivery of actions, so a policy
never publishes or awaits the bus itself.
"""

from __future__ import annotations

import contextlib
import os
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from types import CoroutineType
from typing import Any, Generic, Protocol, TypeVar, cast

from bus import AgentStatus, AnyEvent, LogReader, ToolCall, ToolResult, UserMessage
from guard.actions import Action
from guard.fingerprint import FingerprintCache

__all__ = ["AnyPolicy", "AnyWatch", "History", "Policy", "SittingOut", "StateT", "Watch"]

StateT = TypeVar("StateT")
"""The type of the per-agent state a policy keeps."""


class History:
    """The recorded session a guard is being brought through (a replay, a
    resume, a fleet worker catching up), as the policies' ``replaying``
    seam sees it: what was recorded happened already, so a policy answers
    from the record rather than acting on the world again.

    ``events()`` reads the recorded events (on demand: only a policy that
    needs them pays for reading); ``answered`` is false when the caller
    wants escalations asked live even so (``replay --ask``).
    """

    def __init__(self, events: Iterable[AnyEvent] | str | os.PathLike[str], *, answered: bool = True) -> None:
        self._source = events
        self.answered = answered

    def events(self, *, containing: bytes | None = None) -> Iterator[AnyEvent]:
        """The recorded events. With ``containing``, a recorded log is read
        for the events whose line holds those bytes alone (``LogReader``);
        events already in memory are all handed out, so the caller still
        picks the ones it wants."""
        source = self._source
        if isinstance(source, str | os.PathLike):
            with LogReader(source, containing=containing) as reader:
                yield from reader
        else:
            yield from source


class AnyWatch(Protocol):
    """One agent's hooks into one policy, whatever its state type."""

    @property
    def policy(self) -> AnyPolicy: ...

    async def on_call(self, call: ToolCall, fingerprints: FingerprintCache) -> Action | None: ...

    def on_result(self, result: ToolResult, fingerprints: FingerprintCache) -> Action | None: ...

    def on_user_message(self, message: UserMessage) -> None: ...

    def on_status(self, status: AgentStatus) -> None: ...


class AnyPolicy(Protocol):
    """What the guard needs of a policy, whatever its state type."""

    @property
    def name(self) -> str: ...

    @property
    def plugin(self) -> str: ...

    @property
    def intercepts(self) -> bool: ...

    shadow: bool
    """Set by the registry from the section's ``mode``."""

    def watch(self) -> AnyWatch: ...


class Policy(ABC, Generic[StateT]):
    """Base class of the policies: every hook is a no-op by default, except
    ``new_state``, which each policy must define (a stateless one subclasses
    ``Policy[None]`` and returns ``None``): a class without it cannot be
    instantiated.

    ``name`` is the config section and the ``policy`` of its actions;
    ``plugin`` labels its context messages, denials and halt requests, and
    is how a replay tells its recorded output from everyone else's. The
    guard consults ``on_call`` only for policies that override it. Build
    actions with ``guard.actions.action_for``.
    """

    name: str = ""
    plugin: str = ""
    shadow: bool = False
    """Whether the guard records this policy's actions without delivering
    them (``mode = "shadow"``)."""
    shareable: bool = False
    """Whether one instance may decide for several guards at once: all it
    keeps beyond ``new_state``'s per-agent state follows from its config
    (bounded memos included), and its ``replaying`` does nothing. A server's
    sessions share one such instance (``build_policies(config, share=...)``)
    instead of each holding its own copy of the config's compiled rules."""
    waits: bool = False
    """Whether ``on_call`` may wait on something slow (``rescue`` asking a
    model). The guard shows an agent's events to the policies one at a
    time, so that one held up cannot be overtaken; with such a policy
    among those deciding calls, an agent's other events go on while a call
    is decided, as that policy expects."""

    @abstractmethod
    def new_state(self) -> StateT:
        """Fresh per-agent state, created on the agent's first event."""

    async def on_call(self, state: StateT, call: ToolCall, fingerprints: FingerprintCache) -> Action | None:
        """Before the tool runs. A denying action stops the call."""
        return None

    def on_result(self, state: StateT, result: ToolResult, fingerprints: FingerprintCache) -> Action | None:
        """After the tool ran or was denied. A ``remind`` action becomes a
        context message for this result, a ``halt`` action a halt request."""
        return None

    def on_user_message(self, state: StateT, message: UserMessage) -> None:
        """A genuine user message reached the agent."""

    def on_status(self, state: StateT, status: AgentStatus) -> None:
        """The agent's lifecycle changed (``idle``, ``halt-requested``, ...);
        called for agents that have state, before ``disposed`` drops it."""

    def replaying(self, history: History) -> contextlib.AbstractContextManager[None]:
        """While the returned context is entered, the guard applies the
        recorded ``history`` rather than live events: a policy that acts on
        the world (asks a model, writes a log of its own) answers from the
        record and records nothing again. The default does nothing."""
        return contextlib.nullcontext()

    @property
    def intercepts(self) -> bool:
        """Whether this policy decides calls before they run (overrides ``on_call``)."""
        return type(self).on_call is not Policy.on_call

    def watch(self) -> Watch[StateT]:
        """This policy's hooks for a new agent, over a fresh ``new_state()``."""
        return Watch(self)


class Watch(Generic[StateT]):
    """One agent's hooks into one policy, that agent's state bound in: the
    guard keeps one per agent and policy, so it calls each hook without
    knowing (or typing) the state. Two slots, so an idle agent costs little."""

    __slots__ = ("policy", "state")

    def __init__(self, policy: Policy[StateT]) -> None:
        self.policy = policy
        self.state = policy.new_state()

    async def on_call(self, call: ToolCall, fingerprints: FingerprintCache) -> Action | None:
        answer: Any = self.policy.on_call(self.state, call, fingerprints)
        # a plain ``def on_call`` answers at once: its deny counts as an async one's would
        awaited = type(answer) is CoroutineType or hasattr(type(answer), "__await__")
        return cast("Action | None", await answer if awaited else answer)

    def on_result(self, result: ToolResult, fingerprints: FingerprintCache) -> Action | None:
        return self.policy.on_result(self.state, result, fingerprints)

    def on_user_message(self, message: UserMessage) -> None:
        self.policy.on_user_message(self.state, message)

    def on_status(self, status: AgentStatus) -> None:
        self.policy.on_status(self.state, status)


class SittingOut(Watch[None]):
    """The hooks of a policy that could not make its state for an agent
    (its ``new_state`` raised): it sits out that agent's events, and the
    other policies run as before."""

    __slots__ = ()

    def __init__(self, policy: AnyPolicy) -> None:
        self.policy = policy  # type: ignore[assignment]
        self.state = None

    async def on_call(self, call: ToolCall, fingerprints: FingerprintCache) -> Action | None:
        return None

    def on_result(self, result: ToolResult, fingerprints: FingerprintCache) -> Action | None:
        return None

    def on_user_message(self, message: UserMessage) -> None:
        pass

    def on_status(self, status: AgentStatus) -> None:
        pass
