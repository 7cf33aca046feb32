"""The benchmark command runs end to end at a tiny size (no timing asserted)."""

from __future__ import annotations

import sys
import tracemalloc
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest

from benchmarks import fullpath, peers
from benchmarks._measure import _calibrate
from benchmarks.cli import main
from benchmarks.settings import Settings
from guard import build_policies
from guard.config import Config
from guard.policies.registry import builtin_names

TINY = [
    *("--seconds", "0.001", "--repeat", "1", "--log-mb", "0.02", "--agents", "1000", "--calls", "30"),
    *("--hook-sizes", "0", "--hook-processes", "1", "--audit-calls", "20", "--corpus", "/nonexistent"),
    *("--http-rounds", "1", "--http-pairs", "1", "--no-fleet"),
]
PEER_MODULES = (
    "blinker",
    "pyee.asyncio",
    "bubus",
    "agent_watchdog",
    "loop_guard",
    "agentloopguard",
    "agent_loop_breaker",
)


def _bench(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    assert main([*TINY, "--format", "json", *extra]) == 0
    machine, *rows = (msgspec.json.decode(line) for line in capsys.readouterr().out.splitlines() if line)
    return machine, rows


def _row(rows: list[dict[str, Any]], section: str, name: str) -> dict[str, Any]:
    return next(r for r in rows if r["section"].startswith(section) and r["name"].startswith(name))


@pytest.mark.slow  # every section of the benchmark, end to end
def test_every_section_reports_rates_and_ratios_to_its_baseline(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # bubus hooks the event loop's close, after which coverage stops tracing
    # the frames that called anyio.run; it gets a test of its own below.
    monkeypatch.setitem(sys.modules, "bubus", None)
    machine, rows = _bench(capsys)
    assert {"python", "cpu", "cores"} <= machine.keys()
    sections = {row["section"].split(",")[0] for row in rows}
    assert sections == {
        "dispatch",
        "dispatch under trio",
        "full path per tool call",
        "session log write",
        "replay",
        "loop detection",
        "memory",
        "memory per session",
        "command hook per invocation",
        "audit",
        "HTTP hook via serve",
    }
    for row in rows:
        if row["unit"].endswith("/s") and not row["extra"].startswith(("not ", "not measured")):
            assert row["rate"] > 0, row
            assert row["baseline"] is None or row["ratio"] > 0, row
    bus = _row(rows, "dispatch, 1 subscriber", "repeat-tool-guard Bus")
    assert bus["baseline"] == "bare await loop"
    assert bus["met"] in (True, False)
    remind = _row(rows, "full path per tool call, small", "Bus + remind + session log")
    assert remind["target"].startswith("<= 1.3× its floor (")
    assert remind["target"].endswith("Bus + remind, then its log lines as raw os.writes), >= 300,000/s")
    assert remind["extra"].split("×")[0].replace(".", "").isdigit(), "its ratio to the floor"
    floor = _row(rows, "full path per tool call, small", "its log lines as raw os.writes")
    assert floor["rate"] > 0


def test_the_bus_is_compared_with_blinker_when_installed(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("blinker", reason="the bench group is not installed: pip install --group bench")
    _, rows = _bench(capsys, "--only", "dispatch", "--no-trio")
    for fan in ("1 subscriber", "4 subscribers"):
        assert _row(rows, f"dispatch, {fan}", "blinker")["rate"] > 0
    bus = _row(rows, "dispatch, 1 subscriber", "repeat-tool-guard Bus")
    assert bus["extra"].endswith("x blinker")
    assert bus["target"] == ">= 2,000,000/s and >= 3x blinker"


def test_bubus_is_measured_when_installed(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("bubus", reason="the bench group is not installed: pip install --group bench")
    _, rows = _bench(capsys, "--only", "dispatch", "--no-trio")
    for fan in ("1 subscriber", "4 subscribers"):
        assert _row(rows, f"dispatch, {fan}", "bubus")["rate"] > 0


def test_guard_flags_the_loop_and_stays_quiet_on_paging(capsys: pytest.CaptureFixture[str]) -> None:
    _, rows = _bench(capsys, "--only", "detection")
    ours = _row(rows, "loop detection", "repeat-tool-guard Bus + Guard")
    assert ours["extra"] == "flags the loop at call 8; quiet on paging"
    pytest.importorskip("agent_watchdog", reason="the bench group is not installed: pip install --group bench")
    watchdog = _row(rows, "loop detection", "agent-watchdog")
    assert watchdog["extra"].startswith("flags the loop at call 8")


def test_gone_agents_leave_no_state_behind(capsys: pytest.CaptureFixture[str]) -> None:
    _, rows = _bench(capsys, "--only", "memory")
    idle, collected, disposed = (r for r in rows if r["section"].startswith("memory,"))
    assert idle["met"] is True
    assert 0 < idle["rate"] < 2_000
    assert collected["extra"].startswith("0 agents still tracked")
    assert disposed["extra"].startswith("0 agents tracked after disposal")
    assert disposed["met"] is True


def test_a_sessions_guard_holds_none_of_what_every_guard_shares(capsys: pytest.CaptureFixture[str]) -> None:
    """The compiled result patterns, the secret rules and the tool-name globs
    are held once per process: a recommended guard per session stays small
    (37 KB when each held its own patterns, 25 KB with its own globs; 6 KB)."""
    _, rows = _bench(capsys, "--only", "memory")
    default, recommended = (r for r in rows if r["section"].startswith("memory per session"))
    assert 0 < default["rate"] < recommended["rate"] < 12_000


def test_missing_peers_become_rows_that_say_how_to_install_them(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for module in PEER_MODULES:
        monkeypatch.setitem(sys.modules, module, None)  # makes the import fail
    _, rows = _bench(capsys, "--only", "dispatch", "--only", "detection", "--no-trio")
    hints = {r["name"] for r in rows if r["extra"] == "not installed: pip install --group bench"}
    assert hints == {
        "blinker",
        "pyee",
        "bubus",
        "agent-watchdog",
        "agent-loop-guard",
        "agentloopguard-sdk",
        "agent-loop-breaker-py",
    }
    assert not any(r["section"].startswith("dispatch under trio") for r in rows)
    assert "blinker" not in _row(rows, "dispatch, 1 subscriber", "repeat-tool-guard Bus")["extra"]


@pytest.mark.parametrize(
    ("fmt", "section", "lines"),
    [
        ("text", "log", ["== session log write (baseline: raw os.write", "SessionLog.write "]),
        ("text", "memory", ["guard state per idle agent ", " B  "]),
        ("markdown", "detection", ["**loop detection, same 30-call stream**", "| openhands-sdk StuckDetector | - |"]),
    ],
)
def test_human_formats_render_a_table(
    capsys: pytest.CaptureFixture[str], fmt: str, section: str, lines: list[str]
) -> None:
    assert main([*TINY, "--only", section, "--format", fmt]) == 0
    out = capsys.readouterr().out
    for line in lines:
        assert line in out


def test_policy_configs_measure_each_implemented_policy_alone_and_all_together(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def every_enabled_section(config: Config) -> list[SimpleNamespace]:
        return [SimpleNamespace(name=name) for name in builtin_names() if getattr(config, name).enabled]

    monkeypatch.setattr(fullpath, "build_policies", every_enabled_section)
    configs, missing = fullpath.policy_configs({})
    assert missing == []
    assert list(configs) == [*builtin_names(), "all"]
    assert all(getattr(configs["all"], name).enabled for name in builtin_names())
    assert [name for name in builtin_names() if getattr(configs["remind"], name).enabled] == ["remind"]


def test_policies_this_build_lacks_are_listed_not_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    real = build_policies
    monkeypatch.setattr(fullpath, "build_policies", lambda config: [p for p in real(config) if p.name == "remind"])
    configs, missing = fullpath.policy_configs({})
    assert list(configs) == ["remind"]
    assert missing == [name for name in builtin_names() if name != "remind"]


def test_memory_is_measured_under_an_already_running_tracemalloc(capsys: pytest.CaptureFixture[str]) -> None:
    tracemalloc.start()
    try:
        _, rows = _bench(capsys, "--only", "memory")
        assert tracemalloc.is_tracing()
    finally:
        tracemalloc.stop()
    assert rows[0]["met"] is True


def test_a_peer_without_distribution_metadata_shows_an_unknown_version() -> None:
    assert peers.version("no-such-distribution-for-repeat-tool-guard") == "?"


def test_several_runs_report_the_median_of_each_case(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*TINY, "--format", "json", "--only", "log", "--runs", "3"]) == 0
    out, err = capsys.readouterr()
    _, *rows = (msgspec.json.decode(line) for line in out.splitlines() if line)
    logged = _row(rows, "session log write", "SessionLog.write")
    assert logged["target"].startswith(">= 50% of raw, met in ")
    assert logged["target"].endswith(" of 3 runs")
    assert [r["name"] for r in rows] == ["raw os.write of pre-encoded lines", "SessionLog.write"]
    assert "benchmarks: run 3 of 3: log ..." in err


def test_the_http_hook_is_measured_against_the_same_servers_bare_route(capsys: pytest.CaptureFixture[str]) -> None:
    _, rows = _bench(capsys, "--only", "http-hook", "--skip", "fleet", "--hook-sizes", "0,5")
    assert [row["name"] for row in rows] == [
        "GET /healthz (the bare route)",
        "POST /hooks/claude-code, 0 earlier calls",
        "POST /hooks/claude-code, 5 earlier calls",
    ]
    for row in rows[1:]:
        assert row["baseline"] == "GET /healthz"
        assert "× the bare route's" in row["extra"]
        assert row["met"] in (True, False)


def test_skipped_sections_are_left_out(capsys: pytest.CaptureFixture[str]) -> None:
    _, rows = _bench(capsys, "--only", "log", "--only", "http-hook", "--skip", "http-hook")
    assert {row["section"] for row in rows} == {"session log write"}


@pytest.mark.parametrize(("option", "value"), [("--seconds", "0"), ("--repeat", "-1"), ("--agents", "many")])
def test_bad_sizes_are_usage_errors_naming_the_value(
    capsys: pytest.CaptureFixture[str], option: str, value: str
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([option, value])
    assert exit_.value.code == 2
    assert repr(value) in capsys.readouterr().err


@pytest.mark.anyio
async def test_calibration_stops_at_a_cap_for_a_case_too_fast_to_time(anyio_backend: str) -> None:
    async def instant(n: int) -> None:
        return None

    assert await _calibrate(instant, seconds=3600.0) > 0


@pytest.mark.anyio
async def test_the_full_path_answers_a_denied_call_with_its_denial(tmp_path: Path, anyio_backend: str) -> None:
    """As an adapter does: the denied tool does not run, so its output is
    never published (the guard would count it as another repeat)."""
    configs, _ = fullpath.policy_configs({})
    groups = await fullpath._log_lines(fullpath._pairs(256, 0), Settings(tmpdir=tmp_path), configs["loops"])
    results = [msgspec.json.decode(line) for group in groups for line in group if line.startswith(b'{"type":"tool/res')]
    denied = [r for r in results if r.get("denied_by")]
    assert len(results) == 256
    assert denied
    assert all(r["denied_by"] == "loop-detector" and r["content"].startswith("loop-detector denied") for r in denied)
