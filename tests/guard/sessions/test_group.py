"""Group commit: requests submitted while a batch travels share the next
round trip, and a failed batch fails every request in it, never hangs one."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from guard.sessions._group import GroupCommit

# The group commit serves redis-py, which runs on asyncio only.
pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]


class _Server:
    """Answers each request doubled, one batch per round trip, and keeps the batches it saw."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.fail: Exception | None = None
        self.gate = asyncio.Event()
        self.gate.set()

    async def send(self, batch: Sequence[int]) -> list[int]:
        self.batches.append(list(batch))
        await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        return [n * 2 for n in batch]


async def test_requests_made_while_a_batch_travels_share_the_next_round_trip() -> None:
    server = _Server()
    server.gate.clear()
    group = GroupCommit(server.send)
    first = asyncio.ensure_future(group.submit(1))
    await asyncio.sleep(0)
    later = [asyncio.ensure_future(group.submit(n)) for n in (2, 3, 4)]
    await asyncio.sleep(0)
    server.gate.set()
    assert [await first, *[await f for f in later]] == [2, 4, 6, 8]
    assert server.batches == [[1], [2, 3, 4]]


async def test_a_batch_holds_at_most_limit_requests() -> None:
    server = _Server()
    group = GroupCommit(server.send, limit=2)
    assert await asyncio.gather(*(group.submit(n) for n in range(5))) == [0, 2, 4, 6, 8]
    assert [len(batch) for batch in server.batches] == [2, 2, 1]


async def test_a_failed_batch_fails_each_of_its_requests_and_the_next_batch_still_goes() -> None:
    server = _Server()
    server.fail = ConnectionError("redis went away")
    group = GroupCommit(server.send)
    results = await asyncio.gather(group.submit(1), group.submit(2), return_exceptions=True)
    assert [str(r) for r in results] == ["redis went away"] * 2
    server.fail = None
    assert await group.submit(3) == 6


async def test_a_server_answering_the_wrong_number_fails_the_batch_clearly() -> None:
    async def short(batch: Sequence[int]) -> list[int]:
        return []

    with pytest.raises(RuntimeError, match="a batch of 1 requests got 0 answers"):
        await GroupCommit(short).submit(1)


@pytest.mark.parametrize("fails", [False, True], ids=["answered", "failed"])
async def test_a_cancelled_caller_leaves_the_others_their_answer(fails: bool) -> None:
    server = _Server()
    server.gate.clear()
    server.fail = ConnectionError("redis went away") if fails else None
    group = GroupCommit(server.send)
    gone = asyncio.ensure_future(group.submit(1))
    kept = asyncio.ensure_future(group.submit(2))
    await asyncio.sleep(0)
    gone.cancel()
    server.gate.set()
    if fails:
        with pytest.raises(ConnectionError, match="redis went away"):
            await kept
    else:
        assert await kept == 4
    assert gone.cancelled()


@pytest.mark.parametrize("started", [False, True], ids=["before-it-began", "in-flight"])
async def test_cancelling_the_batch_fails_its_waiters_instead_of_hanging_them(started: bool) -> None:
    server = _Server()
    server.gate.clear()
    group = GroupCommit(server.send)
    gone = asyncio.ensure_future(group.submit(0))
    waiting = [asyncio.ensure_future(group.submit(n)) for n in (1, 2)]
    await asyncio.sleep(0)
    gone.cancel()
    if started:
        await asyncio.sleep(0)
        assert server.batches == [[0, 1, 2]]
    assert group._task is not None
    group._task.cancel()
    for future in waiting:
        with pytest.raises(RuntimeError, match="cancelled before its answers came back"):
            await future


def test_limit_is_validated() -> None:
    async def send(batch: Sequence[int]) -> list[int]:  # pragma: no cover - never called
        return []

    with pytest.raises(ValueError, match="limit must be >= 1, got 0"):
        GroupCommit(send, limit=0)


async def test_an_answer_that_is_an_exception_fails_its_request_alone() -> None:
    async def send(batch: Sequence[int]) -> list[int | Exception]:
        return [ValueError(f"bad {n}") if n < 0 else n * 2 for n in batch]

    group = GroupCommit(send)
    answers = await asyncio.gather(*(group.submit(n) for n in (1, -1, 3)), return_exceptions=True)
    assert [str(a) if isinstance(a, Exception) else a for a in answers] == [2, "bad -1", 6]


@pytest.mark.parametrize(("fails_queued", "sent"), [(True, [[1]]), (False, [[1], [2, 3]])])
async def test_a_batch_the_server_did_not_answer_in_time_fails_the_requests_queued_behind_it(
    fails_queued: bool, sent: list[list[int]]
) -> None:
    """Each queued batch would wait out a timeout of its own: a call behind
    one would wait twice as long as the client's timeout."""
    server = _Server()
    server.gate.clear()
    server.fail = TimeoutError("no answer in time")
    group = GroupCommit(server.send, fails_queued=lambda exc: isinstance(exc, TimeoutError) and fails_queued)
    first = asyncio.ensure_future(group.submit(1))
    await asyncio.sleep(0)
    queued = [asyncio.ensure_future(group.submit(n)) for n in (2, 3)]
    await asyncio.sleep(0)
    server.gate.set()
    results = await asyncio.gather(first, *queued, return_exceptions=True)
    assert [str(r) for r in results] == ["no answer in time"] * 3
    assert server.batches == sent


def test_outside_asyncio_the_group_says_it_runs_on_asyncio_only() -> None:
    import trio

    group: GroupCommit[int, int] = GroupCommit(_Server().send)
    with pytest.raises(RuntimeError, match="runs on asyncio only"):
        trio.run(group.submit, 1)
