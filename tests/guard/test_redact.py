"""Secrets are removed from text before it leaves the process."""

from __future__ import annotations

import base64
import sys
from typing import Any

import pytest

from guard import REDACTED, Redactor
from guard.patterns import PatternError
from guard.redact import REDACT_INPUT_LIMIT, SecretRule, load_rules
from tests.guard.secret_samples import ALNUM, KEPT, SAMPLES, Sample, token


@pytest.fixture(scope="module")
def redact() -> Redactor:
    return Redactor()


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.name for s in SAMPLES])
def test_every_format_is_redacted_and_its_context_kept(redact: Redactor, sample: Sample) -> None:
    assert redact(sample.text) == sample.redacted(REDACTED)


@pytest.mark.parametrize("text", KEPT)
def test_ordinary_text_is_left_alone(redact: Redactor, text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize("sample", SAMPLES[::7], ids=[s.name for s in SAMPLES[::7]])
@pytest.mark.parametrize("alphabet", ["standard", "urlsafe"])
def test_a_secret_written_as_base64_is_redacted_whole(redact: Redactor, sample: Sample, alphabet: str) -> None:
    """Bytes in a call's arguments are written as base64: a secret in them
    must not pass as its encoding."""
    encode = base64.b64encode if alphabet == "standard" else base64.urlsafe_b64encode
    encoded = encode(sample.text.encode()).decode()
    assert redact(f'upload {{"data":"{encoded}"}}') == f'upload {{"data":"{REDACTED}"}}'


@pytest.mark.parametrize(
    "text", [*KEPT[:5], "sha256 deadbeefcafebabe0123456789abcdef", "a PNG header iVBORw0KGgoAAAANSUhEUg=="]
)
def test_base64_of_ordinary_text_or_binary_is_left_alone(redact: Redactor, text: str) -> None:
    encoded = base64.b64encode(text.encode()).decode()
    assert redact(f"{text} {encoded}") == f"{text} {encoded}"


def test_a_secret_after_an_escaped_newline_is_found(redact: Redactor) -> None:
    key = "ghp_" + token(ALNUM, 36, "escaped-newline")
    assert redact(f'{{"command":"cd app\\n{key} push"}}') == f'{{"command":"cd app\\n{REDACTED} push"}}'


def test_secrets_in_double_escaped_json_keep_their_escapes(redact: Redactor) -> None:
    text = '{"input":"{\\\\\\"SecretAccessKey\\\\\\": \\\\\\"abc/def+ghi\\\\\\"}"}'
    assert redact(text) == text.replace("abc/def+ghi", REDACTED)


def test_overlapping_findings_become_one_marker(redact: Redactor) -> None:
    key = "sk_live_" + token(ALNUM, 24, "overlap")
    assert redact(f"STRIPE_SECRET={key} ok") == f"STRIPE_SECRET={REDACTED} ok"


def test_configured_patterns_redact_whole_matches() -> None:
    redact = Redactor([r"ACME-\d{6}", r"(?i)internal\.corp\.example"])
    assert redact("ticket ACME-123456 on Internal.Corp.Example") == f"ticket {REDACTED} on {REDACTED}"


def test_a_configured_pattern_may_name_the_part_to_redact() -> None:
    redact = Redactor([r"employee (?P<secret>\d{5})"])
    assert redact("employee 12345 logged in") == f"employee {REDACTED} logged in"


def test_a_pattern_re2_cannot_run_in_linear_time_is_refused_naming_the_setting() -> None:
    with pytest.raises(PatternError) as info:
        Redactor([r"(?<=key=)\w+"])
    assert info.value.setting == "rescue.redact_patterns"
    assert "lookbehind is not supported" in info.value.reason


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"command":"printf %s ghp_R7kX2mQ9vL4nP8sT… (+20 more chars)', '{"command":"printf %s … (+40 more chars)'),
        ("token=sk-ant-api03-AbC… (+80 more chars)", "token=… (+96 more chars)"),
        (
            "glpat-x1Y2… (+10 more chars) then github_pat_11AB… (+70 more chars)",
            "… (+20 more chars) then … (+85 more chars)",
        ),
        ("pytest -k 'cut… (+5 more chars)", "pytest -k '… (+8 more chars)"),
        ("nothing cut: ends at a space … (+5 more chars)", "nothing cut: ends at a space … (+5 more chars)"),
        ("a mark that is no cut… (+many more chars)", "a mark that is no cut… (+many more chars)"),
    ],
)
def test_a_word_a_preview_cut_is_dropped_with_the_rest_of_it(redact: Redactor, text: str, expected: str) -> None:
    """No rule knows a secret by its first characters: what a cut before
    redaction left of a word is dropped, and the count includes it."""
    assert redact(text) == expected
    assert redact(expected) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("mysql --password='correct hor… (+30 more chars)", "mysql --password='… (+41 more chars)"),
        (
            '{"command":"mysql app --password=\\"correct hor… (+30 more chars)',
            '{"command":"mysql app --password=\\"… (+41 more chars)',
        ),
        ('{"user": "bob", "password": "correct h… (+9 more chars)', '{"user": "bob", "password": "… (+18 more chars)'),
        ("export DB_PASSWORD='my sec… (+3 more chars)", "export DB_PASSWORD='… (+9 more chars)"),
    ],
)
def test_a_cut_inside_a_quoted_secret_drops_all_the_quote_shows(redact: Redactor, text: str, expected: str) -> None:
    """A passphrase with spaces cut inside its quote: no rule sees it
    closed, and the words before the cut would pass; the quote's visible
    part goes with the cut word, and the count includes it."""
    assert redact(text) == expected
    assert redact(expected) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "git commit -m 'fix the parser for lo… (+30 more chars)",
            "git commit -m 'fix the parser for … (+32 more chars)",
        ),
        ("password='abc' and then a lo… (+5 more chars)", f"password='{REDACTED}' and then a … (+7 more chars)"),
    ],
)
def test_a_cut_inside_a_quote_that_holds_no_secret_drops_only_the_cut_word(
    redact: Redactor, text: str, expected: str
) -> None:
    assert redact(text) == expected


