"""Adapters that run the guard inside agent runtimes.

``GuardLink``/``AgentLink`` are the runtime-neutral part; each runtime has
its own module (``guard.adapters.pydantic_ai`` and so on), importable only
when that runtime is installed (``pip install 'repeat-tool-guard[pydantic-ai]'``).
"""

from guard.sessions.link import CANCELLED, REMINDER_PREFIX, AgentLink, GuardLink, HaltRequested, as_text, parse_args

__all__ = ["CANCELLED", "REMINDER_PREFIX", "AgentLink", "GuardLink", "HaltRequested", "as_text", "parse_args"]
