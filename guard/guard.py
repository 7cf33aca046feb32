"""The ``Guard``: per-agent state, bus wiring, and delivery of policy actions."""

from __future__ import annotations

import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextvars import ContextVar
from typing import Any

import msgspec
from msgspec import UNSET

from bus import (
    DELIVERIES_KEPT,
    Agent,
    AgentStatus,
    Bus,
    ContextMessage,
    ContextSource,
    Decision,
    Event,
    ToolCall,
    ToolResult,
    UserMessage,
)
from bus._logging import InfoLog, LazyLogger, name_of
from bus.events import trimmed
from guard.actions import DENYING, SHADOW_FORM, Action
from guard.config import Config
from guard.fingerprint import FingerprintCache
from guard.policies.registry import build_policies
from guard.policy import AnyPolicy, AnyWatch, SittingOut

__all__ = ["ActionListener", "Guard"]

ActionListener = Callable[[Action, Event], None]
"""Told of every action with the event that triggered it (replay uses this)."""

_log = LazyLogger("guard")


_PUBLISHED = frozenset({"remind", "halt"})
"""The actions the guard itself publishes (a denial is the result the runtime publishes)."""

_FINISH_SECONDS = 5.0
"""How long the policies still due may take to see an event whose caller
was cancelled (a runtime's timeout): the log holds the event, and a replay
shows it to every policy, so the live guard must too."""


def _keys(within: int | tuple[int, ...]) -> tuple[int, ...]:
    return within if isinstance(within, tuple) else (within,)


def _cancellation(exc: BaseException) -> bool:
    """Whether ``exc`` is the running event loop's cancellation."""
    if isinstance(exc, Exception | KeyboardInterrupt | SystemExit | GeneratorExit):
        return False
    import anyio  # only here: a hook that never awaits loads no event loop

    try:
        return isinstance(exc, anyio.get_cancelled_exc_class())
    except Exception:  # pragma: no cover - a BaseException of its own, raised where no event loop runs
        return False


def _cancelled() -> type[BaseException]:
    """The running event loop's cancellation exception (an ``except``
    clause reads it only when something was raised)."""
    import anyio

    return anyio.get_cancelled_exc_class()


def _finishing() -> Any:
    """A scope shielded from the caller's cancellation, for at most
    ``_FINISH_SECONDS``: a subscriber that never returns cannot hold the
    cancelled caller for ever."""
    import anyio

    return anyio.move_on_after(_FINISH_SECONDS, shield=True)


def _is_action(action: object, policy: AnyPolicy, hook: str, agent: Agent) -> bool:
    """Whether a hook's answer is an ``Action`` (with text: it is shown to
    the model and written to the log); anything else is the policy's
    failure, logged, and skipped like a hook that raised."""
    if isinstance(action, Action):
        if type(action.text) is str:
            return True
        error = f"returned an Action whose text is a {type(action.text).__name__}, not a str"
    else:
        error = f"returned {type(action).__name__}, not an Action or None"
    _log.error("guard.policy_failed", policy=policy.name, hook=hook, agent=agent.id, error=error)
    return False


def _log_action(log: InfoLog, action: Action, shown: Callable[[str], str]) -> None:
    """An action's record on the ``guard`` logger, built only when ``info``
    gets through; the agent's id and the tool's name ``shown`` redacted (a
    log line often ends up in a log shipper: an MCP tool's name may carry
    its server's URL, an id may be named after a token)."""
    if log.enabled():
        extra = {"shadow": True} if action.shadow else {}
        log.info(
            f"guard.{action.action}",
            policy=action.policy,
            agent=shown(action.agent) if action.agent is not None else None,
            tool=shown(action.tool),
            count=action.count,
            threshold=action.threshold,
            **extra,
        )


