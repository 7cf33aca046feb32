"""Group commit: many callers' requests to a server, one round trip a batch."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

__all__ = ["GroupCommit"]

T = TypeVar("T")
R = TypeVar("R")


class GroupCommit(Generic[T, R]):
    """Sends requests in batches through ``send`` (a batch of requests in,
    their answers out, in order), at most one batch in flight: whatever
    callers submit while a batch travels goes in the next one. An idle
    caller waits for one round trip; under load, the round trips are
    shared, so throughput grows with the number of concurrent callers
    rather than with the number of connections.

    When ``send`` raises, every request of that batch raises the same
    error, and so does every request queued behind it when ``fails_queued``
    says the error would only be met again (a server that did not answer in
    time: each queued batch would wait out a timeout of its own); an answer
    that is an exception is raised for its request alone
    (a ``send`` that can tell which request failed says so). A caller
    cancelled while waiting does not cancel its request,
    which may still be applied (make requests idempotent when that
    matters). Runs on asyncio.
    """

    def __init__(
        self,
        send: Callable[[Sequence[T]], Awaitable[Sequence[R | Exception]]],
        *,
        limit: int = 512,
        fails_queued: Callable[[Exception], bool] | None = None,
    ) -> None:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        self._send = send
        self._limit = limit
        self._fails_queued = fails_queued
        self._queue: list[tuple[T, asyncio.Future[R]]] = []
        self._flight: list[tuple[T, asyncio.Future[R]]] = []
        self._task: asyncio.Task[None] | None = None

    async def submit(self, request: T) -> R:
        """``request``'s answer, once the batch it joined comes back."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError(
                "the fleet runs on asyncio only (redis-py's asyncio client): call it under asyncio, not trio"
            ) from None
        future: asyncio.Future[R] = loop.create_future()
        self._queue.append((request, future))
        if self._task is None:
            self._task = loop.create_task(self._drain())
            self._task.add_done_callback(self._ended)
        return await future

    async def _drain(self) -> None:
        while self._queue:
            self._flight, self._queue = self._queue[: self._limit], self._queue[self._limit :]
            try:
                answers = await self._send([request for request, _ in self._flight])
                if len(answers) != len(self._flight):
                    raise RuntimeError(f"a batch of {len(self._flight)} requests got {len(answers)} answers")
            except Exception as exc:
                failed = self._flight
                if self._fails_queued is not None and self._fails_queued(exc):
                    failed, self._queue = failed + self._queue, []
                for _, future in failed:
                    if not future.done():
                        future.set_exception(exc)
            else:
                for (_, future), answer in zip(self._flight, answers, strict=True):
                    if future.done():
                        continue
                    if isinstance(answer, Exception):
                        future.set_exception(answer)
                    else:
                        future.set_result(answer)
            self._flight = []
        self._task = None  # in the step that saw the queue empty: the next submit starts a new drain

    def _ended(self, task: asyncio.Task[None]) -> None:
        if self._task is not task:
            return
        # Cancelled (the loop is closing), perhaps before it began: nobody may wait forever.
        self._task = None
        stranded, self._flight, self._queue = self._flight + self._queue, [], []
        for _, future in stranded:
            if not future.done():
                future.set_exception(RuntimeError("the batch was cancelled before its answers came back"))
