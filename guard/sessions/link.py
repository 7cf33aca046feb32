"""What every adapter does with the bus, whatever the runtime.

A runtime adapter maps its own seams (a hook, a middleware, a plugin) onto
``GuardLink`` and ``AgentLink``; this module owns the bus side: agent
handles, step numbers, publishing calls and results, and collecting the
guard's context messages and halt requests for the agent they belong to.
"""

from __future__ import annotations

import contextvars
import itertools
import os
import sys
import weakref
from typing import Any

import msgspec

from bus import (
    ALLOW,
    Agent,
    AgentStatus,
    Bus,
    ContextMessage,
    Decision,
    Event,
    SessionLog,
    ToolCall,
    ToolResult,
    UserMessage,
)
from bus._codec import as_logged, encoded
from bus._logging import LazyLogger
from guard._regex import lazy_compile
from guard.actions import SHADOW_FORM
from guard.config import Config, apply_environment
from guard.guard import Guard
from guard.sessions.answer import Answer, KeptAnswer
from guard.sessions.live import LiveTable

_log = LazyLogger("guard")

__all__ = [
    "ANSWERS_KEPT",
    "CANCELLED",
    "REMINDER_PREFIX",
    "AgentLink",
    "GuardLink",
    "HaltRequested",
    "LinkState",
    "UserTurns",
    "as_text",
    "parse_args",
]

ANSWERS_KEPT = 1024
"""How many answers a link keeps for copies of the events that asked them."""

OPEN_CALLS_KEPT = 4096
"""How many of an agent's calls a link keeps open for their results: more
in flight at once is a runtime whose results never come, not a real agent."""

PAUSED_KEPT = 4096
"""How many calls waiting on a human (an interrupt, a confirmation) an
adapter remembers, to tell their resumed run from a new call; the oldest go first."""

CANCELLED = "cancelled: the tool was stopped before it answered"
"""The result of a call whose tool was stopped (its run cancelled, its
client gone): an error, which the policies read as a cancelled call."""

REMINDER_PREFIX = "[repeat-tool-guard] "
"""How a guard message starts where a runtime can only show it as user or tool
text (no system role there): the model, and anyone reading the transcript,
can tell it from the user's own words."""


class HaltRequested(RuntimeError):
    """Raised where a runtime has no quieter way to end a run: the guard asked
    to halt agent ``agent_id`` for ``reason``."""

    def __init__(self, agent_id: str, reason: str) -> None:
        self.agent_id = agent_id
        self.reason = reason
        super().__init__(f"repeat-tool-guard halted agent {agent_id!r}: {reason}")


class LinkState:
    """Where one agent stands in its session, as a restore carries it over
    (from a session log, a snapshot, another process's events): its handle,
    step (and whether the runtime reported that step over, and whether it
    reports steps at all), the halt request not yet ended by a user message,
    and the calls that still wait for their result, by call id; ``twins``,
    the open calls made under one call id (``<id>@<n>``) by that id, in the
    order made (``None`` when the source does not know them: a session log).
    """

    __slots__ = ("agent", "calls", "halt_reason", "step", "step_done", "steps_reported", "twins")

    def __init__(
        self,
        agent: Agent,
        step: int = 0,
        step_done: bool = False,
        steps_reported: bool = False,
        halt_reason: str | None = None,
        calls: dict[str, ToolCall] | None = None,
        twins: dict[str, list[str]] | None = None,
    ) -> None:
        self.agent = agent
        self.step = step
        self.step_done = step_done
        self.steps_reported = steps_reported
        self.halt_reason = halt_reason
        self.calls = calls if calls is not None else {}
        self.twins = twins


