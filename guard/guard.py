"""The ``Guard``: per-agent state, bus wiring, and delivery of policy actions."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

from bus import (
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
from bus._logging import LazyLogger
from guard.actions import DENYING, Action
from guard.config import Config, apply_environment
from guard.fingerprint import FingerprintCache
from guard.policy import Policy
from guard.remind import RemindPolicy
from guard.rescue import RescuePolicy
from guard.turns import TurnsPolicy

__all__ = ["GUARD_PLUGINS", "ActionListener", "Guard", "build_policies"]

ActionListener = Callable[[Action, Event], None]
"""Told of every action with the event that triggered it (replay uses this)."""

_log = LazyLogger("guard")


class _ActionLog:
    """The structlog logger for action events, bound once per structlog
    configuration, and skipped whole while that configuration filters out
    ``info``.

    structlog's lazy proxy binds a fresh logger on every call (about 2.5 µs,
    paid on every action); this one rebinds only when ``structlog.configure``
    changed what a logger is made of, so the guard still follows a
    reconfiguration (and ``structlog.testing.capture_logs``, which edits the
    processor list in place). structlog itself is imported on the first action.
    """

    __slots__ = ("_bound", "_enabled", "_made_of")

    def __init__(self) -> None:
        self._made_of: tuple[Any, ...] = ()
        self._bound: Any = None
        self._enabled = True

    def _current(self) -> bool:
        """Rebind if structlog was reconfigured; whether ``info`` gets through."""
        import logging

        import structlog

        config = structlog.get_config()
        made_of = self._made_of
        if (
            not made_of
            or made_of[0] is not config["processors"]
            or made_of[1] is not config["wrapper_class"]
            or made_of[2] is not config["logger_factory"]
            or made_of[3] is not config["context_class"]
        ):
            bound = self._bound = structlog.get_logger("guard").bind()
            # Asked of the class: a generic BoundLogger proxies any attribute,
            # and would log a call of one it lacks.
            knows_level = callable(getattr(type(bound), "is_enabled_for", None))
            self._enabled = bound.is_enabled_for(logging.INFO) if knows_level else True
            self._made_of = (
                config["processors"],
                config["wrapper_class"],
                config["logger_factory"],
                config["context_class"],
            )
        return self._enabled

    def action(self, action: Action) -> None:
        if self._current():
            self._bound.info(
                f"guard.{action.action}",
                policy=action.policy,
                agent=action.agent,
                tool=action.tool,
                count=action.count,
                threshold=action.threshold,
            )


GUARD_PLUGINS: frozenset[str] = frozenset({RemindPolicy.plugin, TurnsPolicy.plugin, RescuePolicy.plugin})
"""Every plugin name a policy of this package writes, enabled or not: replay
withholds their recorded messages and regenerates them."""


def build_policies(config: Config) -> list[Policy]:
    """The enabled policies, in the order they are consulted (``turns`` at
    threshold 0 is off)."""
    policies: list[Policy] = []
    if config.remind.enabled:
        policies.append(RemindPolicy(config.remind))
    if config.turns.enabled and config.turns.threshold > 0:
        policies.append(TurnsPolicy(config.turns))
    if config.rescue.enabled:
        policies.append(RescuePolicy(config.rescue))
    return policies


class Guard:
    """Watches each agent's tool calls on a bus and acts on loops.

    State is kept per live agent, in memory only, keyed on the handle's
    identity and held through a weak reference: it disappears with the agent
    handle, on its ``disposed`` status, and never crosses agents. Events without an agent are ignored. The
    environment's overrides are applied to ``config`` here
    (``apply_environment``), so ``guard.config`` is what actually runs.

    The policies are those ``config`` enables, or exactly ``policies`` when
    given (your own ``Policy`` subclasses, say). A policy or listener that
    raises is logged and skipped; the others still run. Every action is
    logged through structlog (``guard.remind``, ...) unless ``log_actions`` is
    false; listeners hear of it either way.
    """

    def __init__(
        self,
        config: Config | None = None,
        *,
        on_action: ActionListener | None = None,
        policies: Sequence[Policy] | None = None,
        log_actions: bool = True,
    ) -> None:
        self.config = apply_environment(config if config is not None else Config())
        self.policies = list(policies) if policies is not None else build_policies(self.config)
        self._interceptors = [
            (index, policy) for index, policy in enumerate(self.policies) if type(policy).on_call is not Policy.on_call
        ]
        # id(handle) -> (a weak reference whose callback drops the entry, the
        # policies' states): a plain dict lookup on the hot path.
        self._agents: dict[int, tuple[weakref.ref[Agent], list[Any]]] = {}
        self._fingerprints = FingerprintCache()
        self._listeners: list[ActionListener] = [on_action] if on_action is not None else []
        self._bus: Bus | None = None
        self._action_log = _ActionLog() if log_actions else None
        # One bound method, so ``Bus.unintercept`` (an identity match) finds it.
        self._interceptor = self._on_call

    @property
    def plugins(self) -> frozenset[str]:
        """The plugin names this guard's messages and denials carry."""
        return frozenset(p.plugin for p in self.policies)

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
        self._bus = None

    def agent_count(self) -> int:
        """How many agents currently have state."""
        return len(self._agents)

    def states(self, agent: Agent) -> list[Any] | None:
        """The policies' states for ``agent`` (one per policy, in order), or
        ``None`` before its first event: what a process that answers one hook
        at a time saves, to ``restore`` them in the next."""
        entry = self._agents.get(id(agent))
        return entry[1] if entry is not None else None

    def restore(self, agent: Agent, states: list[Any]) -> None:
        """Give ``agent`` the ``states`` an earlier guard with the same
        policies had for it (see ``states``)."""
        if len(states) != len(self.policies):
            raise ValueError(f"{len(states)} states for {len(self.policies)} policies")
        self._track(agent, states)

    def _track(self, agent: Agent, states: list[Any]) -> list[Any]:
        key = id(agent)
        agents = self._agents
        # The callback runs when the handle is collected, before its id can
        # be reused; it holds the dict, not the guard.
        agents[key] = (weakref.ref(agent, lambda _, key=key, agents=agents: agents.pop(key, None)), states)  # type: ignore[misc]
        return states

    def _states(self, agent: Agent) -> list[Any]:
        entry = self._agents.get(id(agent))
        if entry is None:
            return self._track(agent, [p.new_state() for p in self.policies])
        return entry[1]

    async def _on_call(self, call: ToolCall) -> Decision | None:
        agent = call.agent
        if agent is None:
            return None
        states = self._states(agent)
        decision: Decision | None = None
        for index, policy in self._interceptors:
            try:
                action = await policy.on_call(states[index], call, self._fingerprints)
            except Exception:
                _log.exception("guard.policy_failed", policy=policy.name, hook="on_call", agent=agent.id)
                continue
            if action is None:
                continue
            await self._deliver(policy, action, call)
            if decision is None and action.action in DENYING:
                decision = Decision.deny(action.text, policy.plugin)
        return decision

    async def _on_result(self, result: ToolResult) -> None:
        agent = result.agent
        if agent is None:
            return
        entry = self._agents.get(id(agent))  # _states, inlined on the hot path
        states = entry[1] if entry is not None else self._states(agent)
        fingerprints = self._fingerprints
        for policy, state in zip(self.policies, states, strict=True):
            try:
                action = policy.on_result(state, result, fingerprints)
            except Exception:
                _log.exception("guard.policy_failed", policy=policy.name, hook="on_result", agent=agent.id)
                continue
            if action is not None:
                await self._deliver(policy, action, result)

    async def _on_user_message(self, message: UserMessage) -> None:
        agent = message.agent
        if agent is None:
            return
        # Creates the state: a policy may remember the message (rescue keeps
        # the task), and the first prompt arrives before any call.
        states = self._states(agent)
        for policy, state in zip(self.policies, states, strict=True):
            try:
                policy.on_user_message(state, message)
            except Exception:
                _log.exception("guard.policy_failed", policy=policy.name, hook="on_user_message", agent=agent.id)

    async def _on_status(self, status: AgentStatus) -> None:
        agent = status.agent
        if agent is None:
            return
        entry = self._agents.get(id(agent))
        if entry is None:
            return
        states = entry[1]
        for policy, state in zip(self.policies, states, strict=True):
            try:
                policy.on_status(state, status)
            except Exception:
                _log.exception("guard.policy_failed", policy=policy.name, hook="on_status", agent=agent.id)
        if status.status == "disposed":
            self._agents.pop(id(agent), None)

    async def _deliver(self, policy: Policy, action: Action, trigger: Event) -> None:
        if self._action_log is not None:
            self._action_log.action(action)
        for listener in self._listeners:
            try:
                listener(action, trigger)
            except Exception:
                _log.exception("guard.listener_failed", listener=getattr(listener, "__qualname__", repr(listener)))
        bus = self._bus
        if bus is None:
            return
        if action.action == "remind":
            source = ContextSource(plugin=policy.plugin, summary=f"{action.tool} × {action.count}")
            await bus.publish(
                ContextMessage(agent=trigger.agent, call_id=action.call_id, source=source, text=action.text)
            )
        elif action.action == "halt":
            await bus.publish(AgentStatus(agent=trigger.agent, status="halt-requested", reason=action.text))