class _Entry(weakref.ref[Agent]):
    """An agent's watches, held through a weak reference to its handle
    (``key`` is the handle's id): when the handle is collected, the guard's
    callback drops the entry, before that id can be reused."""

    __slots__ = ("busy", "key", "waiting", "watches")
    key: int
    watches: list[AnyWatch]
    busy: bool
    waiting: deque[Any] | None

    def __new__(cls, agent: Agent, callback: Callable[[_Entry], None], watches: list[AnyWatch]) -> _Entry:
        self = super().__new__(cls, agent, callback)
        self.key = id(agent)
        self.watches = watches
        self.busy = False
        self.waiting = None
        return self

    async def turn(self) -> None:
        """Wait for this agent's turn, taken by another of its events (see
        ``Guard._turn``)."""
        import anyio  # only on contention: a hook that never awaits loads no event loop

        ready = anyio.Event()
        if self.waiting is None:
            self.waiting = deque()
        self.waiting.append(ready)
        try:
            await ready.wait()
        except BaseException:
            if ready.is_set():  # handed the turn as it was cancelled: hand it on
                self.done()
            else:
                self.waiting.remove(ready)
            raise

    def done(self) -> None:
        """End this agent's turn, handing it to the next event waiting."""
        waiting = self.waiting
        if waiting:
            waiting.popleft().set()  # still busy: the turn passes on
        else:
            self.busy = False

    def __init__(self, agent: Agent, callback: Callable[[_Entry], None], watches: list[AnyWatch]) -> None:
        super().__init__(agent, callback)  # type: ignore[call-arg]  # ref's own, which typeshed leaves out