class GuardLink:
    """One bus shared by the agents of one runtime, with their ``AgentLink``s.

    Pass a ``bus`` you built (and attached your own ``Guard`` and logs to),
    or let the link build one with a ``Guard(config)`` attached (the
    environment's overrides applied: ``apply_environment``) and, with
    ``log``, a ``SessionLog`` at that path (``self.log``). A log that exists
    already is continued (a resume header, then this run's events), so the
    same program can run again; ``append=False`` refuses it instead. A link
    that builds its guard also exports its actions to OpenTelemetry when the
    ``OTEL_*`` variables ask for it (``guard.telemetry``), labelled ``runtime``.
    ``close()`` closes the log. Context messages and halt requests the bus
    carries are routed to the link of the agent they name.
    """

    def __init__(
        self,
        bus: Bus | None = None,
        *,
        config: Config | None = None,
        log: str | os.PathLike[str] | None = None,
        append: bool = True,
        runtime: str = "python",
    ) -> None:
        if bus is not None and not isinstance(bus, Bus):
            hint = " (pass a Config as config=...)" if isinstance(bus, Config) else ""
            raise TypeError(f"GuardLink(bus) takes a bus.Bus, got {type(bus).__name__}{hint}")
        self.log: SessionLog | None = None
        if bus is None:
            bus = Bus()
            guard = Guard(apply_environment(config if config is not None else Config())).attach(bus)
            if log is not None:
                self.log = SessionLog(log, append=append).attach(bus)
            _export(guard, bus, runtime, self.log.session if self.log is not None else None)
        elif config is not None or log is not None:
            raise ValueError("pass either your own bus (with its Guard attached) or config/log, not both")
        self.bus = bus
        self._links: dict[Agent, AgentLink] = {}
        self.answers: LiveTable[str, KeptAnswer] = LiveTable(ANSWERS_KEPT)
        """Answers the hook routes gave, kept for copies of the events that
        asked them (a hook delivered twice): a copy gets its answer again
        and is not recorded twice. A denied call's is kept under its
        ``retry_key("tool/call", ...)``, a result's under its
        ``retry_key("tool/result", ...)``. A restore brings the latest back:
        the command hook's snapshot carries them, and a rebuild from the
        record (``guard.sessions.resume``) makes them again."""
        bus.record(self._route)

    def close(self) -> None:
        """Close the session log the link opened (if any); harmless twice."""
        if self.log is not None:
            self.log.close()

    def agent(self, agent_id: str, *, parent: AgentLink | None = None) -> AgentLink:
        """A new live agent; publish its start with ``await link.start()``.
        An id another live agent of this link has is suffixed (``mcp-client``,
        ``mcp-client-2``): the session log names agents by id, so two live
        agents under one id would read back as one, and replay would count
        their calls together."""
        live = {handle.id for handle in self._links}
        if agent_id in live:
            agent_id = next(f"{agent_id}-{n}" for n in itertools.count(2) if f"{agent_id}-{n}" not in live)
        handle = Agent(agent_id, parent_id=parent.agent.id if parent is not None else None)
        link = self._links[handle] = AgentLink(self, handle)
        return link

    def adopt(self, agent: Agent) -> AgentLink:
        """A link for an existing handle (one restored from a session log),
        without publishing a start: the agent is already live."""
        link = self._links[agent] = AgentLink(self, agent)
        return link

    def links(self) -> list[AgentLink]:
        """The live agents, oldest first."""
        return list(self._links.values())

    def _forget(self, agent: Agent) -> None:
        self._links.pop(agent, None)

    def _route(self, event: Event) -> None:
        agent = event.agent
        if agent is None:
            return
        kind = type(event)
        if kind is ContextMessage and event.source.form == SHADOW_FORM:  # type: ignore[attr-defined]
            return  # a shadow action's record: never shown to the model
        if kind is ContextMessage or (kind is AgentStatus and event.status == "halt-requested"):  # type: ignore[attr-defined]
            link = self._links.get(agent)
            if link is not None:
                link._receive(event)


