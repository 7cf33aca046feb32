"""The ``Guard``: per-agent state, bus wiring, and delivery of policy actions."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any
from weakref import WeakKeyDictionary

import structlog
from msgspec import UNSET

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
from guard.actions import DENYING, Action
from guard.config import Config
from guard.fingerprint import FingerprintCache
from guard.loops import LoopsPolicy
from guard.policy import AnyPolicy, AnyWatch
from guard.remind import RemindPolicy
from guard.rescue import RescuePolicy
from guard.turns import TurnsPolicy

__all__ = ["ActionListener", "Guard", "build_policies"]

ActionListener = Callable[[Action, Event], None]
"""Told of every action with the event that triggered it (replay uses this)."""

_log = structlog.get_logger("guard")


class _ActionLog:
    """The logger for action events, bound once per structlog configuration.

    structlog's lazy proxy binds a fresh logger on every call (about 2.5 µs,
    paid on every action); this one rebinds only when ``structlog.configure``
    changed what a logger is made of, so the guard still follows a
    reconfiguration (and ``structlog.testing.capture_logs``, which edits the
    processor list in place).
    """

    __slots__ = ("_bound", "_made_of")

    def __init__(self) -> None:
        self._made_of: tuple[Any, ...] = ()
        self._bound: Any = None

    def info(self, event: str, **fields: Any) -> None:
        config = structlog.get_config()
        made_of = self._made_of
        if (
            not made_of
            or made_of[0] is not config["processors"]
            or made_of[1] is not config["wrapper_class"]
            or made_of[2] is not config["logger_factory"]
            or made_of[3] is not config["context_class"]
        ):
            self._bound = structlog.get_logger("guard").bind()
            self._made_of = (
                config["processors"],
                config["wrapper_class"],
                config["logger_factory"],
                config["context_class"],
            )
        self._bound.info(event, **fields)


def build_policies(config: Config) -> list[AnyPolicy]:
    """The enabled policies, in the order they are consulted (``turns`` at
    threshold 0 is off)."""
    policies: list[AnyPolicy] = []
    if config.remind.enabled:
        policies.append(RemindPolicy(config.remind))
    if config.turns.enabled and config.turns.threshold > 0:
        policies.append(TurnsPolicy(config.turns))
    if config.rescue.enabled:
        policies.append(RescuePolicy(config.rescue))
    if config.loops.enabled:
        policies.append(LoopsPolicy(config.loops))
    return policies


class Guard:
    """Watches each agent's tool calls on a bus and acts on loops.

    State is kept per live agent in a ``WeakKeyDictionary``, in memory only:
    it disappears with the agent handle, on its ``disposed`` status, and
    never crosses agents. Events without an agent are ignored. ``config`` runs
    as given: the environment's overrides (``apply_environment``) belong to
    the edges that start a live guard (the adapters, the ``hook`` command),
    so a replay of a log depends on nothing but the log and the config.

    The policies are those ``config`` enables, or exactly ``policies`` when
    given (your own ``Policy`` subclasses, say). A policy or listener that
    raises is logged and skipped; the others still run.
    """

    def __init__(
        self,
        config: Config | None = None,
        *,
        on_action: ActionListener | None = None,
        policies: Sequence[AnyPolicy] | None = None,
    ) -> None:
        self.config = config if config is not None else Config()
        self.policies = list(policies) if policies is not None else build_policies(self.config)
        self._interceptors = [index for index, policy in enumerate(self.policies) if policy.intercepts]
        self._plugins = frozenset(policy.plugin for policy in self.policies)
        self._agents: WeakKeyDictionary[Agent, list[AnyWatch]] = WeakKeyDictionary()
        self._fingerprints = FingerprintCache()
        self._listeners: list[ActionListener] = [on_action] if on_action is not None else []
        self._bus: Bus | None = None
        self._action_log = _ActionLog()
        # One bound method, so ``Bus.unintercept`` (an identity match) finds it.
        self._interceptor = self._on_call

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

    def _watches(self, agent: Agent) -> list[AnyWatch]:
        watches = self._agents.get(agent)
        if watches is None:
            watches = self._agents[agent] = [p.watch() for p in self.policies]
        return watches

    async def _on_call(self, call: ToolCall) -> Decision | None:
        agent = call.agent
        if agent is None:
            return None
        decision: Decision | None = None
        watches = self._watches(agent)
        for index in self._interceptors:
            watch = watches[index]
            policy = watch.policy
            try:
                action = await watch.on_call(call, self._fingerprints)
            except Exception:
                _log.exception("guard.policy_failed", policy=policy.name, hook="on_call", agent=agent.id)
                continue
            if action is None:
                continue
            await self._deliver(policy, action, call)
            if decision is None and action.action in DENYING:
                decision = Decision.deny(action.text, policy.plugin, advice=action.advice)
        return decision

    async def _on_result(self, result: ToolResult) -> None:
        agent = result.agent
        if agent is None:
            return
        watches = self._agents.get(agent)  # _watches, inlined on the hot path
        if watches is None:
            watches = self._watches(agent)
        fingerprints = self._fingerprints
        for watch in watches:
            try:
                action = watch.on_result(result, fingerprints)
            except Exception:
                _log.exception("guard.policy_failed", policy=watch.policy.name, hook="on_result", agent=agent.id)
                continue
            if action is not None:
                await self._deliver(watch.policy, action, result)

    async def _on_user_message(self, message: UserMessage) -> None:
        agent = message.agent
        if agent is None:
            return
        # Creates the state: a policy may remember the message (rescue keeps
        # the task), and the first prompt arrives before any call.
        for watch in self._watches(agent):
            try:
                watch.on_user_message(message)
            except Exception:
                _log.exception("guard.policy_failed", policy=watch.policy.name, hook="on_user_message", agent=agent.id)

    async def _on_status(self, status: AgentStatus) -> None:
        agent = status.agent
        if agent is None:
            return
        watches = self._agents.get(agent)
        if watches is None:
            return
        for watch in watches:
            try:
                watch.on_status(status)
            except Exception:
                _log.exception("guard.policy_failed", policy=watch.policy.name, hook="on_status", agent=agent.id)
        if status.status == "disposed":
            self._agents.pop(agent, None)

    async def _deliver(self, policy: AnyPolicy, action: Action, trigger: Event) -> None:
        self._action_log.info(
            f"guard.{action.action}",
            policy=action.policy,
            agent=action.agent,
            tool=action.tool,
            count=action.count,
            threshold=action.threshold,
        )
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
            await bus.publish(
                AgentStatus(agent=trigger.agent, status="halt-requested", reason=action.text, by=policy.plugin)
            )
