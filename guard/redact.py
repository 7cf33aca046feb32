"""Removing secrets from text before it leaves the process.

The rescue policy sends the agent's task, its looping call and that call's
output to an ask command, which usually forwards them to a hosted model; trip
logs and structured log events go to files and log collectors. Whatever
credentials the agent happened to print must not go with them.

The rules are data: gitleaks' rule list (``secret_rules/gitleaks.toml``,
MIT licence, carried unchanged) for the long tail of provider keys, and this
project's own rules in the same schema (``secret_rules/builtin.toml``) for
what an agent's session holds that a repository scan does not: command-line
flags, assignments whose name says secret whatever the value, JSON-escaped
text, URL credentials, private key blocks cut short. A deployment adds its own
regular expressions. Every pattern runs on RE2, so redaction takes time
linear in the text. Redaction is best effort: it narrows what leaks, it does
not make an untrusted responder safe.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from typing import Any, NamedTuple

from guard._text import CUT_NOTE, cut_note
from guard.patterns import LiteralSet, Regex, compile_regex

__all__ = ["REDACTED", "REDACT_INPUT_LIMIT", "REDACT_SLACK", "Excerpt", "Redactor", "SecretRule", "load_rules"]

REDACTED = "[REDACTED]"

REDACT_SLACK = 1024
"""Characters kept past a cap until the text is redacted (``Excerpt``,
``Redactor.capped``), so a secret the cap cuts is still whole when the rules
see it."""

REDACT_INPUT_LIMIT = 1 << 20
"""Characters of one text the redactor scans. Anything past it is withheld
(replaced by a note saying how much), never passed on unscanned."""


class Excerpt(NamedTuple):
    """What is kept of a text that will be shown capped: its head (the cap
    plus ``REDACT_SLACK``) and its full length (``Redactor.capped``)."""

    head: str
    total: int

    @classmethod
    def of(cls, text: str, limit: int) -> Excerpt:
        return cls(text[: limit + REDACT_SLACK], len(text))


_RULE_FILES = ("builtin.toml", "gitleaks.toml")
_MAX_DEPTH = 16


def _entropy(text: str) -> float:
    """Shannon entropy in bits per character."""
    total = len(text)
    return -sum(n / total * math.log2(n / total) for n in Counter(text).values())


class _Allowlist:
    """Vetoes a finding (gitleaks' allowlist semantics, without paths and
    commits, which a session does not have)."""

    __slots__ = ("match_all", "never", "regex", "stopwords", "target")

    def __init__(self, spec: Mapping[str, Any], origin: str) -> None:
        self.target: str = spec.get("regexTarget", "secret")
        patterns = spec.get("regexes", [])
        self.regex = compile_regex("|".join(f"(?:{p})" for p in patterns), setting=origin) if patterns else None
        self.stopwords = tuple(w.lower() for w in spec.get("stopwords", []))
        self.match_all = spec.get("condition", "OR").upper() == "AND"
        # Under AND, a path or commit condition can never hold here.
        self.never = self.match_all and bool(spec.get("paths") or spec.get("commits"))

    def allows(self, secret: str, match: str, line: str) -> bool:
        if self.never:
            return False
        target = match if self.target == "match" else line if self.target == "line" else secret
        checks: list[bool] = []
        if self.regex is not None:
            checks.append(self.regex.search(target))
        if self.stopwords:
            lowered = secret.lower()
            checks.append(any(w in lowered for w in self.stopwords))
        return all(checks) if self.match_all else any(checks)


class SecretRule:
    """One rule: where its regular expression matches (and the keywords
    allow it to run), the secret group is redacted unless the secret's
    entropy is too low or an allowlist vetoes it."""

    __slots__ = ("_regex", "_spec", "allowlists", "entropy", "id", "keywords", "origin", "secret_group")

    def __init__(self, spec: Mapping[str, Any], *, origin: str, allowlists: Iterable[_Allowlist] = ()) -> None:
        self.id: str = spec["id"]
        self.origin = origin
        self._spec = spec
        self.keywords = tuple(k.lower().encode() for k in spec.get("keywords", []))
        self.secret_group: int = spec.get("secretGroup", 0)
        self.entropy: float = spec.get("entropy", 0.0)
        self.allowlists = tuple(allowlists)
        self._regex: Regex | None = None

    @property
    def regex(self) -> Regex:
        """Compiled on first use: most rules never see their keywords."""
        regex = self._regex
        if regex is None:
            setting = f"{self.origin} rule {self.id}"
            regex = compile_regex(self._spec["regex"], setting=setting)
            locals_ = [_Allowlist(a, setting) for a in self._spec.get("allowlists", [])]
            self.allowlists = (*locals_, *self.allowlists)
            self._regex = regex  # last: a rule shared by redactors is seen whole or not compiled
        return regex

    def spans(self, data: bytes) -> Iterator[tuple[int, int]]:
        """Byte spans of the secrets this rule finds in ``data`` (UTF-8),
        keywords aside (the ``Redactor`` checks those for all rules at once)."""
        regex = self.regex
        for match in regex.finditer_bytes(data):
            start, end = self._secret_span(match)
            if start >= end:
                continue
            secret = data[start:end].decode("utf-8", "replace")
            if self.entropy and _entropy(secret) <= self.entropy:
                continue
            if self.allowlists and self._allowed(data, match, secret):
                continue
            yield start, end

    def _secret_span(self, match: Any) -> tuple[int, int]:
        if self.secret_group:
            span: tuple[int, int] = match.span(self.secret_group)
            return span
        for group in range(1, len(match.groups()) + 1):
            start, end = match.span(group)
            if end > start:
                return start, end
        whole: tuple[int, int] = match.span()
        return whole

    def _allowed(self, data: bytes, match: Any, secret: str) -> bool:
        start, end = match.span()
        text = data[start:end].decode("utf-8", "replace")
        line_start = data.rfind(b"\n", 0, start) + 1
        line_end = data.find(b"\n", end)
        line = data[line_start : len(data) if line_end < 0 else line_end].decode("utf-8", "replace")
        return any(a.allows(secret, text, line) for a in self.allowlists)


def load_rules(names: Iterable[str] = _RULE_FILES) -> tuple[SecretRule, ...]:
    """The rules of the named files in ``guard/secret_rules``. Rules that
    need a file path (gitleaks' ``path``) or have no regular expression are
    left out: a session's text has no path. A file's global allowlists apply
    to its own rules; ``[extend] disabledRules`` in any file drops rules of
    the others by id."""
    # Imported here, as structlog below: the command hook imports this module
    # and, without rescue, never builds a Redactor.
    import tomllib
    from importlib.resources import files

    folder = files("guard").joinpath("secret_rules")
    loaded = [(name, tomllib.loads(folder.joinpath(name).read_text("utf-8"))) for name in names]
    disabled = {rule for _, data in loaded for rule in data.get("extend", {}).get("disabledRules", [])}
    rules: list[SecretRule] = []
    for name, data in loaded:
        shared = [
            _Allowlist(spec, f"{name} global allowlist")
            for spec in (data.get("allowlist"), *data.get("allowlists", []))
            if spec
        ]
        rules.extend(
            SecretRule(spec, origin=name, allowlists=shared)
            for spec in data.get("rules", [])
            if "regex" in spec and "path" not in spec and spec["id"] not in disabled
        )
    return tuple(rules)


class _UserRule(SecretRule):
    """A configured pattern: its whole match (or its group named ``secret``)
    is redacted, with no keywords, entropy or allowlist."""

    def __init__(self, pattern: str, index: int) -> None:
        super().__init__({"id": f"redact_patterns[{index}]", "regex": pattern}, origin="rescue.redact_patterns")
        self._regex = compile_regex(pattern, setting="rescue.redact_patterns")
        self.secret_group = self._regex.group_index("secret")

    def _secret_span(self, match: Any) -> tuple[int, int]:
        span: tuple[int, int] = match.span(self.secret_group)
        return span


class _Plan:
    """A rule set and one RE2 set of its rules' keywords: a single pass over
    a text says which rules may match it. Built once per rule set and never
    changed, so redactors share it (``_builtin_plan``)."""

    __slots__ = ("always", "by_keyword", "keywords", "rules")
    always: tuple[SecretRule, ...]
    by_keyword: tuple[tuple[int, ...], ...]
    """For each keyword, the positions in ``rules`` of the rules it names."""
    keywords: LiteralSet | None
    rules: tuple[SecretRule, ...]

    def __init__(self, rules: tuple[SecretRule, ...], *, keyed: _Plan | None = None) -> None:
        self.rules = rules
        self.always = tuple(rule for rule in rules if not rule.keywords)
        if keyed is not None:  # ``keyed``'s rules first and no new keyword: share its set and positions
            self.keywords, self.by_keyword = keyed.keywords, keyed.by_keyword
            return
        keywords = sorted({k for rule in rules for k in rule.keywords})
        index = {k: i for i, k in enumerate(keywords)}
        by_keyword: list[list[int]] = [[] for _ in keywords]
        for position, rule in enumerate(rules):
            for k in rule.keywords:
                by_keyword[index[k]].append(position)
        self.by_keyword = tuple(tuple(group) for group in by_keyword)
        self.keywords = LiteralSet(keywords) if keywords else None

    def adding(self, rules: tuple[SecretRule, ...]) -> _Plan:
        """This plan with ``rules`` (which have no keywords) run on every text too."""
        return _Plan((*self.rules, *rules), keyed=self) if rules else self


@functools.cache
def _builtin_plan() -> _Plan:
    """The built-in rules, read, parsed and planned once per process: a
    server holds many sessions' redactors, and each would otherwise hold its
    own copy (about 3 MB, and 20 ms to read)."""
    return _Plan(load_rules())


_CUT = cut_note(0).partition("0")[0]  # "… (+": a substring test before the regular expression
_WORD_ENDS = frozenset(" \t\r\n\"'`,:;=(){}[]<>")
_WORD_READ = 256
_QUOTE_PROBES = 64
"""Cuts inside an open quote of one text whose quote the rules are asked
about (``Redactor._secret_cut``); past them, what each such quote shows
before its cut is dropped unread."""


def _open_quote(segment: str) -> int:
    """Where in ``segment`` the quote opens that is still open at its end
    (``'``, ``"`` or either escaped, as in JSON): the last quote of its kind
    when their number is odd and something follows it; else -1."""
    at = max(segment.rfind("'"), segment.rfind('"'))
    if at < 0 or at == len(segment) - 1:
        return -1
    start = at
    while start and segment[start - 1] == "\\":
        start -= 1
    quote = segment[start : at + 1]
    count = 0
    found = segment.find(quote)
    while found >= 0:
        count += found == 0 or segment[found - 1] != "\\"
        found = segment.find(quote, found + len(quote))
    return at if count % 2 else -1


# a run long enough to hide a secret in (12 bytes or more), in the standard or the URL-safe alphabet
_BASE64_RUN = r"[A-Za-z0-9+/_-]{16,}={0,2}"
_BASE64 = compile_regex(_BASE64_RUN)
# runs on lines of their own, one after another (`base64` wraps its output at 76 columns, PEM at 64),
# the line breaks raw or JSON-escaped, the lines maybe indented, the last one maybe short
_BASE64_LINES = compile_regex(
    _BASE64_RUN
    + r"(?:(?:\\?\r)?\\?\n[ \t]*[A-Za-z0-9+/_-]{16,}={0,2})*(?:(?:\\?\r)?\\?\n[ \t]*[A-Za-z0-9+/_-]{2,}={0,2})?"
)
_LINE_BREAKS = b" \t\r\n\\"
# a word holding a %-escape (a URL-encoded DSN, query or form body)
_PERCENT = compile_regex(r"[^\s\"'<>\\`]*%[0-9A-Fa-f]{2}[^\s\"'<>\\`]*")
_HEX = frozenset(b"0123456789abcdefABCDEF")


def _decoded(run: bytes) -> str | None:
    """The text ``run`` encodes as base64, or ``None`` when it is no base64
    (or no text: a decoded run with a NUL or invalid UTF-8 holds no secret a
    rule could read)."""
    import binascii

    if b"-" in run or b"_" in run:
        run = run.replace(b"-", b"+").replace(b"_", b"/")
    try:  # strict: what base64.b64decode(validate=True) checks, without its Python regular expression
        return binascii.a2b_base64(run + b"=" * (-len(run) % 4), strict_mode=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return None


def _unquoted(run: bytes) -> str | None:
    """The text ``run`` (a word holding at least one %-escape) encodes,
    its ``+`` kept (``_url_encoded`` reads it both as a ``+`` and as a
    form's space); ``None`` when it is no text."""
    import binascii

    # quoted-printable is %-encoding with = for %, decoded in C; a % that escapes nothing shows in the length
    decoded = binascii.a2b_qp(run.replace(b"=", b"=3D").replace(b"%", b"="))
    if len(decoded) != len(run) - 2 * run.count(b"%"):
        pieces = run.split(b"%")
        parts = [pieces[0]]
        for piece in pieces[1:]:
            escape = len(piece) >= 2 and piece[0] in _HEX and piece[1] in _HEX
            parts += (bytes((int(piece[:2], 16),)), piece[2:]) if escape else (b"%", piece)
        decoded = b"".join(parts)
    try:
        return decoded.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _unquoted_offsets(run: bytes, start: int) -> Iterator[int]:
    """For each byte ``_unquoted(run)`` encodes in UTF-8, its offset in the
    text ``run`` stands at ``start`` of, then the offset of ``run``'s end."""
    pieces = run.split(b"%")
    yield from range(start, start + len(pieces[0]))
    at = start + len(pieces[0])
    for piece in pieces[1:]:
        if len(piece) >= 2 and piece[0] in _HEX and piece[1] in _HEX:
            yield at
            yield from range(at + 3, at + 1 + len(piece))
        else:
            yield from range(at, at + 1 + len(piece))
        at += 1 + len(piece)
    yield at


class Redactor:
    """Replaces secrets in text with ``[REDACTED]``.

    ``patterns`` are extra regular expressions (RE2 syntax, see
    ``guard.patterns``); each whole match is replaced, or only the group
    named ``secret`` when the pattern has one. A bad pattern raises
    ``PatternError`` naming ``rescue.redact_patterns``. ``rules`` replaces
    the built-in rule set (``load_rules()``), which is read and planned on
    first use, once per process and shared by every redactor, so a guard
    that never redacts pays nothing for it and a server's sessions hold one
    copy.

    Findings of all rules are collected on the original text and merged,
    so one rule's output never feeds another's input. Surrounding text is
    kept: a rule redacts its secret group (the value of ``password=...``,
    not the name). In a text with something redacted, lone surrogates come
    out as U+FFFD.
    """

    def __init__(self, patterns: Iterable[str] = (), *, rules: Iterable[SecretRule] | None = None) -> None:
        if isinstance(patterns, str):  # would be taken a character at a time
            raise TypeError(f"Redactor(patterns=...) takes a list of regular expressions, not one str: [{patterns!r}]")
        self._user = tuple(_UserRule(p, i) for i, p in enumerate(patterns))
        self._given = tuple(rules) if rules is not None else None
        self._plan: _Plan | None = None

    @property
    def rules(self) -> tuple[SecretRule, ...]:
        return self._planned().rules

    def _planned(self) -> _Plan:
        if self._plan is None:
            base = _builtin_plan() if self._given is None else _Plan(self._given)
            self._plan = base.adding(self._user)
        return self._plan

    def findings(self, text: str) -> Iterator[tuple[SecretRule, int, int]]:
        """Each rule's secrets in ``text`` (at most ``REDACT_INPUT_LIMIT``
        characters) as byte offsets into its UTF-8 encoding, unmerged."""
        plan = self._planned()
        data = text[:REDACT_INPUT_LIMIT].encode("utf-8", "surrogatepass")
        # JSON-escaped text (a call's arguments) glues the n of an escaped
        # newline to the next word, which hides a word boundary from every
        # rule; the rules see each escape as a backslash and the character
        # it stands for, at the same offsets.
        seen = data.replace(b"\\n", b"\\\n").replace(b"\\r", b"\\\r").replace(b"\\t", b"\\\t")
        hits = plan.keywords.found(seen.lower()) if plan.keywords is not None else ()
        # the rules a keyword names, in the plan's order, without a pass over all of them
        chosen = sorted({position for i in hits for position in plan.by_keyword[i]})
        for rule in (*plan.always, *(plan.rules[position] for position in chosen)):
            for start, end in rule.spans(seen):
                yield rule, start, end
        yield from self._encoded(seen)
        if b"%" in seen:
            yield from self._url_encoded(seen)

    def _encoded(self, data: bytes) -> Iterator[tuple[SecretRule, int, int]]:
        """Each base64 run of ``data`` whose decoded text holds a secret, as a
        finding of the rule that found it there: bytes in a call's arguments
        are written as base64, and a secret must not pass as its encoding.
        Lines of base64 one after another (wrapped output) are decoded as
        one block when they decode together, else line by line."""
        for block in _BASE64_LINES.finditer_bytes(data):
            start, end = block.span(0)
            run = data[start:end]
            if b"\n" not in run:  # one run, as most are
                rule = self._decoded_rule(run)
                if rule is not None:
                    yield rule, start, end
                continue
            joined = run.translate(None, _LINE_BREAKS)
            rule = self._decoded_rule(joined[: len(joined) - (len(joined) % 4 == 1)])  # a block cut short: what decodes
            if rule is not None:
                yield rule, start, end
                continue
            for match in _BASE64.finditer_bytes(run):
                rule = self._decoded_rule(match.group(0))
                if rule is not None:
                    yield rule, start + match.start(0), start + match.end(0)

    def _decoded_rule(self, run: bytes) -> SecretRule | None:
        """The first rule that finds a secret in the text base64 ``run`` encodes."""
        decoded = _decoded(run)
        return None if decoded is None else next((rule for rule, _, _ in self.findings(decoded)), None)

    def _url_encoded(self, data: bytes) -> Iterator[tuple[SecretRule, int, int]]:
        """The secrets in the text the %-escaped words of ``data`` encode (a
        URL-encoded DSN or form body), at the offsets of their escaped form:
        the text around them is kept as it was written. The words are
        decoded into one text, a line each, which the rules read once."""
        words: list[tuple[int, bytes]] = []
        texts: list[str] = []
        for match in _PERCENT.finditer_bytes(data):
            text = _unquoted(match.group(0))
            if text is not None:
                words.append((match.start(0), match.group(0)))
                texts.append(text)
        decoded = "\n".join(texts)
        found = list(self.findings(decoded)) if texts else []
        if "+" in decoded:  # a form's + for a space: read both ways (a value of words, a value with a +)
            found += self.findings(decoded.replace("+", " "))
        if found:
            # where each byte of the decoded text came from; a word's end stands for the line break after it
            offsets = [at for start, word in words for at in _unquoted_offsets(word, start)]
            for rule, start, end in found:
                yield rule, offsets[start], offsets[end]

    def _without_cut_words(self, text: str) -> str:
        """``text`` without the part-word before each ``… (+N more chars)``
        cut (a preview cut before it was redacted, as a policy quotes
        arguments): no rule knows a secret by its first characters, so what
        a cut left of a word is dropped with the rest of it, and N counts it.
        A cut inside a quoted secret (``--password='correct horse … (+N more
        chars)``: no rule sees the quote closed) drops what the quote shows
        of it too."""
        pieces: list[str] = []
        at = 0
        probes = _QUOTE_PROBES
        for mark in CUT_NOTE.finditer(text):
            start = mark.start()
            read = max(at, start - _WORD_READ)
            word = start
            while word > read and text[word - 1] not in _WORD_ENDS:
                word -= 1
            line = max(read, text.rfind("\n", read, word) + 1)
            quote = _open_quote(text[line:word])
            if quote >= 0:
                probes -= 1  # past the budget (a text of many cuts), the quote's words go unread
                word = line + (self._secret_cut(text[line:word], quote + 1) if probes >= 0 else quote + 1)
            if word == start:
                continue
            pieces.append(text[at:word])
            pieces.append(cut_note(int(mark.group(1)) + start - word))
            at = mark.end()
        pieces.append(text[at:])
        return "".join(pieces)

    def _secret_cut(self, segment: str, value: int) -> int:
        """Where in ``segment`` a secret starts that the cut after it fell
        in: one a rule finds running to the end of ``segment`` once the
        quote opened before character ``value`` is closed as it was opened
        (``'``, ``"``, ``\\"``); ``len(segment)`` when there is none."""
        start = value - 1
        while start and segment[start - 1] == "\\":
            start -= 1
        data = segment.encode("utf-8", "surrogatepass")
        cut = min((s for _, s, e in self.findings(segment + segment[start:value]) if e >= len(data)), default=len(data))
        return len(data[:cut].decode("utf-8", "ignore")) if cut < len(data) else len(segment)

    def __call__(self, text: str) -> str:
        if not text:
            return text
        tail = ""
        if len(text) > REDACT_INPUT_LIMIT:
            tail = f"… (+{len(text) - REDACT_INPUT_LIMIT} chars withheld: past the redaction limit)"
            text = text[:REDACT_INPUT_LIMIT]
        if _CUT in text:
            text = self._without_cut_words(text)
        spans = sorted((start, end) for _, start, end in self.findings(text))
        if not spans:
            return text + tail
        data = text.encode("utf-8", "surrogatepass")
        out = bytearray()
        at = 0
        marker = REDACTED.encode()
        for start, end in spans:
            if start < at:  # overlaps the previous secret: extend it
                if end > at:
                    at = end
                continue
            out += data[at:start]
            out += marker
            at = end
        out += data[at:]
        return bytes(out).decode("utf-8", "replace") + tail

    def capped(self, text: str | Excerpt, limit: int) -> str:
        """``text`` (or the ``Excerpt`` kept of it) redacted, then cut to
        ``limit`` characters (never inside a ``[REDACTED]`` marker) with a
        ``… (+N more chars)`` note when cut. A word the cut falls in that
        runs on past the slack was never seen whole by the rules (a
        credential longer than ``REDACT_SLACK``): what the cut left of it is
        dropped too, and N counts it."""
        excerpt = Excerpt.of(text, limit) if isinstance(text, str) else text
        redacted = self(excerpt.head)
        if excerpt.total <= limit:
            return redacted
        cut = limit
        straddling = redacted.find(REDACTED, max(0, limit - len(REDACTED) + 1), limit + len(REDACTED) - 1)
        if straddling >= 0:
            cut = straddling + len(REDACTED)
        elif len(excerpt.head) < excerpt.total and cut < len(redacted) and _WORD_ENDS.isdisjoint(redacted[cut - 1 :]):
            while cut > 0 and redacted[cut - 1] not in _WORD_ENDS:
                cut -= 1
        return redacted[:cut] + cut_note(excerpt.total - min(cut, limit))

    def redact_value(self, value: Any, _depth: int = 0) -> Any:
        """``value`` with every string in it redacted: strings, and the
        values and keys of mappings, lists and tuples (to a depth of 16;
        deeper containers become their redacted ``repr``)."""
        if isinstance(value, str):
            return self(value)
        if isinstance(value, (Mapping, list, tuple)) and _depth >= _MAX_DEPTH:
            return self(repr(value))
        if isinstance(value, Mapping):
            return {self.redact_value(k, _depth + 1): self.redact_value(v, _depth + 1) for k, v in value.items()}
        if isinstance(value, list):
            return [self.redact_value(v, _depth + 1) for v in value]
        if isinstance(value, tuple):
            return tuple(self.redact_value(v, _depth + 1) for v in value)
        return value

    def processor(self, logger: Any, method_name: str, event_dict: MutableMapping[str, Any]) -> Any:
        """A structlog processor: every string in the event redacted. An
        ``exc_info`` is rendered to an ``exception`` string first (so a
        secret in an exception message is redacted too); place it before
        the renderer."""
        exc_info = event_dict.pop("exc_info", None)
        if exc_info:
            import structlog

            event_dict["exc_info"] = exc_info
            event_dict = structlog.processors.format_exc_info(logger, method_name, event_dict)
        return {key: self.redact_value(value) for key, value in event_dict.items()}