def adapter_link(link: GuardLink | None, config: Config | None, runtime: str, bus: Bus | None = None) -> GuardLink:
    """The link an adapter runs on: ``link`` as given, or a new one for
    ``config`` (or ``bus``) labelled ``runtime``. A ``link`` that is no
    ``GuardLink`` (a ``Config`` passed where the link goes) is a
    ``TypeError`` naming it, before any agent runs."""
    if link is None:
        return GuardLink(bus, config=config, runtime=runtime)
    if not isinstance(link, GuardLink):
        if isinstance(link, Config):
            hint = " (pass a Config as config=...)"
        else:
            hint = " (wrap it: GuardLink(bus))" if isinstance(link, Bus) else ""
        raise TypeError(f"link must be a guard.adapters.GuardLink, got {type(link).__name__}{hint}")
    if config is not None or bus is not None:
        raise ValueError("pass either a GuardLink or config/bus, not both")
    return link


_PLAIN = msgspec.json.Encoder()
"""Plain JSON, refusing what JSON cannot carry (``as_text`` then tries ``repr``)."""

_TASKS: contextvars.ContextVar[tuple[tuple[object, object], ...]] = contextvars.ContextVar(
    "repeat_tool_guard_tasks", default=()
)
"""The tasks that published calls from this context, outermost first, each
with a token compared by identity (``AgentLink._close``): a task a runtime
starts for a parallel call adds its own token when it publishes, and a task
started from it (to run the tool, which may publish calls of a subagent in
turn) inherits the chain, so each call's outcome, given there, answers it."""

_TASKS_KEPT = 8
"""Tokens a context keeps: the innermost tasks'."""


def _running_task() -> object | None:
    """The asyncio or trio task running now; ``None`` outside one (the
    command hook). Neither library is imported for it."""
    # try/except rather than contextlib.suppress: this runs for every call an adapter publishes
    asyncio = sys.modules.get("asyncio")
    if asyncio is not None:
        try:
            task: object | None = asyncio.current_task()
        except RuntimeError:  # no asyncio loop running here
            task = None
        if task is not None:
            return task
    trio = sys.modules.get("trio")
    if trio is None:
        return None
    try:
        return trio.lowlevel.current_task()  # type: ignore[no-any-return]
    except RuntimeError:
        return None