def test_a_long_word_before_a_cut_is_dropped_as_far_as_it_is_read(redact: Redactor) -> None:
    text = "x" * 100_000 + "… (+1 more chars)"
    assert redact(text) == "x" * (100_000 - 256) + "… (+257 more chars)"


def test_text_past_the_input_limit_is_withheld_not_passed_on(redact: Redactor) -> None:
    text = "a" * REDACT_INPUT_LIMIT + "password=hunter2"
    assert redact(text) == "a" * REDACT_INPUT_LIMIT + "… (+16 chars withheld: past the redaction limit)"


def test_pathological_inputs_come_back_unchanged(redact: Redactor) -> None:
    for text in ("a-" * 8000, "=" * 20_000, "password" * 2000, "sed -i " * 9000):
        assert redact(text) == text
    assert "BEGIN" not in redact("-----BEGIN PRIVATE KEY-----" * 500)


def test_lone_surrogates_do_not_stop_redaction(redact: Redactor) -> None:
    assert redact("\ud800 password=hunter2") == f"\ufffd\ufffd\ufffd password={REDACTED}"


def test_empty_text_is_returned_as_is(redact: Redactor) -> None:
    assert redact("") == ""


def test_rules_come_from_gitleaks_and_this_project() -> None:
    rules = {rule.id: rule for rule in load_rules()}
    assert {rule.origin for rule in rules.values()} == {"builtin.toml", "gitleaks.toml"}
    assert len([r for r in rules.values() if r.origin == "gitleaks.toml"]) > 200
    assert "curl-auth-user" not in rules  # disabled by builtin.toml: it redacts the user name too
    assert "kubernetes-secret-yaml" not in rules  # needs a file path a session does not have


def _rule(regex: str, **spec: Any) -> SecretRule:
    return SecretRule({"id": "test", "regex": regex, **spec}, origin="test")