class Guard:
    """Watches each agent's tool calls on a bus and acts on loops.

    State is kept per live agent, in memory only, keyed on the handle's
    identity and held through a weak reference: it disappears with the agent
    handle, on its ``disposed`` status, and never crosses agents. Events without an agent are ignored. ``config`` runs
    as given: the environment's overrides (``apply_environment``) belong to
    the edges that start a live guard (the adapters, the ``hook`` command),
    so a replay of a log depends on nothing but the log and the config.

    The policies are those ``config`` enables, or exactly ``policies`` when
    given (your own ``Policy`` subclasses, say). A policy or listener that
    raises, or a hook that answers with anything but an ``Action``, is
    logged and skipped; the others still run (a policy whose ``new_state``
    raises sits out that agent's events). Every action is
    logged through structlog (``guard.remind``, ...) unless ``log_actions`` is
    false; listeners hear of it either way.

    A policy in shadow mode (``policy.shadow``) decides as usual, but its
    actions are marked ``shadow`` and recorded as a context message of form
    ``SHADOW_FORM`` that no adapter shows: it denies nothing and asks no halt.
    """

    def __init__(
        self,
        config: Config | None = None,
        *,
        on_action: ActionListener | None = None,
        policies: Sequence[AnyPolicy] | None = None,
        log_actions: bool = True,
    ) -> None:
        if config is not None and not isinstance(config, Config):
            raise TypeError(
                f"Guard(config=...) takes a Config (parse_config(dict) or load_config(path) makes one),"
                f" got {type(config).__name__}"
            )
        self.config = config if config is not None else Config()
        self.policies = _policies(policies) if policies is not None else build_policies(self.config)
        self._interceptors = [index for index, policy in enumerate(self.policies) if policy.intercepts]
        # a call is decided in its agent's turn unless a policy deciding calls waits on something slow
        self._calls_in_turn = not any(getattr(self.policies[index], "waits", False) for index in self._interceptors)
        self._plugins = frozenset(policy.plugin for policy in self.policies)
        # id(handle) -> its entry: a plain dict lookup on the hot path.
        agents: dict[int, _Entry] = {}
        self._agents = agents

        def gone(entry: _Entry) -> None:  # holds the dict, not the guard
            agents.pop(entry.key, None)

        self._gone = gone
        # A call and its result share one fingerprint only when some policy
        # looks at the call too, or several look at the result.
        self._fingerprints = FingerprintCache(size=8 if self._interceptors or len(self.policies) > 1 else 0)
        self._listeners: list[ActionListener] = [on_action] if on_action is not None else []
        self._bus: Bus | None = None
        self._action_log = InfoLog("guard") if log_actions else None
        self._redactor: Callable[[str], str] | None = None
        # (agent, call id) -> the agent's entry and the delivery of the latest
        # results, every agent's together, so an idle agent keeps none of it
        self._answered: dict[tuple[int, str], tuple[_Entry, tuple[object, ...]]] = {}
        # One bound method, so ``Bus.unintercept`` (an identity match) finds it.
        self._interceptor = self._on_call
        # The agent (handle id; several, nested) whose event this task is delivering the guard's own output
        # for, or asking a policy about: an event published from there (a halt request, a runtime's answer
        # to it, a policy's own note) is in its turn already.
        self._delivering: ContextVar[int | tuple[int, ...] | None] = ContextVar(
            "repeat_tool_guard_delivering", default=None
        )

    @property
    def plugins(self) -> frozenset[str]:
        """The plugin names this guard's messages, denials and halt requests carry."""
        return self._plugins

    def owns(self, event: Event) -> bool:
        """Whether ``event`` (read from a session log) is output of this
        guard's policies: a context message one of them labels, a halt
        request one of them asked for, or the result of a call one of them
        denied. A halt request that names nobody (logs recorded before halt
        requests named their plugin) counts as the guard's. Replay decides
        what to regenerate and compare with this, so another plugin's
        messages, and those of a policy this guard does not run, are
        replayed as recorded."""
        if isinstance(event, ContextMessage):
            return event.source.plugin in self._plugins
        if isinstance(event, ToolResult):
            return event.denied_by in self._plugins
        if isinstance(event, AgentStatus) and event.status == "halt-requested":
            return event.by is UNSET or event.by in self._plugins
        return False

    def add_listener(self, listener: ActionListener) -> None:
        self._listeners.append(listener)

    def attach(self, bus: Bus) -> Guard:
        """Subscribe to ``bus``; a guard serves one bus at a time."""
        if self._bus is not None:
            raise RuntimeError("this Guard is already attached to a bus; detach it first")
        bus.subscribe(ToolResult, self._on_result)
        bus.subscribe(UserMessage, self._on_user_message)
        bus.subscribe(AgentStatus, self._on_status)
        if self._interceptors:
            bus.intercept("repeat-tool-guard", self._interceptor)
        else:
            bus.subscribe(ToolCall, self._on_call_seen)  # no policy decides calls; a call still makes its result new
        self._bus = bus
        return self

    def detach(self) -> None:
        bus = self._bus
        if bus is None:
            return
        bus.unsubscribe(ToolResult, self._on_result)
        bus.unsubscribe(UserMessage, self._on_user_message)
        bus.unsubscribe(AgentStatus, self._on_status)
        if self._interceptors:
            bus.unintercept(self._interceptor)
        else:
            bus.unsubscribe(ToolCall, self._on_call_seen)
        self._bus = None

    def reset(self) -> None:
        """Forget every agent's state, as a guard made now would start. A
        replay does this where its log was continued by a new run (see
        ``bus.Replay``), whose guard started afresh."""
        self._agents.clear()
        self._answered.clear()

    def agent_count(self) -> int:
        """How many agents currently have state."""
        return len(self._agents)

    def watches(self, agent: Agent) -> list[AnyWatch] | None:
        """``agent``'s watches (one per policy, in order, each with its state),
        or ``None`` before its first event: what a process that answers one
        hook at a time saves, to ``restore`` them in the next."""
        entry = self._agents.get(id(agent))
        return entry.watches if entry is not None else None

    def restore(self, agent: Agent, watches: list[AnyWatch]) -> None:
        """Give ``agent`` the ``watches`` an earlier guard had for it, each
        over the policy of this guard at its place (see ``watches``)."""
        if len(watches) != len(self.policies) or any(
            w.policy is not p for w, p in zip(watches, self.policies, strict=True)
        ):
            raise ValueError("these watches are not over this guard's policies")
        self._track(agent, watches)

    def _track(self, agent: Agent, watches: list[AnyWatch]) -> list[AnyWatch]:
        self._agents[id(agent)] = _Entry(agent, self._gone, watches)
        return watches

    def _watches(self, agent: Agent) -> list[AnyWatch]:
        entry = self._agents.get(id(agent))
        if entry is None:
            return self._track(agent, [self._watch(policy, agent) for policy in self.policies])
        return entry.watches

    @staticmethod
    def _watch(policy: AnyPolicy, agent: Agent) -> AnyWatch:
        try:
            return policy.watch()
        except Exception:  # one policy's failure never switches the others off
            _log.exception("guard.policy_failed", policy=policy.name, hook="new_state", agent=agent.id)
            return SittingOut(policy)

    async def _turn(self, entry: _Entry, late: Callable[..., Awaitable[object]], *event: Any) -> _Entry | None:
        """Take ``entry``'s agent's turn, or ``None`` when this event was
        published from within the guard's own delivery in that turn.

        The policies see one of an agent's events at a time, whole, in the
        order the events reached the guard: an event arriving while another
        is held up (an escalation's ask, a subscriber awaiting the guard's
        reminder) would otherwise reach the later policies first, and a
        replay of the log, which shows them events one after another, would
        decide otherwise. Without contention it costs a flag. A caller
        cancelled while it waits (a runtime's timeout) has its event shown
        out of turn (``late(*event)``), then the cancellation goes on: the
        log holds the event, and a replay shows it."""
        if not entry.busy:
            entry.busy = True
            return entry
        within = self._delivering.get()
        if within is not None and entry.key in _keys(within):
            return None
        try:
            await entry.turn()
        except _cancelled():
            with _finishing():
                await late(*event)
            raise
        return entry

    async def _on_call_seen(self, call: ToolCall) -> None:
        """A call was made (seen here when no policy decides calls; else in
        ``_on_call``): the result that answers it is new, whatever it holds,
        even if an earlier call under its id was answered alike (a runtime
        that reuses ids and steps)."""
        if call.agent is not None and self._answered:
            self._answered.pop((id(call.agent), call.call_id), None)

    async def _on_call(self, call: ToolCall, rest: Sequence[int] | None = None) -> Decision | None:
        """Ask each policy that decides calls, in the agent's turn (``rest``:
        only those, when a cancelled decision is finished within it)."""
        agent = call.agent
        if agent is None:
            return None
        watches = self._watches(agent)
        entry: _Entry | None = None
        if rest is None:
            if self._calls_in_turn:
                entry = self._agents[id(agent)]
                if entry.busy:
                    entry = await self._turn(entry, self._on_call, call, self._interceptors)
                else:
                    entry.busy = True
            answered = self._answered
            if answered:  # a call under an id already answered: its result is new (see ``_on_call_seen``)
                answered.pop((id(agent), call.call_id), None)
        decision: Decision | None = None
        late = call.late is True
        interceptors = self._interceptors if rest is None else rest
        index = -1
        try:
            for index in interceptors:
                watch = watches[index]
                policy = watch.policy
                # what the policy publishes while it decides (an event of this agent) is in its turn already
                asking = self._delivering.set(self._within(agent))
                try:
                    action = await watch.on_call(call, self._fingerprints)
                except Exception:
                    _log.exception("guard.policy_failed", policy=policy.name, hook="on_call", agent=agent.id)
                    continue
                finally:
                    self._delivering.reset(asking)
                if action is None or not _is_action(action, policy, "on_call", agent):
                    continue
                if policy.shadow or (late and action.action in DENYING):
                    # a late call already ran: what would have denied it is recorded, as in shadow mode
                    await self._deliver(policy, msgspec.structs.replace(action, shadow=True), call)
                    continue
                await self._deliver(policy, action, call)
                if decision is None and action.action in DENYING:
                    decision = Decision.deny(action.text, policy.plugin, advice=action.advice)
        except BaseException as exc:
            after = interceptors[interceptors.index(index) + 1 :] if index >= 0 else ()
            if after and _cancellation(exc):
                with _finishing():
                    await self._on_call(call, after)
            raise
        finally:
            if entry is not None:
                entry.done()
        return decision

    async def _on_result(self, result: ToolResult, rest: Sequence[AnyWatch] | None = None) -> None:
        """Show ``result`` to each policy, in the agent's turn (``rest``: only
        those, when a cancelled delivery is finished within it)."""
        agent = result.agent
        if agent is None:
            return
        gated: _Entry | None = None
        if rest is None:
            entry = self._agents.get(id(agent))  # _watches, inlined on the hot path
            if entry is None:
                self._watches(agent)
                entry = self._agents[id(agent)]
            answered = self._answered
            key = (entry.key, result.call_id)
            delivery = result.delivery()
            known = answered.get(key)
            if known is not None and known[0] is entry and known[1] == delivery:
                return  # the same result delivered again: the policies saw it once
            answered[key] = (entry, delivery)
            if len(answered) >= 2 * DELIVERIES_KEPT:
                self._answered = trimmed(answered)
            watches: Sequence[AnyWatch] = entry.watches
            if entry.busy:
                gated = await self._turn(entry, self._on_result, result, watches)
            else:
                entry.busy = True
                gated = entry
        else:
            watches = rest
        fingerprints = self._fingerprints
        watch = None
        try:
            for watch in watches:
                try:
                    action = watch.on_result(result, fingerprints)
                except Exception:
                    _log.exception("guard.policy_failed", policy=watch.policy.name, hook="on_result", agent=agent.id)
                    continue
                if action is not None and _is_action(action, watch.policy, "on_result", agent):
                    if watch.policy.shadow:
                        action = msgspec.structs.replace(action, shadow=True)
                    await self._deliver(watch.policy, action, result)
        except BaseException as exc:
            after = watches[watches.index(watch) + 1 :] if watch is not None else ()
            if after and _cancellation(exc):
                with _finishing():
                    await self._on_result(result, after)
            raise
        finally:
            if gated is not None:
                gated.done()

    async def _on_user_message(self, message: UserMessage) -> None:
        agent = message.agent
        if agent is None:
            return
        # Creates the state: a policy may remember the message (rescue keeps
        # the task), and the first prompt arrives before any call.
        watches = self._watches(agent)
        gated = await self._turn(self._agents[id(agent)], self._show_message, watches, message)
        try:
            await self._show_message(watches, message)
        finally:
            if gated is not None:
                gated.done()

    @staticmethod
    async def _show_message(watches: list[AnyWatch], message: UserMessage) -> None:
        for watch in watches:
            try:
                watch.on_user_message(message)
            except Exception:
                agent = message.agent.id if message.agent else None
                _log.exception("guard.policy_failed", policy=watch.policy.name, hook="on_user_message", agent=agent)

    async def _on_status(self, status: AgentStatus) -> None:
        agent = status.agent
        if agent is None:
            return
        entry = self._agents.get(id(agent))
        if entry is None:
            return
        gated = await self._turn(entry, self._show_status, entry, status)
        try:
            await self._show_status(entry, status)
        finally:
            if gated is not None:
                gated.done()

    async def _show_status(self, entry: _Entry, status: AgentStatus) -> None:
        agent = status.agent.id if status.agent else None
        for watch in entry.watches:
            try:
                watch.on_status(status)
            except Exception:
                _log.exception("guard.policy_failed", policy=watch.policy.name, hook="on_status", agent=agent)
        if status.status == "disposed":
            self._agents.pop(entry.key, None)

    def _shown(self, name: str) -> str:
        """``name`` redacted, by a redactor made at the first action logged."""
        if self._redactor is None:
            from guard.redact import Redactor

            self._redactor = Redactor()
        return self._redactor(name)

    async def _deliver(self, policy: AnyPolicy, action: Action, trigger: Event) -> None:
        if self._action_log is not None:
            _log_action(self._action_log, action, self._shown)
        for listener in self._listeners:
            try:
                listener(action, trigger)
            except Exception:
                _log.exception("guard.listener_failed", listener=name_of(listener))
        bus = self._bus
        if bus is None or trigger.agent is None:
            return
        if not action.shadow and action.action not in _PUBLISHED:
            return  # a denial: the runtime publishes the result that carries it
        agent = trigger.agent
        delivering = self._delivering.set(self._within(agent))
        try:
            await self._publish(bus, policy, action, agent)
        finally:
            self._delivering.reset(delivering)

    def _within(self, agent: Agent) -> int | tuple[int, ...]:
        """The agents this task is in the turn of, ``agent`` added."""
        within = self._delivering.get()
        return id(agent) if within is None else (*_keys(within), id(agent))

    @staticmethod
    async def _publish(bus: Bus, policy: AnyPolicy, action: Action, agent: Agent) -> None:
        """An action's record on the bus: a reminder (or a shadow action) as
        a context message, a halt as a request."""
        if action.shadow:
            source = ContextSource(
                plugin=policy.plugin, form=SHADOW_FORM, summary=f"{action.action}: {action.tool} × {action.count}"
            )
            await bus.publish(ContextMessage(agent=agent, call_id=action.call_id, source=source, text=action.text))
        elif action.action == "remind":
            source = ContextSource(plugin=policy.plugin, summary=f"{action.tool} × {action.count}")
            await bus.publish(ContextMessage(agent=agent, call_id=action.call_id, source=source, text=action.text))
        else:  # a halt
            await bus.publish(AgentStatus(agent=agent, status="halt-requested", reason=action.text, by=policy.plugin))


def _policies(policies: Sequence[AnyPolicy]) -> list[AnyPolicy]:
    """``policies`` as a list, each checked to be a policy (a config section
    or a name given by mistake is named, not met later as a missing attribute)."""
    if isinstance(policies, str) or not isinstance(policies, Iterable):
        raise TypeError(f"Guard(policies=...) takes a list of policies, got {type(policies).__name__}")
    listed = list(policies)
    for policy in listed:
        if not all(hasattr(policy, attribute) for attribute in ("name", "plugin", "intercepts", "watch")):
            raise TypeError(
                f"Guard(policies=...) takes policies (build_policies(config) makes them), got {type(policy).__name__}"
            )
    return listed
