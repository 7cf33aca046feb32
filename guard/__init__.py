"""repeat-tool-guard: stop AI agents from re-issuing the same tool call.

Attach a ``Guard`` to a ``bus.Bus``; it watches each agent's tool calls and,
per its enabled policies, reminds the model, denies the repeated call, or
escalates. See ``docs/`` for the policies and their configuration.
"""

from guard.actions import SHADOW_FORM, Action, ActionKind, action_for
from guard.calls import DEFAULT_IGNORED_ARGS, DEFAULT_INTERJECTIONS, LOOPS_INTERJECTIONS
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
from guard.fingerprint import Fingerprint, FingerprintCache, canonical_json, fingerprint
from guard.guard import ActionListener, Guard
from guard.normalize import DEFAULT_RESULT_NORMALIZE
from guard.policies.escalation import ASK_MODEL_ENV, AskCommand, AskOutcome
from guard.policies.loops import LOOPS_PLUGIN, LoopsPolicy
from guard.policies.registry import build_policies
from guard.policies.remind import DETAILED_REMINDER, GENTLE_REMINDER, RemindPolicy
from guard.policies.rescue import RESCUE_PLUGIN, RescuePolicy
from guard.policies.turns import TURNS_ADVISORY, TURNS_DENIAL, TURNS_HALT_REASON, TurnsPolicy
from guard.policy import AnyPolicy, History, Policy
from guard.redact import REDACTED, Redactor
from guard.verdicts import Difference, ReplayOutcome, Verdict, replay_log

__all__ = [
    "ASK_MODEL_ENV",
    "DEFAULT_IGNORED_ARGS",
    "DEFAULT_INTERJECTIONS",
    "DEFAULT_RESULT_NORMALIZE",
    "DETAILED_REMINDER",
    "GENTLE_REMINDER",
    "LOOPS_INTERJECTIONS",
    "LOOPS_PLUGIN",
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
    "AskCommand",
    "AskOutcome",
    "Config",
    "ConfigError",
    "Difference",
    "Fingerprint",
    "FingerprintCache",
    "Guard",
    "History",
    "LoopsConfig",
    "LoopsPolicy",
    "LoopsToolConfig",
    "Policy",
    "Redactor",
    "RemindConfig",
    "RemindPolicy",
    "ReplayOutcome",
    "RescueConfig",
    "RescuePolicy",
    "TurnsConfig",
    "TurnsPolicy",
    "Verdict",
    "action_for",
    "apply_environment",
    "build_policies",
    "canonical_json",
    "fingerprint",
    "load_config",
    "parse_config",
    "replay_log",
    "shadowed",
]