@pytest.mark.parametrize(
    ("spec", "text", "expected"),
    [
        ({"entropy": 3.0}, "id=aaaaaaaa id=Zq3vR8pLm2", f"id=aaaaaaaa id={REDACTED}"),
        ({"secretGroup": 2}, "id=one:two", f"id=one:{REDACTED}"),
        ({"allowlists": [{"regexes": ["^one"]}]}, "id=one id=two", f"id=one id={REDACTED}"),
        ({"allowlists": [{"stopwords": ["ONE"]}]}, "id=xoney id=two", f"id=xoney id={REDACTED}"),
        (
            {"allowlists": [{"regexTarget": "match", "regexes": ["^id=t"]}]},
            "id=one id=two",
            f"id={REDACTED} id=two",
        ),
        (
            {"allowlists": [{"regexTarget": "line", "regexes": ["skip"]}]},
            "id=one\nid=two skip",
            f"id={REDACTED}\nid=two skip",
        ),
        (
            {"allowlists": [{"condition": "AND", "regexes": ["^o"], "stopwords": ["ne"]}]},
            "id=one id=oak",
            f"id=one id={REDACTED}",
        ),
        (
            {"allowlists": [{"condition": "AND", "regexes": ["^o"], "paths": ["x"]}]},
            "id=one",
            f"id={REDACTED}",
        ),
    ],
)
def test_rule_data_follows_gitleaks_semantics(spec: dict[str, Any], text: str, expected: str) -> None:
    regex = r"id=(\w+):(\w+)" if "secretGroup" in spec else r"id=(\w+)"
    assert Redactor(rules=[_rule(regex, **spec)])(text) == expected


def test_empty_matches_redact_nothing() -> None:
    assert Redactor(rules=[_rule(r"(x*)")])("abc") == "abc"


def test_keywords_gate_a_rule_and_a_rule_without_groups_redacts_its_match() -> None:
    rule = _rule(r"\d{4}", keywords=["pin"])
    redact = Redactor(rules=[rule])
    assert redact("code 1234") == "code 1234"
    assert redact("PIN 1234") == f"PIN {REDACTED}"


def test_redact_value_walks_containers() -> None:
    redact = Redactor(rules=[_rule(r"s3cr3t")])
    deep: Any = "s3cr3t"
    for _ in range(20):
        deep = [deep]
    value = {"a": ["s3cr3t", ("s3cr3t", 1)], "s3cr3t": None, "deep": deep}
    out = redact.redact_value(value)
    assert out["a"] == [REDACTED, (REDACTED, 1)]
    assert REDACTED in out
    assert "s3cr3t" not in repr(out)


def test_the_structlog_processor_redacts_fields_and_rendered_exceptions() -> None:
    redact = Redactor(rules=[_rule(r"s3cr3t")])
    try:
        raise ValueError("bad value s3cr3t")
    except ValueError:
        exc_info = sys.exc_info()
    event = redact.processor(None, "error", {"event": "failed s3cr3t", "error": "s3cr3t", "exc_info": exc_info})
    assert event["event"] == f"failed {REDACTED}"
    assert event["error"] == REDACTED
    assert "ValueError: bad value [REDACTED]" in event["exception"]
    assert "exc_info" not in event
    assert redact.processor(None, "info", {"event": "plain", "exc_info": None}) == {"event": "plain"}


def test_redactors_hold_one_shared_copy_of_the_built_in_rules() -> None:
    """A server's sessions each have a redactor; the built-in rules (read
    from TOML, about 3 MB) are held once, and a redactor's own patterns
    stay its own."""
    plain, other, extended = Redactor(), Redactor(), Redactor(["tok_[a-z]+"])
    assert plain("key ghp_" + "a1" * 18) == f"key {REDACTED}"
    assert all(a is b for a, b in zip(plain.rules, other.rules, strict=True))
    assert extended.rules[: len(plain.rules)] == plain.rules
    assert extended("tok_abc") == REDACTED
    assert plain("tok_abc") == "tok_abc"


def test_one_pattern_given_as_a_str_is_refused_not_read_a_character_at_a_time() -> None:
    with pytest.raises(TypeError, match=r"takes a list of regular expressions, not one str: \['token'\]"):
        Redactor("token")  # a str is an Iterable[str]: only a check at run time tells


def test_a_percent_word_with_a_stray_percent_is_decoded_around_it_and_one_that_is_no_text_is_kept() -> None:
    """A %-encoded DSN with a ``%`` that escapes nothing (a typed ``%ZZ``)
    is still read, its secret redacted where it is written; a word whose
    escapes decode to no UTF-8 holds no text a rule could read."""
    redact = Redactor()
    dsn = "conn=postgres%3A%2F%2Fadmin%3Ahunter2pass%40db%ZZ"
    assert redact(dsn) == f"conn=postgres%3A%2F%2Fadmin%3A{REDACTED}%40db%ZZ"
    assert redact("blob=%ff%fe%00x") == "blob=%ff%fe%00x"
