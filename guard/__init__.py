"""repeat-tool-guard: stop AI agents from re-issuing the same tool call.

Attach a ``Guard`` to a ``bus.Bus``; it watches each agent's tool calls and,
per its enabled policies, reminds the model, denies the repeated call, or
escalates. See ``docs/`` for the policies and their configuration.
"""

from guard.actions import DENYING, SHADOW_FORM, Action, ActionKind, action_for
from guard.calls import DEFAULT_IGNORED_ARGS, DEFAULT_INTERJECTIONS, LOOPS_INTERJECTIONS, CallSelector, Interjections
from guard.config import (
    PRESETS,
    RECOMMENDED,
    SHADOW_ENV,
    TURNS_THRESHOLD_ENV,
    Config,
    ConfigError,
    LoopsConfig,
    LoopsToolConfig,
    RemindConfig,
    RescueConfig,
    TurnsConfig,
    apply_environment,
    load_config,
    parse_config,
    shadowed,
)
from guard.escalation import ASK_MODEL_ENV, AskCommand, AskOutcome
from guard.fingerprint import Fingerprint, FingerprintCache, canonical_json, fingerprint
from guard.guard import ActionListener, Guard, build_policies
from guard.loops import LOOPS_PLUGIN, LoopsPolicy
from guard.normalize import DEFAULT_RESULT_NORMALIZE, ResultNormalizer, Shape, error_head, error_kind
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
from guard.policy import AnyPolicy, AnyWatch, Policy, StateT, Watch
from guard.redact import REDACTED, Redactor
from guard.remind import DETAILED_REMINDER, GENTLE_REMINDER, RemindPolicy
from guard.rescue import RESCUE_PLUGIN, RescuePolicy
from guard.trips import Trip, TripKind, TripLog, TripTrigger
from guard.turn_ring import TurnRing, detect_loop
from guard.turns import TURNS_ADVISORY, TURNS_DENIAL, TURNS_HALT_REASON, TurnsPolicy, summarize_result
from guard.verdicts import Difference, ReplayOutcome, Verdict, replay_log

__all__ = [
    "ASK_MODEL_ENV",
    "DEFAULT_IGNORED_ARGS",
    "DEFAULT_INTERJECTIONS",
    "DEFAULT_RESULT_NORMALIZE",
    "DENYING",
    "DETAILED_REMINDER",
    "GENTLE_REMINDER",
    "LOOPS_INTERJECTIONS",
    "LOOPS_PLUGIN",
    "PATTERN_INPUT_LIMIT",
    "PRESETS",
    "RECOMMENDED",
    "REDACTED",
    "RESCUE_PLUGIN",
    "SHADOW_ENV",
    "SHADOW_FORM",
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
    "LoopsToolConfig",
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
    "Shape",
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
    "error_head",
    "error_kind",
    "fingerprint",
    "load_config",
    "parse_config",
    "replay_log",
    "shadowed",
    "summarize_result",
]