class AgentLink:
    """One live agent on a ``GuardLink``'s bus.

    ``step`` numbers the agent's model responses: call ``begin_step`` when a
    new response arrives. A runtime that reports where a response ends
    instead (after its tool calls ran) calls ``end_step``: ``step_done`` is
    then set until the next ``begin_step``, and ``steps_reported`` stays set.
    ``call`` asks the bus whether a tool may run;
    ``result`` publishes what it returned, ``denied`` the denial the model
    read, ``failed`` a tool that raised, ``cancelled`` one stopped before it
    answered; an outcome for a call not open under its id is dropped and logged once
    for the agent, never raised into the runtime.
    The guard's context messages wait in ``pending`` until the adapter takes
    them with ``take_context`` and shows them to the model; ``halt_reason`` is
    set once the guard asks to halt this agent, until the next user message.
    """

    def __init__(self, link: GuardLink, agent: Agent) -> None:
        self.agent = agent
        self.step = 0
        self.step_done = False
        self.steps_reported = False
        self.halt_reason: str | None = None
        self.pending: list[ContextMessage] = []
        self._link = link
        self._calls: dict[str, ToolCall] = {}
        self._twins: dict[str, list[str]] = {}
        # the task each open call was published in (``_TASKS``): a runtime that runs parallel calls
        # in tasks of their own closes each in its task, whatever the order
        self._makers: dict[str, object] = {}
        self._dropped = False

    @property
    def bus(self) -> Bus:
        return self._link.bus

    async def _publish(self, event: Event) -> None:
        """Publish ``event``; a bus that cannot (a clock with no reading, an
        event it refuses) is logged, and the agent's work goes on: a fault of
        the guard never breaks a tool call."""
        try:
            await self.bus.publish(event)
        except Exception:
            _log.exception("guard.publish_failed", agent=self.agent.id, event_type=type(event).__name__)

    async def start(self) -> None:
        await self._publish(AgentStatus(agent=self.agent, status="started", parent=self.agent.parent_id))

    async def dispose(self) -> None:
        """The agent is gone: the guard drops its state, the link forgets it."""
        await self._publish(AgentStatus(agent=self.agent, status="disposed"))
        self._link._forget(self.agent)

    def begin_step(self) -> int:
        """A new model response: later calls share its step number."""
        self.step += 1
        self.step_done = False
        return self.step

    async def end_step(self) -> None:
        """The runtime says the current model response is over (its tool calls
        all answered): publish ``agent/status`` ``step-done``, so the boundary
        is in the log too, for a process that rebuilds the agent from it."""
        self.step_done = self.steps_reported = True
        await self._publish(AgentStatus(agent=self.agent, status="step-done"))

    async def idle(self) -> None:
        """The agent stopped: its last response called no tool (``agent/status`` ``idle``)."""
        self.step_done = True
        await self._publish(AgentStatus(agent=self.agent, status="idle"))

    async def user_message(self, text: str) -> None:
        """A genuine user turn: the guard resets, a halt request is over, and
        a message still pending from before it is dropped (it was about the
        work the user has now moved on from)."""
        self.halt_reason = None
        self.pending.clear()
        await self._publish(UserMessage(agent=self.agent, text=text))

    async def call(
        self, call_id: str, tool: str, args: Any, *, hints: dict[str, bool] | None = None, late: bool = False
    ) -> Decision:
        """Publish the call and return the bus's decision; on a deny the
        adapter must not run the tool, and should publish ``denied``.
        ``hints`` are the tool's annotations where the runtime declares them
        (MCP's ``readOnlyHint``, ...), carried on the ``tool/call``. ``late``
        marks a call the runtime reported only with its result: the tool
        ran, and the decision is always allow.

        A ``call_id`` that names a call still open (some endpoints give every
        call of a response one id) is published as ``<id>@<n>``, and the
        results for that id answer its open calls in the order they were
        made; where each call runs in a task of its own (a runtime running
        parallel calls concurrently), its result and denial, given in that
        task, answer the call the task made, whichever finishes first."""
        if self.step == 0:
            self.step = 1
        calls = self._calls
        published = call_id
        if call_id in calls:
            twins = self._twins.setdefault(call_id, [call_id])
            number = _next_twin_number(call_id, twins)
            while f"{call_id}@{number}" in calls:
                number += 1
            published = f"{call_id}@{number}"
            twins.append(published)
        elif call_id in self._twins:  # its earlier namesakes still open: answered after them
            self._twins[call_id].append(call_id)
        tasks = _TASKS.get()
        running = _running_task()
        if not tasks or tasks[-1][0] is not running:
            tasks = (*tasks[-_TASKS_KEPT + 1 :], (running, object()))
            _TASKS.set(tasks)
        self._makers[published] = tasks[-1][1]
        call = ToolCall(
            agent=self.agent,
            call_id=published,
            step=self.step,
            tool=tool,
            args=args,
            hints=hints if hints else msgspec.UNSET,
            late=True if late else msgspec.UNSET,
        )
        calls[published] = call
        if len(calls) > OPEN_CALLS_KEPT:  # results that never came (a runtime that reports none): the oldest go
            self._forget_oldest()
        try:
            return await self.bus.decide(call)
        except Exception:  # as _publish: the call is allowed, as it would be without a guard
            _log.exception("guard.publish_failed", agent=self.agent.id, event_type="ToolCall")
            return ALLOW

    async def result(self, call_id: str, content: str, *, is_error: bool = False) -> None:
        """Publish what the tool returned; the guard's messages for it land in ``pending``."""
        call = self._close(call_id)
        if call is not None:
            await self._publish(ToolResult.answering(call, content, is_error=is_error))

    async def failed(self, call_id: str, exc: BaseException) -> None:
        """Publish the outcome of a tool that raised ``exc`` instead of
        answering, so its call is not left open (where the next result under
        its id would answer it): an error result with the exception's text
        (its type's name where it has none, or none that can be read), or
        ``CANCELLED`` for a cancellation (the run cancelled, a timeout, Ctrl-C),
        published shielded from the cancellation under way."""
        if isinstance(exc, Exception):
            await self.result(call_id, _failure_text(exc), is_error=True)
        else:
            await self.cancelled(call_id)

    async def cancelled(self, call_id: str) -> None:
        """Publish that the call's tool was stopped before it answered (or
        never ran: the user said no): ``CANCELLED``, an error, published
        shielded from a cancellation under way."""
        import anyio  # an adapter's event loop runs anyio's backends; a command hook never gets here

        with anyio.CancelScope(shield=True):
            await self.result(call_id, CANCELLED, is_error=True)

    async def denied(self, call_id: str, decision: Decision) -> None:
        """Publish the denial as the call's result: the model reads ``decision.reason``."""
        call = self._close(call_id, latest=True)
        if call is not None:
            await self._publish(ToolResult.denial(call, decision))

    def _forget_oldest(self) -> None:
        """Forget the oldest open call (its result never came), and its name
        among its id's twins: the oldest open call under that id is the first
        of them (names join the list in the order made, and leave it only
        from its ends), so this takes no scan, and the twins hold no more
        names than there are open calls. A name is the twin of its own id, or
        of the id before its last ``@`` (``<id>@<n>``); where both hold it (a
        runtime's own id that is a twin's name) both forget it."""
        calls = self._calls
        gone = next(iter(calls))
        del calls[gone]
        self._makers.pop(gone, None)
        twins = self._twins
        for call_id in (gone, gone.rpartition("@")[0]):
            namesakes = twins.get(call_id)
            if namesakes is None:
                continue
            while namesakes and namesakes[0] not in calls:  # ``gone``, and any name closed elsewhere
                del namesakes[0]
            if not namesakes:
                del twins[call_id]

    def _close(self, call_id: str, *, latest: bool = False) -> ToolCall | None:
        """The open call ``call_id`` names, closed: its oldest (a result), or
        its latest (a denial, which answers the call just made). ``None``
        when no call is open under it (never published, answered already, or
        forgotten, ``OPEN_CALLS_KEPT``): the outcome is dropped, logged once
        for the agent, and the tool call goes on as if there were no guard.
        Where steps are inferred (not reported), the agent's newest call
        closed while older ones stay open ends the step: a runtime asks the
        model again only once a response's calls are done, so an older call
        still open is one it never ran (another hook or the user refused
        it), and it must not hold every later call in its step. A restore
        infers the same (``guard.sessions.resume``)."""
        published = call_id
        twins = self._twins.get(call_id)
        if twins:
            makers = self._makers
            for _, token in reversed(_TASKS.get()):  # the innermost task that made some of them, not all
                mine = [name for name in twins if makers.get(name) is token]
                if mine and len(mine) < len(twins):
                    published = mine[-1 if latest else 0]
                    twins.remove(published)
                    break
            else:
                published = twins.pop(-1 if latest else 0)
            if not twins:
                del self._twins[call_id]
        newest = next(reversed(self._calls), None)
        call = self._calls.pop(published, None)
        self._makers.pop(published, None)
        if published == newest and self._calls and not self.steps_reported:
            self.step_done = True
        if call is None and not self._dropped:
            self._dropped = True
            _log.error(
                "guard.unknown_call",
                agent=self.agent.id,
                call_id=call_id,
                reason="no tool call open under this id (publish it with call() first): its outcome is not recorded;"
                " later ones of this agent are not logged",
            )
        return call

    def state(self) -> LinkState:
        """Where this agent stands (a copy: later events do not change it)."""
        return LinkState(
            self.agent,
            self.step,
            self.step_done,
            self.steps_reported,
            self.halt_reason,
            dict(self._calls),
            _copied(self._twins),
        )

    def restore(self, state: LinkState) -> None:
        """Stand where ``state`` says (an agent restored from elsewhere)."""
        self.step = state.step
        self.step_done = state.step_done
        self.steps_reported = state.steps_reported
        self.halt_reason = state.halt_reason
        self._calls = dict(state.calls)
        self._twins = _copied(state.twins) if state.twins is not None else _twins_of(self._calls)
        self._makers = {}  # made elsewhere: their twins are answered in the order made

    def has_call(self, call_id: str) -> bool:
        return call_id in self._calls or call_id in self._twins

    def running(self, call_id: str) -> ToolCall | None:
        """The published call ``call_id`` if it still waits for its result."""
        return self._calls.get(call_id)

    def running_namesakes(self, call_id: str) -> list[ToolCall]:
        """The calls made under ``call_id`` that still wait for their result:
        the call itself and its ``<id>@<n>`` twins, oldest first."""
        twin = f"{call_id}@"
        return [
            call
            for published, call in self._calls.items()
            if published == call_id or (published.startswith(twin) and published[len(twin) :].isdigit())
        ]

    def calls_in_flight(self) -> list[ToolCall]:
        """The published calls that still wait for their result, oldest first."""
        return list(self._calls.values())

    def open_calls(self) -> int:
        """How many published calls still wait for their result."""
        return len(self._calls)

    def take_context(self, call_id: str | None = None) -> list[str]:
        """Texts of the pending context messages (for ``call_id`` only, if
        given), removed from ``pending``: the adapter now owes them to the model."""
        return [message.text for message in self.take_messages(call_id)]

    def take_messages(self, call_id: str | None = None) -> list[ContextMessage]:
        """Like ``take_context``, but the messages themselves (with their call ids)."""
        taken: list[ContextMessage] = []
        kept: list[ContextMessage] = []
        for message in self.pending:
            if call_id is None or message.call_id == call_id:
                taken.append(message)
            else:
                kept.append(message)
        self.pending = kept
        return taken

    def answer(self, seq: int, decision: Decision | None = None, call_id: str | None = None) -> Answer:
        """The guard's answer at the event numbered ``seq``: ``decision`` if
        it was a call, the pending context messages (for ``call_id`` only,
        if given) taken, and the halt reason if a halt is requested."""
        return Answer(seq=seq, decision=decision, messages=tuple(self.take_messages(call_id)), halt=self.halt_reason)

    def _receive(self, event: Event) -> None:
        if type(event) is ContextMessage:
            self.pending.append(event)
        else:
            self.halt_reason = event.reason or "the guard requested a halt"  # type: ignore[attr-defined]


