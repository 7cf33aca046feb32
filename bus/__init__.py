"""A typed, in-process event bus for agent runtimes, with a JSONL session log.

Runtimes publish what their agents do (tool calls, tool results, user
messages, status changes) and plugins such as a loop guard subscribe. The
bus does not depend on any plugin.
"""

from bus._codec import MAX_NESTING, block_lines, too_deep
from bus.agent import Agent
from bus.bus import ALLOW, Bus, Decision, Handler, Interceptor, Recorder
from bus.events import (
    DELIVERIES_KEPT,
    EVENT_TYPES,
    AgentStatus,
    AnyEvent,
    ContextMessage,
    ContextSource,
    Event,
    SessionStart,
    ToolCall,
    ToolResult,
    UserMessage,
)
from bus.files import NotRegularFileError, open_regular, private_dir, read_regular
from bus.log import LOG_VERSION, LogInUseError, LogWriteError, SessionLog
from bus.reader import LogError, LogReader, ReadReport, SkippedLine, read_log
from bus.replay import Replay

__all__ = [
    "ALLOW",
    "DELIVERIES_KEPT",
    "EVENT_TYPES",
    "LOG_VERSION",
    "MAX_NESTING",
    "Agent",
    "AgentStatus",
    "AnyEvent",
    "Bus",
    "ContextMessage",
    "ContextSource",
    "Decision",
    "Event",
    "Handler",
    "Interceptor",
    "LogError",
    "LogInUseError",
    "LogReader",
    "LogWriteError",
    "NotRegularFileError",
    "ReadReport",
    "Recorder",
    "Replay",
    "SessionLog",
    "SessionStart",
    "SkippedLine",
    "ToolCall",
    "ToolResult",
    "UserMessage",
    "block_lines",
    "open_regular",
    "private_dir",
    "read_log",
    "read_regular",
    "too_deep",
]
