"""Importers: transcripts of other agent tools as session logs.

``open_sessions(path)`` detects a transcript's format and yields its
sessions; each streams ``bus`` events in the session log schema, and
``write_log`` writes one as a log that ``replay`` and ``audit`` read.
Formats: Claude Code, Codex CLI, gemini-cli, OpenHands, SWE-agent,
mini-swe-agent, Cline / Roo Code, goose, OpenCode and pi (see
``docs/importers/``).
"""

from guard.importers._session import (
    EmptyTranscriptError,
    ImportedSession,
    ImportReport,
    TranscriptError,
    UnknownFormatError,
)
from guard.importers.detect import FORMATS, belongs_to_session, detect_format, open_sessions
from guard.importers.writer import WriteSummary, write_log

__all__ = [
    "FORMATS",
    "EmptyTranscriptError",
    "ImportReport",
    "ImportedSession",
    "TranscriptError",
    "UnknownFormatError",
    "WriteSummary",
    "belongs_to_session",
    "detect_format",
    "open_sessions",
    "write_log",
]
