"""The one list of policies the guard knows: the built-in ones, in the order
they are consulted, and those installed packages publish under the
entry-point group ``repeat_tool_guard.policies``.

A built-in policy is a ``Policy`` subclass whose ``name`` is its config
section and whose ``section`` is that section's ``Section`` Struct; it is
built with the section. Adding one is its module plus a line in ``BUILTIN``
(and a typed field of the same name on ``Config``). A plugin is any policy
class published under its section's name; it is built with the section's
keys (``enabled`` aside) as keyword arguments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from guard.policies.loops import LoopsPolicy
from guard.policies.remind import RemindPolicy
from guard.policies.rescue import RescuePolicy
from guard.policies.turns import TurnsPolicy
from guard.policy import AnyPolicy
from guard.section import ConfigError, Section, check_mode

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

    from guard.config import Config

__all__ = [
    "BUILTIN",
    "ENTRY_POINT_GROUP",
    "BuiltinPolicy",
    "build_plugin",
    "build_policies",
    "builtin_names",
    "installed_plugins",
]

ENTRY_POINT_GROUP = "repeat_tool_guard.policies"
"""Where installed packages publish policies: entry-point name = section name."""


class BuiltinPolicy(Protocol):
    """A built-in policy class: built from its own config section."""

    @property
    def name(self) -> str: ...

    @property
    def section(self) -> type[Section]: ...

    def __call__(self, config: Any) -> AnyPolicy: ...


BUILTIN: tuple[BuiltinPolicy, ...] = (
    RemindPolicy,
    TurnsPolicy,
    RescuePolicy,
    LoopsPolicy,
)
"""The built-in policies, in the order the guard consults them."""


def builtin_names() -> tuple[str, ...]:
    return tuple(policy.name for policy in BUILTIN)


def installed_plugins() -> dict[str, EntryPoint]:
    """The policies installed packages publish, by section name; a name a
    built-in policy has is left to the built-in one. ``importlib.metadata``
    loads only here: a process that runs the built-in policies (every
    command hook) does not pay for it."""
    from importlib.metadata import entry_points

    builtin = builtin_names()
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name not in builtin}


def _plugin_class(name: str, found: Mapping[str, EntryPoint] | None = None) -> Any:
    entry = (found if found is not None else installed_plugins()).get(name)
    if entry is None:
        raise ConfigError(name, None, f"no installed package publishes a policy {name!r} ({ENTRY_POINT_GROUP})")
    try:
        return entry.load()
    except Exception as exc:  # an installed package that fails to import
        raise ConfigError(name, entry.value, f"the policy's entry point does not load ({exc})") from None


def _keywords(name: str, settings: Mapping[str, Any]) -> dict[str, Any]:
    enabled = settings.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ConfigError(f"{name}.enabled", enabled, "must be true or false")
    check_mode(f"{name}.mode", settings.get("mode", "enforce"))
    for key in settings:
        if not isinstance(key, str):
            raise ConfigError(f"{name}.{key!r}", settings[key], "keys must be strings")
    return {key: value for key, value in settings.items() if key not in ("enabled", "mode")}


def build_plugin(name: str, settings: Mapping[str, Any], found: Mapping[str, EntryPoint] | None = None) -> AnyPolicy:
    """The installed policy ``name`` built with ``settings`` (its config
    section) as keyword arguments, in shadow mode if ``settings`` say
    ``mode = "shadow"``. A key its class does not take, one it
    requires and lacks, or a value it refuses is a ``ConfigError`` naming it."""
    import inspect

    cls = _plugin_class(name, found)
    keywords = _keywords(name, settings)
    parameters = inspect.signature(cls).parameters.values()
    named = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if not any(p.kind is p.VAR_KEYWORD for p in parameters):
        known = [p.name for p in parameters if p.kind in named]
        for key, value in keywords.items():
            if key not in known:
                raise ConfigError(
                    f"{name}.{key}", value, f"unknown key (known: {', '.join(['enabled', 'mode', *known])})"
                )
    for parameter in parameters:
        if parameter.kind in named and parameter.default is parameter.empty and parameter.name not in keywords:
            raise ConfigError(f"{name}.{parameter.name}", None, "is required")
    try:
        policy = cls(**keywords)
    except (TypeError, ValueError) as exc:
        raise ConfigError(name, dict(keywords), f"refused by the policy ({exc})") from None
    what = f"{cls.__module__}.{cls.__qualname__}"
    for attribute in ("plugin", "watch"):
        if not getattr(policy, attribute, None):
            raise ConfigError(name, what, f"is not a policy (it has no {attribute!r})")
    if policy.name != name:
        raise ConfigError(name, what, f"names itself {policy.name!r}: a policy's name must be its section's")
    try:
        policy.shadow = settings.get("mode") == "shadow"
    except AttributeError:
        raise ConfigError(name, what, "does not take a 'shadow' attribute (mode)") from None
    return policy  # type: ignore[no-any-return]


def build_policies(config: Config, *, share: Sequence[AnyPolicy] = ()) -> list[AnyPolicy]:
    """The policies ``config`` enables, in the order they are consulted:
    the built-in ones in ``BUILTIN`` order, then the installed ones in the
    order of their sections. A built-in policy that is ``shareable`` is
    taken from ``share`` (what an earlier call built for the same config)
    when it is there, rather than built again."""
    shared: dict[object, AnyPolicy] = {type(p): p for p in share if getattr(p, "shareable", False)}
    policies: list[AnyPolicy] = []
    for policy in BUILTIN:
        section = getattr(config, policy.name)
        if section.active:
            reused = shared.get(policy)
            if reused is not None:
                policies.append(reused)
                continue
            built = policy(section)
            built.shadow = section.mode == "shadow"
            policies.append(built)
    if config.plugins:
        found = installed_plugins()
        for name, settings in config.plugins.items():
            if settings.get("enabled", True):
                policies.append(build_plugin(name, settings, found))
    return policies