class UserTurns:
    """A conversation's latest user message, and which of its agents it has
    reached. The entry agent gets it at once (``begin``); another agent that
    works for it (a handoff's or transfer's target, a pipeline's worker)
    gets it when it starts working after it (``reach``), once: its repeats
    from earlier turns are not repeats of this one, and a halt it was under
    is over. Agents are held weakly: a disposed one is forgotten."""

    __slots__ = ("_number", "_reached", "_text")

    def __init__(self) -> None:
        self._number = 0
        self._text: str | None = None
        self._reached: weakref.WeakKeyDictionary[AgentLink, int] = weakref.WeakKeyDictionary()

    async def begin(self, text: str, agent: AgentLink | None) -> None:
        """The user said ``text`` to ``agent`` (``None``: to no agent yet, as to a
        workflow, whose agents get it as they start working): a new turn."""
        self._number += 1
        self._text = text
        if agent is not None:
            await self.reach(agent)

    async def reach(self, agent: AgentLink) -> None:
        """``agent`` works in the current turn: its user message, if it has not had it."""
        if self._text is not None and self._reached.get(agent) != self._number:
            self._reached[agent] = self._number
            await agent.user_message(self._text)


def _export(guard: Guard, bus: Bus, runtime: str, session_id: str | None) -> None:
    """Export ``guard``'s actions as the environment asks; a request the
    installed packages cannot serve is logged, never raised into the runtime."""
    from guard.telemetry import TelemetryUnavailable, telemetry_from_environment

    try:
        telemetry = telemetry_from_environment(runtime=runtime, session_id=session_id, in_process=True)
    except TelemetryUnavailable as exc:
        _log.warning("guard.telemetry_unavailable", reason=str(exc))
        return
    if telemetry is not None:
        guard.add_listener(telemetry.on_action)
        telemetry.attach(bus)


