"""Removing secrets from text before it leaves the process.

The rescue policy sends the agent's task, its looping call and that call's
output to an ask command, which usually forwards them to a hosted model.
Whatever credentials the agent happened to print must not go with them. The
built-in rules cover the common shapes (provider API keys, bearer and basic
authorization headers, PEM private keys, passwords in URLs, ``password=...``
style assignments); a deployment adds its own regular expressions for
anything else. Redaction is best effort: it narrows what leaks, it does not
make an untrusted responder safe.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["REDACTED", "Redactor"]

REDACTED = "[REDACTED]"

_BUILTIN: tuple[tuple[str, str], ...] = (
    # PEM private keys, whole block (also a block cut off by an output cap).
    (r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", REDACTED),
    # user:password@ in URLs: keep the user and host, drop the password.
    (r"(?P<keep>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/@]+:)[^\s@/]+(?=@)", rf"\g<keep>{REDACTED}"),
    # Authorization headers and bearer tokens.
    (r"(?i)(?P<keep>\bbearer\s+)[A-Za-z0-9._~+/=-]{8,}", rf"\g<keep>{REDACTED}"),
    (r"(?i)(?P<keep>\bauthorization\s*[:=]\s*(?:basic|token)\s+)\S+", rf"\g<keep>{REDACTED}"),
    # Provider keys with recognizable prefixes.
    (r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{16,}", REDACTED),
    (r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", REDACTED),
    (r"\bgh[pousr]_[A-Za-z0-9]{30,}", REDACTED),
    (r"\bgithub_pat_[A-Za-z0-9_]{40,}", REDACTED),
    (r"\bxox[abposr]-[A-Za-z0-9-]{10,}", REDACTED),
    (r"\bAIza[0-9A-Za-z_-]{35}", REDACTED),
    (r"\bglpat-[A-Za-z0-9_-]{20,}", REDACTED),
    # key = value assignments whose name says secret.
    (
        r"(?i)(?P<keep>\b[\w.-]*(?:api[_-]?key|secret|token|passw(?:or)?d|passwd|credential)[\w.-]*"
        r"[\"']?\s*[:=]\s*[\"']?)(?!\d+\b)[^\s\"',;]{4,}",
        rf"\g<keep>{REDACTED}",
    ),
)


class Redactor:
    """Replaces secrets in text with ``[REDACTED]``.

    ``patterns`` are extra regular expressions (Python syntax); each whole
    match is replaced. They are compiled here, so a bad one raises
    ``re.error`` (the config validates them first, naming the key).
    """

    def __init__(self, patterns: Iterable[str] = ()) -> None:
        rules = [(re.compile(p, re.DOTALL), r) for p, r in _BUILTIN]
        rules.extend((re.compile(p), REDACTED) for p in patterns)
        self._rules = tuple(rules)

    def __call__(self, text: str) -> str:
        for pattern, replacement in self._rules:
            text = pattern.sub(replacement, text)
        return text
