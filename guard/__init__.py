"""repeat-tool-guard: stop AI agents from re-issuing the same tool call.

Attach a ``Guard`` to a ``bus.Bus``; it watches each agent's tool calls and,
per its enabled policies, reminds the model, denies the repeated call, or
escalates. See ``docs/`` for the policies and their configuration.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # not typing's: importing it would cost the forwarding hook more than its round trip
if TYPE_CHECKING:
    from types import ModuleType as _ModuleType
    from typing import Any

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
    from guard.verdicts import Difference, RecordedOutputError, ReplayOutcome, Verdict, replay_events, replay_log

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
    "RecordedOutputError",
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
    "replay_events",
    "replay_log",
    "shadowed",
]

_HOMES: dict[str, str] = {
    "ASK_MODEL_ENV": "guard.policies.escalation",
    "DEFAULT_IGNORED_ARGS": "guard.calls",
    "DEFAULT_INTERJECTIONS": "guard.calls",
    "DEFAULT_RESULT_NORMALIZE": "guard.normalize",
    "DETAILED_REMINDER": "guard.policies.remind",
    "GENTLE_REMINDER": "guard.policies.remind",
    "LOOPS_PLUGIN": "guard.policies.loops",
    "LOOPS_INTERJECTIONS": "guard.calls",
    "PRESETS": "guard.config",
    "RECOMMENDED": "guard.config",
    "REDACTED": "guard.redact",
    "RESCUE_PLUGIN": "guard.policies.rescue",
    "SHADOW_ENV": "guard.config",
    "SHADOW_FORM": "guard.actions",
    "TURNS_ADVISORY": "guard.policies.turns",
    "TURNS_DENIAL": "guard.policies.turns",
    "TURNS_HALT_REASON": "guard.policies.turns",
    "TURNS_THRESHOLD_ENV": "guard.config",
    "Action": "guard.actions",
    "ActionKind": "guard.actions",
    "ActionListener": "guard.guard",
    "AnyPolicy": "guard.policy",
    "AskCommand": "guard.policies.escalation",
    "AskOutcome": "guard.policies.escalation",
    "Config": "guard.config",
    "ConfigError": "guard.config",
    "Difference": "guard.verdicts",
    "Fingerprint": "guard.fingerprint",
    "FingerprintCache": "guard.fingerprint",
    "Guard": "guard.guard",
    "History": "guard.policy",
    "LoopsConfig": "guard.config",
    "LoopsPolicy": "guard.policies.loops",
    "LoopsToolConfig": "guard.config",
    "Policy": "guard.policy",
    "Redactor": "guard.redact",
    "RemindConfig": "guard.config",
    "RemindPolicy": "guard.policies.remind",
    "RecordedOutputError": "guard.verdicts",
    "ReplayOutcome": "guard.verdicts",
    "RescueConfig": "guard.config",
    "RescuePolicy": "guard.policies.rescue",
    "TurnsConfig": "guard.config",
    "TurnsPolicy": "guard.policies.turns",
    "Verdict": "guard.verdicts",
    "action_for": "guard.actions",
    "apply_environment": "guard.config",
    "build_policies": "guard.policies.registry",
    "canonical_json": "guard.fingerprint",
    "fingerprint": "guard.fingerprint",
    "load_config": "guard.config",
    "parse_config": "guard.config",
    "replay_events": "guard.verdicts",
    "replay_log": "guard.verdicts",
    "shadowed": "guard.config",
}
"""Where each public name lives: imported on first use, so a process that needs one
policy (the command hook) does not pay for the whole package."""


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if not TYPE_CHECKING:  # pragma: no branch
    _ModuleType = type(sys)  # without importing types


class _Package(_ModuleType):
    """The package keeps its public names when a submodule of the same name
    (``guard.fingerprint``) is imported, as eager re-exports did."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, _ModuleType) and _HOMES.get(name) == value.__name__:
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
