"""One encoder and the decoder factory for the session log's JSON lines."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from bus.agent import Agent
from bus.events import AnyEvent, SessionStart


def _encode_hook(obj: Any) -> Any:
    if isinstance(obj, Agent):
        return obj.id
    # A runtime may pass values JSON cannot carry in ``args``; the log keeps a
    # readable stand-in rather than losing the event.
    return repr(obj)


encoder = msgspec.json.Encoder(enc_hook=_encode_hook)


def event_decoder(agent_for: Callable[[str], Agent]) -> msgspec.json.Decoder[AnyEvent]:
    """A decoder whose events carry handles from ``agent_for`` (id -> handle)."""

    def hook(type_: type, obj: Any) -> Any:
        if type_ is Agent and isinstance(obj, str) and obj:
            return agent_for(obj)
        raise NotImplementedError

    return msgspec.json.Decoder(AnyEvent, dec_hook=hook)


header_decoder = msgspec.json.Decoder(SessionStart)
