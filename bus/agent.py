"""The live agent handle that events carry in memory."""

from __future__ import annotations

__all__ = ["Agent"]


class Agent:
    """A live agent: weak-referenceable and hashed by identity.

    Guards key their per-agent state on this object with a
    ``weakref.WeakKeyDictionary``, so state disappears with the agent. Two
    handles with the same ``id`` are still two agents: a runtime creates one
    handle per live agent and keeps it for the agent's lifetime. On disk an
    agent is its ``id``.
    """

    __slots__ = ("__weakref__", "id", "parent_id")

    def __init__(self, id: str, *, parent_id: str | None = None) -> None:
        if not isinstance(id, str) or not id:
            raise ValueError(f"Agent id must be a non-empty string, got {id!r}")
        self.id = id
        self.parent_id = parent_id

    def __repr__(self) -> str:
        if self.parent_id is None:
            return f"Agent({self.id!r})"
        return f"Agent({self.id!r}, parent_id={self.parent_id!r})"
