"""How big and how long a benchmark run is."""

from __future__ import annotations

from pathlib import Path

import msgspec

__all__ = ["SECTIONS", "Settings"]

SECTIONS = (
    "dispatch",
    "fullpath",
    "log",
    "replay",
    "detection",
    "memory",
    "command-hook",
    "audit",
    "http-hook",
    "fleet",
    "fleet-chaos",
)


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """``seconds`` is the length of one timed round of a case and ``repeat``
    the number of rounds (the median is reported); ``log_mb`` sizes the
    generated replay log, ``agents`` the idle-agent population and ``calls``
    the stream fed to each loop guard. ``hook_sizes`` are the session lengths
    (earlier tool calls) the command hook is timed at, ``hook_processes`` the
    hook processes timed at each; ``audit_calls`` sizes the audited session, and a ``corpus`` of real
    transcripts is audited too when given. ``http_rounds`` rounds of
    ``http_pairs`` tool calls per session size time the HTTP hook; the
    ``fleet_*`` settings size the ``FleetGuard`` workers' run and the
    ``chaos_*`` ones the ``serve --redis`` replicas' runs.
    Temporary files go under ``tmpdir``."""

    tmpdir: Path
    seconds: float = 0.3
    repeat: int = 5
    log_mb: float = 100.0
    agents: int = 100_000
    calls: int = 1_000
    hook_sizes: tuple[int, ...] = (0, 1_000, 10_000, 100_000)
    hook_processes: int = 21
    audit_calls: int = 100_000
    corpus: Path | None = None
    http_rounds: int = 10
    http_pairs: int = 25
    fleet_workers: int = 4
    fleet_sessions: int = 400
    fleet_calls: int = 40
    fleet_latency_sessions: int = 16
    chaos_replicas: int = 4
    chaos_sessions: int = 1000
    chaos_clients: int = 50
    chaos_kill_every: float = 3.0
    sections: tuple[str, ...] = SECTIONS
    trio: bool = True
