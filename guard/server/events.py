"""The generic events API: one event of a session in its log form, the
guard's answer out.

Any runtime, in any language, posts what its agents do (``user/message``,
``tool/call``, ``tool/result``, ``agent/status``) as the session log writes
it, without ``seq`` and ``ts``, and gets back what the guard decided:
whether a call may run, the context messages to show the model, and a halt
request. The wire types are frozen msgspec Structs, so the request is
validated and the OpenAPI schema derived from one definition.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Annotated, Any, Literal

import msgspec
from anyio.lowlevel import checkpoint

from bus import (
    MAX_NESTING,
    AgentStatus,
    AnyEvent,
    ContextMessage,
    ContextSource,
    Decision,
    Event,
    ToolCall,
    ToolResult,
    UserMessage,
    too_deep,
)
from bus._codec import NumberOutOfRange, lenient_json
from bus.replay import CHECKPOINT_EVERY
from guard._text import shown
from guard.fingerprint import fingerprint
from guard.server.sessions import Session
from guard.sessions.answer import Answer, retry_key
from guard.sessions.link import AgentLink

__all__ = [
    "AgentStatusIn",
    "ContextMessageOut",
    "EventAnswer",
    "EventIn",
    "Halt",
    "RequestError",
    "ToolCallIn",
    "ToolResultIn",
    "UserMessageIn",
    "answer_event",
    "apply_event",
    "decode_event",
    "recall",
    "retry_keys",
]

AgentId = Annotated[str, msgspec.Meta(min_length=1, description="the agent's id; the first event of an id starts it")]


class UserMessageIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, tag="user/message"):
    """A genuine user prompt or interjection: the guard's counts start over
    and a halt request is over."""

    agent: AgentId
    text: str


class ToolCallIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, tag="tool/call"):
    """The model asked for a tool; post it before the tool runs. ``step``
    numbers the agent's model responses (parallel calls share one); without
    it, a call made while none of the agent's calls is open starts a new step."""

    agent: AgentId
    call_id: Annotated[str, msgspec.Meta(min_length=1)]
    step: Annotated[int, msgspec.Meta(ge=1)] | None = None
    tool: Annotated[str, msgspec.Meta(min_length=1)]
    args: Any = None


class ToolResultIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, tag="tool/result"):
    """What an allowed tool returned. A call the guard denied already has
    its denial recorded as its result: do not post one for it. ``denied_by``
    names your own interceptor when something else stopped the call.
    ``tool``/``args``/``step`` matter only for a result whose call was never
    posted (the call is recorded from them first)."""

    agent: AgentId
    call_id: Annotated[str, msgspec.Meta(min_length=1)]
    step: Annotated[int, msgspec.Meta(ge=1)] | None = None
    tool: str = ""
    args: Any = None
    content: str = ""
    is_error: bool = False
    denied_by: Annotated[str, msgspec.Meta(min_length=1)] | None = None


class AgentStatusIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, tag="agent/status"):
    """An agent's lifecycle: ``started`` (``parent`` is a live agent's id for
    a subagent), ``idle``, ``disposed`` (the guard drops its state)."""

    agent: AgentId
    status: Literal["started", "idle", "disposed"]
    parent: str | None = None


EventIn = UserMessageIn | ToolCallIn | ToolResultIn | AgentStatusIn
"""One event of a session, as the session log writes it without ``seq`` and ``ts``."""


class ContextMessageOut(msgspec.Struct, frozen=True, kw_only=True, tag="context/message"):
    """A guard message as the session log holds it: show ``text`` to the
    model after the result of ``call_id``, labelled as coming from ``source``."""

    seq: int
    ts: float
    agent: str
    call_id: str
    source: ContextSource
    text: str


class Halt(msgspec.Struct, frozen=True):
    """The guard asks the runtime to end the agent's run, until the next user message."""

    reason: str


class EventAnswer(msgspec.Struct, frozen=True):
    """The guard's answer to one event.

    ``seq`` is the event's place in the session log. ``allowed``/``reason``
    answer a ``tool/call`` (``null`` for other events): on ``false`` do not
    run the tool and give the model ``reason`` as its result. ``messages``
    are the guard's ``context/message`` events (log form) to show the model
    after this event; ``halt`` is set while the guard asks to stop the agent.
    """

    seq: int
    allowed: bool | None
    reason: str | None
    messages: list[ContextMessageOut]
    halt: Halt | None


