"""Bus dispatch against a bare await loop and the buses users would pick.

Every contender delivers the same event to the same do-nothing async
handlers and, like ``Bus.publish``, returns only once they have run: blinker
via ``send_async``, pyee by emitting then awaiting ``wait_for_complete``,
bubus by awaiting ``dispatch`` (it needs a fresh pydantic event per
dispatch, so building one is part of its cost), and an anyio memory object
stream (buffer 0) by one consumer task per subscriber.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from benchmarks import peers, stream
from benchmarks._measure import Case, Row, measure
from benchmarks.settings import Settings
from bus import Agent, Bus, ToolResult
from guard.guard import Guard

__all__ = ["dispatch", "dispatch_on_trio"]

_Handler = Callable[..., Awaitable[None]]


def _handlers(count: int) -> list[_Handler]:
    """``count`` distinct do-nothing handlers (distinct names, for bubus)."""

    def make(index: int) -> _Handler:
        async def handler(*args: Any, **kwargs: Any) -> None:
            return None

        handler.__name__ = handler.__qualname__ = f"handler_{index}"
        return handler

    return [make(index) for index in range(count)]


def _bare(event: ToolResult, fan: int) -> Case:
    handlers = _handlers(fan)
    if fan == 1:
        handler = handlers[0]

        async def one(n: int) -> None:
            for _ in range(n):
                await handler(event)

        return one

    async def many(n: int) -> None:
        for _ in range(n):
            for handler in handlers:
                await handler(event)

    return many


def _repeated(send: Callable[[ToolResult], Awaitable[Any]], event: ToolResult) -> Case:
    """A case that sends ``event`` ``n`` times, awaiting each."""

    async def case(n: int) -> None:
        for _ in range(n):
            await send(event)

    return case


def _bus(event: ToolResult, fan: int) -> Case:
    bus = Bus()
    for handler in _handlers(fan):
        bus.subscribe(ToolResult, handler)
    return _repeated(bus.publish, event)


def _blinker(event: ToolResult, fan: int) -> Case | None:
    blinker = peers.load("blinker")
    if blinker is None:
        return None
    signal = blinker.Signal()
    for handler in _handlers(fan):
        signal.connect(handler, weak=False)
    return _repeated(signal.send_async, event)


def _pyee(event: ToolResult, fan: int) -> Case | None:
    pyee = peers.load("pyee.asyncio")
    if pyee is None:
        return None
    emitter = pyee.AsyncIOEventEmitter()
    for handler in _handlers(fan):
        emitter.on("tool/result", handler)

    async def case(n: int) -> None:
        emit, wait = emitter.emit, emitter.wait_for_complete
        for _ in range(n):
            emit("tool/result", event)
            await wait()

    return case


def _bubus(fan: int) -> tuple[Case, Callable[[], Awaitable[None]]] | None:
    bubus = peers.load("bubus")
    if bubus is None:
        return None

    class BenchToolResult(bubus.BaseEvent):  # type: ignore[misc, name-defined]
        tool: str = "grep"

    event_bus = bubus.EventBus(name=f"bench_fan_{fan}", max_history_size=50)
    for handler in _handlers(fan):
        event_bus.on(BenchToolResult, handler)

    async def case(n: int) -> None:
        dispatch = event_bus.dispatch
        for _ in range(n):
            await dispatch(BenchToolResult())

    return case, event_bus.stop


def _stream(event: ToolResult, fan: int) -> Case:
    handlers = _handlers(fan)

    async def case(n: int) -> None:
        async with anyio.create_task_group() as tg:
            senders = []
            for handler in handlers:
                send, receive = anyio.create_memory_object_stream[ToolResult](0)
                senders.append(send)

                async def consume(receive: Any = receive, handler: _Handler = handler) -> None:
                    async with receive:
                        async for item in receive:
                            await handler(item)

                tg.start_soon(consume)
            for _ in range(n):
                for send in senders:
                    await send.send(event)
            for send in senders:
                await send.aclose()

    return case


def _guarded(pool: list[ToolResult]) -> tuple[Case, Case]:
    """The issue-2 pair: tool/result events through ``Bus`` with a default
    ``Guard`` subscribed, and a bare loop over the same events."""
    mask = len(pool) - 1
    (handler,) = _handlers(1)

    async def bare(n: int) -> None:
        for i in range(n):
            await handler(pool[i & mask])

    bus = Bus()
    Guard().attach(bus)
    publish = bus.publish

    async def guarded(n: int) -> None:
        for i in range(n):
            await publish(pool[i & mask])

    return bare, guarded


async def dispatch(settings: Settings) -> list[Row]:
    """Events per second to one and to four subscribers, then through a guard."""
    agent = Agent("bench")
    pool = stream.results(stream.calls(4096, agent=agent))
    event = pool[0]
    rows: list[Row] = []
    for fan in (1, 4):
        section = f"dispatch, {fan} subscriber{'s' if fan > 1 else ''}"
        cases: list[tuple[str, Case]] = [
            ("bare await loop", _bare(event, fan)),
            ("repeat-tool-guard Bus", _bus(event, fan)),
        ]
        missing: list[str] = []
        stops: list[Callable[[], Awaitable[None]]] = []
        for name, case in (
            (f"blinker {peers.version('blinker')} send_async", _blinker(event, fan)),
            (f"pyee {peers.version('pyee')} AsyncIOEventEmitter", _pyee(event, fan)),
        ):
            if case is None:
                missing.append(name.split()[0])
            else:
                cases.append((name, case))
        made = _bubus(fan)
        if made is None:
            missing.append("bubus")
        else:
            cases.append((f"bubus {peers.version('bubus')} EventBus", made[0]))
            stops.append(made[1])
        cases.append(("anyio memory object stream", _stream(event, fan)))
        timings = await measure(cases, seconds=settings.seconds, repeat=settings.repeat)
        for stop in stops:
            await stop()
        bare = timings["bare await loop"].rate
        blinker = next((t.rate for name, t in timings.items() if name.startswith("blinker")), None)
        for name, timing in timings.items():
            target, met, extra = "", None, ""
            if name == "repeat-tool-guard Bus" and fan == 1:
                target = ">= 2,000,000/s and >= 3x blinker"
                met = timing.rate >= 2_000_000 and (blinker is None or timing.rate >= 3 * blinker)
            if name == "repeat-tool-guard Bus" and blinker is not None:
                extra = f"{timing.rate / blinker:.1f}x blinker"
            rows.append(
                Row(
                    section=section,
                    name=name,
                    rate=timing.rate,
                    unit="events/s",
                    micros=timing.micros,
                    ratio=timing.rate / bare,
                    baseline="bare await loop",
                    extra=extra,
                    target=target,
                    met=met,
                )
            )
        rows.extend(
            Row(section=section, name=name, rate=0.0, unit="events/s", extra=peers.INSTALL_HINT) for name in missing
        )
    bare_case, guarded_case = _guarded(pool)
    timings = await measure(
        [("bare await loop", bare_case), ("Bus + Guard (remind)", guarded_case)],
        seconds=settings.seconds,
        repeat=settings.repeat,
    )
    bare = timings["bare await loop"].rate
    for name, timing in timings.items():
        guarded = name != "bare await loop"
        rows.append(
            Row(
                section="dispatch, tool/result through the guard",
                name=name,
                rate=timing.rate,
                unit="events/s",
                micros=timing.micros,
                ratio=timing.rate / bare,
                baseline="bare await loop",
                target=">= 300,000/s and within 8x of bare" if guarded else "",
                met=(timing.rate >= 300_000 and timing.rate * 8 >= bare) if guarded else None,
            )
        )
    return rows


async def dispatch_on_trio(settings: Settings) -> list[Row]:
    """The bus under trio, once: one subscriber against the bare loop."""
    event = stream.results(stream.calls(1, agent=Agent("bench")))[0]
    timings = await measure(
        [("bare await loop", _bare(event, 1)), ("repeat-tool-guard Bus", _bus(event, 1))],
        seconds=settings.seconds,
        repeat=settings.repeat,
    )
    bare = timings["bare await loop"].rate
    return [
        Row(
            section="dispatch under trio, 1 subscriber",
            name=name,
            rate=timing.rate,
            unit="events/s",
            micros=timing.micros,
            ratio=timing.rate / bare,
            baseline="bare await loop",
        )
        for name, timing in timings.items()
    ]