def parse_args(raw: Any) -> Any:
    """The ``args`` of a ``ToolCall``: the parsed JSON value when the runtime
    hands over a JSON string, the raw string when that JSON is malformed or
    nested too deep to parse, and anything already parsed as it is."""
    if isinstance(raw, (str, bytes)):
        try:
            return msgspec.json.decode(raw)
        except (msgspec.DecodeError, RecursionError):
            return raw if isinstance(raw, str) else raw.decode("utf-8", "replace")
    return raw


def as_text(value: Any) -> str:
    """The ``content`` of a ``ToolResult``: strings as they are, anything else
    as JSON, or its ``repr`` when JSON cannot carry it, or, when that raises
    too (an integer too long for decimal, a ``__repr__`` that fails), the
    JSON of the stand-in the session log writes for it. Never raises: a
    tool's output must never break the call that made it."""
    if isinstance(value, str):
        return value
    try:
        return encoded(value, _PLAIN).decode()
    except Exception:
        pass
    try:
        return repr(value)
    except Exception:
        return encoded(as_logged(value)).decode("utf-8", "replace")


def _failure_text(exc: Exception) -> str:
    """The text of a tool's failure: ``exc``'s message, else its type's name;
    a message that cannot be made (a ``__str__`` that raises: one built from
    an attribute never set) is its type's name, saying so. Never raises: it
    runs in the runtime's ``except`` block, and the call must be closed."""
    kind = type(exc).__name__
    try:
        text = str(exc)
    except Exception:
        return f"{kind} (its message could not be read)"
    return text or kind


