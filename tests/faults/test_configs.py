"""Hostile and careless configs: each a one-line error (exit 2) that names
what is wrong and quotes no value longer than a line, in bounded time."""

from __future__ import annotations

from pathlib import Path

import pytest

from guard.config import TURNS_THRESHOLD_ENV
from tests.faults.conftest import CLI

ALIAS_BOMB = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
remind:
  thresholds: *i
"""

CASES = {
    "alias-bomb.yaml": (ALIAS_BOMB, "aliases (*name) are not allowed in a config at line 2, column 8"),
    "alias.yaml": ("base: &t [3, 5]\nremind:\n  thresholds: *t\n", "aliases (*name) are not allowed"),
    "merge-key.yaml": ("x: &x {enabled: true}\nremind:\n  <<: *x\n", "aliases (*name) are not allowed"),
    "duplicate.yaml": ("remind:\n  thresholds: [3]\n  thresholds: [4]\n", "key 'thresholds' is given twice"),
    "duplicate-section.yaml": ("remind: {}\nremind: {}\n", "key 'remind' is given twice"),
    "duplicate.toml": ("[remind]\nthresholds = [3]\nthresholds = [4]\n", "is not valid TOML"),
    "huge-int.yaml": ("remind:\n  thresholds: [" + "9" * 5000 + "]\n", "holds a number of more than 4300 digits"),
    "huge-int.toml": ("[remind]\nthresholds = [" + "9" * 5000 + "]\n", "holds a number of more than 4300 digits"),
    "multi-line-error.yaml": ("remind:\n  thresholds: [3, 5\n  exclude: x\n", "is not valid YAML"),
    "tabs.yaml": ("remind:\n\tthresholds: [3]\n", "is not valid YAML"),
    "long-value.toml": ('[remind]\nthresholds = "' + "x" * 60_000 + '"\n', "remind.thresholds = 'xxxx"),
    "long-list.yaml": ("remind:\n  exclude: " + str(list(range(5_000))) + "\n", "remind.exclude[0] = 0"),
    "long-key.toml": ("[remind]\n" + "k" * 60_000 + " = 1\n", "unknown key"),
    "huge.yaml": ("remind:\n  exclude: [" + "a, " * 100_000 + "]\n", "is larger than 64 KiB"),
    "huge.toml": ("# " + "x" * 1_000_000 + "\n", "is larger than 64 KiB"),
    "not-utf8.toml": ("[remind]\nx = '\udcff'\n", "is not valid TOML"),
    "list.yaml": ("- 1\n- 2\n", "must be a table of policy sections"),
    "list-key.yaml": ("? [1, 2]\n: x\n", "found unhashable key at line 1, column 3"),
    "nul.yaml": ("remind:\n  thresholds: [3]\x00\n", "unacceptable character #x0000"),
    "two-documents.yaml": ("remind: {}\n---\nturns: {}\n", "expected a single document"),
    "scalar.toml": ("remind = 3\n", "remind = 3: must be a table of settings"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_bad_config_is_one_short_line(name: str, tmp_path: Path, cli: CLI) -> None:
    text, expected = CASES[name]
    config = tmp_path / name
    config.write_bytes(text.encode("utf-8", "surrogateescape"))
    line = cli("check-config", config).clean_error(2)
    assert expected in line
    assert len(line) < 1000


@pytest.mark.parametrize("suffix", [".toml", ".yaml"])
def test_a_byte_order_mark_is_accepted(suffix: str, tmp_path: Path, cli: CLI) -> None:
    config = tmp_path / f"guard{suffix}"
    body = "[remind]\nthresholds = [2, 7]\n" if suffix == ".toml" else "remind:\n  thresholds: [2, 7]\n"
    config.write_bytes(b"\xef\xbb\xbf" + body.encode())
    run = cli("check-config", config)
    assert run.code == 0, run.err
    assert '"thresholds": [\n      2,\n      7\n    ]' in run.out


@pytest.mark.parametrize("value", ["", "x", "1", "-3", "9" * 5000])
def test_check_config_validates_the_environment_override_as_live_guards_do(
    value: str, tmp_path: Path, cli: CLI, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "guard.toml"
    config.write_text("[turns]\n")
    monkeypatch.setenv(TURNS_THRESHOLD_ENV, value)
    for argv in (["check-config", config], ["check-config", config, "--toml"]):
        line = cli(*argv).clean_error(2)
        assert line.startswith(f"repeat-tool-guard: {TURNS_THRESHOLD_ENV} = ")
        assert len(line) < 300


def test_check_config_shows_the_environment_override_in_effect(
    tmp_path: Path, cli: CLI, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "guard.toml"
    config.write_text("[turns]\nthreshold = 5\n")
    monkeypatch.setenv(TURNS_THRESHOLD_ENV, "9")
    run = cli("check-config", config)
    assert run.code == 0
    assert '"threshold": 9' in run.out
