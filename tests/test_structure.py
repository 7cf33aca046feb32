"""The package structure the design promises: ``bus`` stands alone, the
public names are a deliberate list, and the layers import downwards only."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import bus
import guard

REPO = Path(__file__).resolve().parents[1]


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_importing_bus_loads_no_guard_module() -> None:
    probe = "import sys, bus, bus.redis_log\nprint(sorted(m for m in sys.modules if m.split('.')[0] == 'guard'))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, check=True)
    assert done.stdout.strip() == "[]"


def test_bus_public_names() -> None:
    assert sorted(bus.__all__) == sorted(
        [
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
            "open_regular",
            "private_dir",
            "read_log",
            "read_regular",
            "block_lines",
            "too_deep",
        ]
    )


def test_guard_public_names() -> None:
    assert sorted(guard.__all__) == sorted(
        [
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
    )
    assert all(hasattr(guard, name) for name in guard.__all__)


def test_the_engine_imports_no_concrete_policy() -> None:
    engine = _imports(REPO / "guard" / "guard.py")
    assert {m for m in engine if m.startswith("guard.policies.")} == {"guard.policies.registry"}


def test_bus_imports_nothing_of_guard() -> None:
    for path in (REPO / "bus").rglob("*.py"):
        assert not {m for m in _imports(path) if m.split(".")[0] == "guard"}, path


def test_the_server_uses_no_private_module_of_the_adapters() -> None:
    for path in (REPO / "guard" / "server").rglob("*.py"):
        private = {m for m in _imports(path) if m.startswith("guard.adapters._")}
        assert not private, f"{path.name} imports {private}"


def test_the_fleet_keeps_its_documented_import_path() -> None:
    from guard.fleet import FleetGuard, Outcome
    from guard.sessions.answer import Answer
    from guard.sessions.fleet import FleetGuard as Moved

    assert (FleetGuard, Outcome) == (Moved, Answer)


def test_the_repository_carries_no_run_leftovers() -> None:
    """A state directory or server log written by a manual run is no part of the project."""
    listed = subprocess.run(["git", "ls-files"], capture_output=True, text=True, cwd=REPO)
    if listed.returncode != 0:
        return  # not a git checkout (an unpacked sdist): nothing was committed
    top = {line.split("/")[0] for line in listed.stdout.splitlines()}
    expected = {".ci", ".claude-plugin", ".gitignore", "README.md", "pyproject.toml"}
    expected |= {"benchmarks", "bus", "docs", "guard", "plugins", "scenarios", "tests"}
    assert top <= expected, f"unexpected top-level entries: {sorted(top - expected)}"