_TWIN = lazy_compile(r"(.+)@([0-9]+)")


def _next_twin_number(call_id: str, twins: list[str]) -> int:
    """Where to look for the next free ``<id>@<n>`` of ``call_id``, whose open
    calls are ``twins``: after the newest twin's number (one of the last two
    names: ``<id>`` itself is open once at most), else ``len(twins)``. A
    runtime that names every call alike and reports no results finds its next
    name at once, instead of probing the names still open above ``len(twins)``
    (its oldest calls forgotten, ``OPEN_CALLS_KEPT``)."""
    number = len(twins)
    for name in twins[-2:]:
        twin = _TWIN.fullmatch(name)
        if twin is not None and twin.group(1) == call_id and len(twin.group(2)) < 19:  # int() refuses 4,300 digits
            number = max(number, int(twin.group(2)) + 1)
    return number


def _copied(twins: dict[str, list[str]]) -> dict[str, list[str]]:
    """``twins`` with lists of their own: a link pops from them as results come."""
    return {call_id: list(published) for call_id, published in twins.items()}


def _twins_of(calls: dict[str, ToolCall]) -> dict[str, list[str]]:
    """The ``<id>@<n>`` twins among open calls whose first call ``<id>`` is
    open too, in the order they were made (``calls``' order): what a state
    read from a session log, which does not record them, can tell. A
    runtime's own ids that end in ``@<n>`` stand alone."""
    made: dict[str, list[str]] = {}
    for published in calls:
        twin = _TWIN.fullmatch(published)
        if twin is not None and twin.group(1) in calls:
            made.setdefault(twin.group(1), [twin.group(1)]).append(published)
    return made
