"""repeat-tool-guard: stop AI agents from re-issuing the same tool call.

Attach a ``Guard`` to a ``bus.Bus``; it watches each agent's tool calls and,
per its enabled policies, reminds the model, denies the repeated call, or
escalates. See ``docs/`` for the policies and their configuration.
"""

from guard.actions import DENYING, Action, ActionKind, action_for
from guard.calls import DEFAULT_IGNORED_ARGS, DEFAULT_INTERJECTIONS, CallSelector, Interjections
from guard.config import (
    PRESETS,
    RECOMMENDED,
    TURNS_THRESHOLD_ENV,
    Config,
    ConfigError,
    LoopsConfig,
    RemindConfig,
    RescueConfig,
    TurnsConfig,
    apply_environment,
    load_config,
    parse_config,
)
from guard.fingerprint import Fingerprint, FingerprintCache, canonical_json, fingerprint
from guard.guard import ActionListener, Guard
from guard.normalize import DEFAULT_RESULT_NORMALIZE, ResultNormalizer, error_kind
from guard.patterns import (
    PATTERN_INPUT_LIMIT,
    CommandPatterns,
    Glob,
    PatternError,
    Regex,
    RegexSet,
    ToolFilter,
    compile_regex,
)
from guard.policies.escalation import ASK_MODEL_ENV, AskCommand, AskOutcome
from guard.policies.loops import LOOPS_PLUGIN, LoopsPolicy
from guard.policies.registry import build_policies
from guard.policies.remind import DETAILED_REMINDER, GENTLE_REMINDER, RemindPolicy
from guard.policies.rescue import RESCUE_PLUGIN, RescuePolicy
from guard.policies.trips import Trip, TripKind, TripLog, TripTrigger
from guard.policies.turn_ring import TurnRing, detect_loop
from guard.policies.turns import TURNS_ADVISORY, TURNS_DENIAL, TURNS_HALT_REASON, TurnsPolicy, summarize_result
from guard.policy import AnyPolicy, AnyWatch, Policy, StateT, Watch
from guard.redact import REDACTED, Redactor
from guard.verdicts import Difference, ReplayOutcome, Verdict, replay_log

__all__ = [
    "ASK_MODEL_ENV",
    "DEFAULT_IGNORED_ARGS",
    "DEFAULT_INTERJECTIONS",
    "DEFAULT_RESULT_NORMALIZE",
    "DENYING",
    "DETAILED_REMINDER",
    "GENTLE_REMINDER",
    "LOOPS_PLUGIN",
    "PATTERN_INPUT_LIMIT",
    "PRESETS",
    "RECOMMENDED",
    "REDACTED",
    "RESCUE_PLUGIN",
    "TURNS_ADVISORY",
    "TURNS_DENIAL",
    "TURNS_HALT_REASON",
    "TURNS_THRESHOLD_ENV",
    "Action",
    "ActionKind",
    "ActionListener",
    "AnyPolicy",
    "AnyWatch",
    "AskCommand",
    "AskOutcome",
    "CallSelector",
    "CommandPatterns",
    "Config",
    "ConfigError",
    "Difference",
    "Fingerprint",
    "FingerprintCache",
    "Glob",
    "Guard",
    "Interjections",
    "LoopsConfig",
    "LoopsPolicy",
    "PatternError",
    "Policy",
    "Redactor",
    "Regex",
    "RegexSet",
    "RemindConfig",
    "RemindPolicy",
    "ReplayOutcome",
    "RescueConfig",
    "RescuePolicy",
    "ResultNormalizer",
    "StateT",
    "ToolFilter",
    "Trip",
    "TripKind",
    "TripLog",
    "TripTrigger",
    "TurnRing",
    "TurnsConfig",
    "TurnsPolicy",
    "Verdict",
    "Watch",
    "action_for",
    "apply_environment",
    "build_policies",
    "canonical_json",
    "compile_regex",
    "detect_loop",
    "error_kind",
    "fingerprint",
    "load_config",
    "parse_config",
    "replay_log",
    "summarize_result",
]
