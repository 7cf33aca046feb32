"""Secrets are removed from the question before it leaves the process."""

from __future__ import annotations

import pytest

from guard import REDACTED, Redactor

PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\nabc\n-----END RSA PRIVATE KEY-----"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("export ANTHROPIC_API_KEY=sk-ant-api03-AbCdEfGhIjKlMnOpQrSt", f"export ANTHROPIC_API_KEY={REDACTED}"),
        ("key sk-proj-abcdefghijklmnopqrstuv end", f"key {REDACTED} end"),
        ("aws AKIAIOSFODNN7EXAMPLE here", f"aws {REDACTED} here"),
        ("gh ghp_abcdefghijklmnopqrstuvwxyz0123456789", f"gh {REDACTED}"),
        ("pat github_pat_" + "a1" * 25, f"pat {REDACTED}"),
        ("slack xoxb-1234567890-abcdef", f"slack {REDACTED}"),
        ("google AIzaSyA-abcdefghijklmnopqrstuvwxyz01234", f"google {REDACTED}"),
        ("gitlab glpat-abcdefghij0123456789", f"gitlab {REDACTED}"),
        ("Authorization: Bearer eyJhbGciOi.payload.sig", f"Authorization: Bearer {REDACTED}"),
        ("curl -H 'authorization: Basic dXNlcjpwYXNz'", f"curl -H 'authorization: Basic {REDACTED}"),
        ("Authorization: token 0123abcd", f"Authorization: token {REDACTED}"),
        (f"key:\n{PEM}\ndone", f"key:\n{REDACTED}\ndone"),
        ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA (cut", REDACTED),
        ("postgres://app:s3cr3t@db:5432/app", f"postgres://app:{REDACTED}@db:5432/app"),
        ("https://user:p%40ss@example.com/x", f"https://user:{REDACTED}@example.com/x"),
        ('{"password": "hunter2!"}', f'{{"password": "{REDACTED}"}}'),
        ("DB_PASSWD=correcthorse", f"DB_PASSWD={REDACTED}"),
        ("client_secret: abcd1234efgh", f"client_secret: {REDACTED}"),
    ],
)
def test_builtin_rules_redact_common_secrets(text: str, expected: str) -> None:
    assert Redactor()(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "src/cfg.py:12: def load_config(path):",
        "https://example.com/docs?page=2",
        "max_tokens = 4096",
        "ssh user@host",
        "the token is described in docs/auth.md",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert Redactor()(text) == text


def test_configured_patterns_redact_whole_matches() -> None:
    redact = Redactor([r"ACME-\d{6}", r"(?i)internal\.corp\.example"])
    assert redact("ticket ACME-123456 on Internal.Corp.Example") == f"ticket {REDACTED} on {REDACTED}"