class RequestError(Exception):
    """A request the server cannot act on: ``status`` and a one-line ``reason``."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


_decoder = msgspec.json.Decoder(EventIn)


def decode_event(body: bytes) -> EventIn:
    """The posted event, or a ``RequestError`` naming what is wrong with it
    (422 for an invalid event, quoting at most ``_QUOTED`` characters of it;
    400 for a body that is not JSON or nests deeper than ``MAX_NESTING``)."""
    if too_deep(body):
        raise RequestError(400, f"body nests deeper than {MAX_NESTING} levels")
    try:
        return _decoder.decode(body)
    except msgspec.ValidationError as exc:
        raise RequestError(422, f"invalid event: {_quoted(str(exc))}") from None
    except msgspec.DecodeError as exc:
        try:
            value = lenient_json(body, finite=True)  # a lone surrogate, as JavaScript writes a string cut mid-character
        except NumberOutOfRange as out:
            raise RequestError(422, f"invalid event: {_quoted(str(out))}") from None
        if value is None:
            raise RequestError(400, f"body is not JSON: {_quoted(str(exc))}") from None
    try:
        event: EventIn = msgspec.convert(value, EventIn)
        return event
    except msgspec.ValidationError as exc:
        raise RequestError(422, f"invalid event: {_quoted(str(exc))}") from None


_QUOTED = 200


def _quoted(text: str) -> str:
    return text if len(text) <= _QUOTED else text[: _QUOTED - 1] + "…"


async def answer_event(session: Session, event: EventIn, *, arrived: float | None = None) -> bytes:
    """``apply_event``'s answer, encoded; a retried ``tool/call`` or
    ``tool/result`` (same type, agent and call id as one answered recently)
    gets the original answer again and nothing is published twice. A call
    id may be used again for a new call: a call's answer is forgotten once
    its result is in, and its result's old answer when it is posted.

    ``arrived`` is when the request reached the server (its wall clock): a
    request that arrived before its type, agent and call id were recorded
    (by a concurrent copy of it, on this replica or another) is stale: it
    gets the recorded answer if one is kept, else a 409, and is not applied."""
    if type(event) is ToolCallIn and (late := _late_copy(session, event)) is not None:
        return late
    if type(event) is ToolCallIn or type(event) is ToolResultIn:
        kind = "tool/call" if type(event) is ToolCallIn else "tool/result"
        key, other_key = retry_keys(event)
        if session.fetch_answers is not None:
            await session.fetch_answers((key, other_key))
        answered = session.answers.get(key)
        if answered is not None and not _reuses_denied_id(session, event):
            return answered
        recorded = session.recorded.get(key)
        if arrived is not None and recorded is not None and recorded > arrived:
            raise RequestError(
                409,
                f"{kind} {shown(event.call_id)} of agent {shown(event.agent)} was recorded after this request arrived: "
                "a copy of it was answered already"
            )  # fmt: skip
        answer = msgspec.json.encode(await apply_event(session, event))
        session.answers.pop(other_key, None)
        session.remember_answer(key, answer)
        return answer
    return msgspec.json.encode(await apply_event(session, event))


def _late_copy(session: Session, event: ToolCallIn) -> bytes | None:
    """The answer for a call posted after its own result, which recorded it
    already (as a late call: it ran): allowed, and nothing published. Only
    the agent's latest event can be so answered; after it, the same id and
    call are a new call."""
    late = session.late.get(event.agent)
    if late is None or late[0] != event.call_id or late[1] != fingerprint(event.tool, event.args).digest:
        return None
    return msgspec.json.encode(EventAnswer(seq=late[2], allowed=True, reason=None, messages=[], halt=None))


def _reuses_denied_id(session: Session, event: ToolCallIn | ToolResultIn) -> bool:
    """Whether ``event`` is a new call under the id of a call the guard
    denied: other tool or arguments. The denial was that call's result, so
    its id is free again, as after any result; the same call again is a copy
    of the denied one and gets its answer."""
    if type(event) is not ToolCallIn:
        return False
    denied = session.denied_call(event.agent, event.call_id)
    return denied is not None and denied != fingerprint(event.tool, event.args).digest


def retry_keys(event: EventIn) -> tuple[str, ...]:
    """The retry keys ``answer_event`` looks up for ``event``: a call's or
    result's own, then its counterpart's (a call's result, a result's
    call); none for other events."""
    if type(event) is ToolCallIn:
        return retry_key("tool/call", event.agent, event.call_id), retry_key("tool/result", event.agent, event.call_id)
    if type(event) is ToolResultIn:
        return retry_key("tool/result", event.agent, event.call_id), retry_key("tool/call", event.agent, event.call_id)
    return ()


async def recall(session: Session, events: Iterable[AnyEvent], owns: Callable[[Event], bool]) -> None:
    """Give ``session`` what it remembers of the answers ``events`` (its
    recorded history, oldest first) were given: each call's and result's
    answer (as ``answer_event`` keeps them), the calls the guard denied, and
    when each call and result was recorded. An answer is rebuilt from the
    events its request recorded: the call or result, then the guard's
    denial (``owns``), messages and halt request for that agent, up to the
    agent's next request. The other tasks run every ``CHECKPOINT_EVERY``
    events, as during the replay of the same history."""
    open_: dict[str, _Recalled] = {}
    halts: dict[str, str | None] = {}

    def close(agent_id: str) -> None:
        done = open_.pop(agent_id, None)
        if done is not None and done.key is not None:
            halt = halts.get(agent_id)
            answer = EventAnswer(done.seq, done.allowed, done.reason, done.messages, Halt(halt) if halt else None)
            session.remember_answer(done.key, msgspec.json.encode(answer))

    for count, event in enumerate(events, 1):
        if not count % CHECKPOINT_EVERY:
            await checkpoint()
        agent = event.agent
        if agent is None:  # pragma: no cover - every event the server records names its agent
            continue
        current = open_.get(agent.id)
        if isinstance(event, ContextMessage):
            if current is not None:
                current.messages.append(
                    ContextMessageOut(
                        seq=event.seq, ts=event.ts, agent=agent.id, call_id=event.call_id, source=event.source,
                        text=event.text,
                    )
                )  # fmt: skip
            continue
        if isinstance(event, AgentStatus) and event.status == "halt-requested":
            halts[agent.id] = event.reason or "the guard requested a halt"
            continue
        if (
            isinstance(event, ToolResult)
            and current is not None
            and current.call_id == event.call_id
            and current.allowed is True
            and owns(event)
        ):
            current.allowed, current.reason = False, event.content
            session.remember_denial(agent.id, event.call_id, current.called)
            session.note_recorded(event)
            continue
        close(agent.id)
        late = session.late.get(agent.id)
        if late is not None and not (isinstance(event, ToolResult) and event.call_id == late[0]):
            del session.late[agent.id]  # a late call is a copy's only while it is the agent's latest
        if isinstance(event, UserMessage) or (
            isinstance(event, AgentStatus) and event.status in ("started", "disposed")
        ):
            halts[agent.id] = None  # the user steered, or the agent began a new life: no halt stands
        if isinstance(event, (ToolCall, ToolResult)):
            call = isinstance(event, ToolCall)
            mine, other = ("tool/call", "tool/result") if call else ("tool/result", "tool/call")
            session.answers.pop(retry_key(other, agent.id, event.call_id), None)
            session.answers.pop(retry_key(mine, agent.id, event.call_id), None)
            session.note_recorded(event)
            key = retry_key(mine, agent.id, event.call_id)
            recalled = open_[agent.id] = _Recalled(key, event.call_id, event.seq, True if call else None)
            if call:
                session.forget_denial(agent.id, event.call_id)  # a new call under a denied id
                recalled.called = fingerprint(event.tool, event.args).digest
                if isinstance(event, ToolCall) and event.late is True:
                    session.late[agent.id] = (event.call_id, recalled.called, event.seq)
        else:
            open_[agent.id] = _Recalled(None, None, event.seq, None)
    for agent_id in list(open_):
        close(agent_id)


class _Recalled:
    __slots__ = ("allowed", "call_id", "called", "key", "messages", "reason", "seq")

    def __init__(self, key: str | None, call_id: str | None, seq: int, allowed: bool | None) -> None:
        self.key = key
        self.call_id = call_id
        self.seq = seq
        self.allowed = allowed
        self.reason: str | None = None
        self.messages: list[ContextMessageOut] = []
        self.called = b""  # a call's fingerprint digest


async def apply_event(session: Session, event: EventIn) -> EventAnswer:
    """Publish ``event`` on the session's bus and collect the guard's answer."""
    agents = session.agents
    if type(event) is AgentStatusIn:
        return await _status(session, event)
    agent = agents.get(event.agent)
    if type(event) is ToolResultIn:
        _check_result(session, agent, event)  # before anything is published: a refused event records nothing
    if agent is None:
        agent = await _start(session, event.agent, None)
    session.late.pop(event.agent, None)
    bus = agent.bus
    decision: Decision | None = None
    if type(event) is UserMessageIn:
        seq = bus.seq + 1
        await agent.user_message(event.text)
    elif type(event) is ToolCallIn:
        if agent.has_call(event.call_id):
            raise RequestError(409, f"call {shown(event.call_id)} of agent {shown(event.agent)} is already open")
        _set_step(agent, event.step)
        seq = bus.seq + 1
        decision = await agent.call(event.call_id, event.tool, event.args)
        if not decision.allowed:
            await agent.denied(event.call_id, decision)
            session.remember_denial(event.agent, event.call_id, fingerprint(event.tool, event.args).digest)
        else:
            session.forget_denial(event.agent, event.call_id)
    else:
        assert type(event) is ToolResultIn
        seq = await _result(session, agent, event)
    return _wire(agent, agent.answer(seq, decision))


def _check_result(session: Session, agent: AgentLink | None, event: ToolResultIn) -> None:
    """Refuse a result that cannot be applied (``RequestError``)."""
    if event.denied_by is not None and event.denied_by in session.guards:
        raise RequestError(
            422,
            f"denied_by = {shown(event.denied_by)} names the guard itself, which records its own denials: "
            "name your own interceptor",
        )
    if agent is None or not agent.has_call(event.call_id):
        if session.denied_call(event.agent, event.call_id) is not None:
            raise RequestError(
                409,
                f"call {shown(event.call_id)} of agent {shown(event.agent)} was denied; "
                "its denial is already its result",
            )
        if not event.tool:
            raise RequestError(
                422, f"result of call {shown(event.call_id)} was never posted as a call: it needs its tool"
            )


async def _result(session: Session, agent: AgentLink, event: ToolResultIn) -> int:
    if not agent.has_call(event.call_id):
        # A result whose call was never posted counts all the same, as a late
        # call: the tool ran, so nothing is denied.
        _set_step(agent, event.step)
        session.late[event.agent] = (event.call_id, fingerprint(event.tool, event.args).digest, agent.bus.seq + 1)
        await agent.call(event.call_id, event.tool, event.args, late=True)
    seq = agent.bus.seq + 1
    if event.denied_by is not None:
        await agent.denied(event.call_id, Decision.deny(event.content, event.denied_by))
    else:
        await agent.result(event.call_id, event.content, is_error=event.is_error)
    return seq


def _set_step(agent: AgentLink, step: int | None) -> None:
    if step is not None:
        agent.step = step
    elif agent.open_calls() == 0:
        agent.begin_step()


async def _status(session: Session, event: AgentStatusIn) -> EventAnswer:
    agents = session.agents
    agent = agents.get(event.agent)
    if event.status == "started":
        if agent is not None:
            raise RequestError(409, f"agent {shown(event.agent)} is already started in session {session.id!r}")
        seq = session.link.bus.seq + 1
        agent = await _start(session, event.agent, event.parent)
        return _wire(agent, agent.answer(seq))
    if agent is None:
        raise RequestError(409, f"agent {shown(event.agent)} is not live in session {session.id!r}")
    seq = agent.bus.seq + 1
    if event.status == "disposed":
        del agents[event.agent]
        await agent.dispose()
        return _wire(agent, msgspec.structs.replace(agent.answer(seq), halt=None))
    await agent.bus.publish(AgentStatus(agent=agent.agent, status="idle"))
    return _wire(agent, agent.answer(seq))


async def _start(session: Session, agent_id: str, parent_id: str | None) -> AgentLink:
    parent = None
    if parent_id is not None:
        parent = session.agents.get(parent_id)
        if parent is None:
            raise RequestError(409, f"parent agent {shown(parent_id)} is not live in session {session.id!r}")
    agent = session.agents[agent_id] = session.link.agent(agent_id, parent=parent)
    await agent.start()
    return agent


def _wire(agent: AgentLink, answer: Answer) -> EventAnswer:
    """``answer`` in the events API's JSON form."""
    decision = answer.decision
    messages = [
        ContextMessageOut(seq=m.seq, ts=m.ts, agent=agent.agent.id, call_id=m.call_id, source=m.source, text=m.text)
        for m in answer.messages
    ]
    return EventAnswer(
        answer.seq,
        decision.allowed if decision is not None else None,
        decision.reason if decision is not None else None,
        messages,
        Halt(answer.halt) if answer.halt is not None else None,
    )
