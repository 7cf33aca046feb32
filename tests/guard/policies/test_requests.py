"""What a user's message asks for, read in the languages users write in."""

import pytest

from guard.policies.requests import (
    UNTIL_REPEATS,
    asks_to_keep_polling,
    asks_to_repeat,
    makes_thing,
    requested_makes,
    requested_repeats,
)


def test_requested_repeats_reads_counts_in_words_and_digits() -> None:
    assert requested_repeats("Run the flaky integration test six times") == 6
    assert requested_repeats("retry 3 more times, then twice more") == 3
    assert requested_repeats("Sometimes it fails; look at the log") == 0
    assert requested_repeats("run it 4x") == 4
    assert requested_repeats("run it twice") == 2
    assert requested_repeats("Until the end of the file, fix the types") == 0
    assert requested_repeats("Submit six training runs with random seeds") == 6
    assert requested_repeats("spin up 15 load-test workers") == 15
    assert requested_repeats("we have 12 agents in prod, fix the deploy script") == 0, "agents named, none asked for"
    assert requested_repeats("My laptop can't run 10 agents locally") == 0
    assert requested_repeats("it breaks with 40 items in the cart") == 0  # a number of things, no repeats
    assert requested_repeats("fix the 3 failing tests") == 0
    assert requested_repeats("Add 4 blank rows at the bottom of the Leads sheet.") == 0, "things made, no repeat"
    assert requested_repeats("Are orders 1001-1004 delivered? Double-check.") == 2


def test_requested_makes_reads_what_is_to_be_made_and_how_many() -> None:
    assert requested_makes("Add 4 blank rows at the bottom of the Leads sheet.") == {"row": 4}
    assert requested_makes("Create 5 identical 'Onboarding checklist' placeholder tickets, one per hire.") == {
        "ticket": 5
    }
    assert requested_makes("make 3 copies of the report") == {"copy": 3}
    assert requested_makes("create 3 empty boxes and 2 blank matches") == {"box": 3}
    assert requested_makes("insert 4 more empty rows") == {"row": 4}
    assert requested_makes("Insert 5 new rows under the header, then copy the totals from Sheet2.") == {"row": 5}
    assert requested_makes("Send 3 test notifications to my phone.") == {"notification": 3}
    assert requested_makes("Add 20 rows from leads.csv to the Leads sheet") == {}, "each row its own"
    assert requested_makes("Send 30 invitation emails to the attendees") == {}, "each to its own attendee"
    assert requested_makes("add 2 to the total") == {}, "a number added, nothing made"
    assert requested_makes("fix the 3 failing tests") == {}
    assert requested_makes("add 4 rows. " + "Context: " * 40) == {}, "a long task describes"


def test_what_a_call_makes_is_read_from_its_tool_or_command() -> None:
    asked = requested_makes("Add 10 seconds to the retry delay, then create 3 new issues for the flaky tests.")
    assert makes_thing(asked, "mcp__github__create_issue") == 3
    assert makes_thing(asked, "gh issue create -t flaky") == 3
    assert makes_thing(asked, "create_user") == 0, "no user asked for"
    assert makes_thing(asked, "mcp__atlassian__jira_create_ticket") == 3, "a ticket is an issue by another name"
    pings = requested_makes("Send 5 identical test pings to #ops.")
    assert makes_thing(pings, "slack_post_message") == 5
    rows = requested_makes("Insert 5 new rows under the header.")
    assert (makes_thing(rows, "sheets_insertRow"), makes_thing(rows, "add_rows")) == (5, 5)
    assert makes_thing(rows, "throw_error") == 0, "a word of its own, not a part of one"


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("Führ den Test bitte noch dreimal aus", 3),
        ("lass es 5 mal laufen", 5),
        ("relance le test trois fois", 3),
        ("ejecuta las pruebas dos veces más", 2),
        ("roda os testes 4 vezes", 4),
        ("esegui il test 3 volte", 3),
        ("запусти тест 3 раза", 3),
        ("esegui il test cinque volte", 5),
        ("rilancialo altre tre volte", 3),
        ("roda os testes mais três vezes", 3),
        ("roda duas vezes", 2),
        ("запусти тест три раза", 3),
        ("прогони пять раз", 5),
        ("draai de test nog vijf keer", 5),
        ("테스트를 5번 실행해 주세요", 5),
        ("세 번 돌려줘", 3),
        ("再跑三次测试", 3),
        ("テストを3回実行して", 3),
        ("a veces falla, mira el log", 0),  # "sometimes"
        ("今回はテストを直して", 0),  # "this time"
        ("这次把测试修好", 0),  # "this time"
        ("schau mal in die Logs", 0),  # "mal" as a particle
    ],
)
def test_requested_repeats_reads_counts_in_other_languages(text: str, count: int) -> None:
    assert requested_repeats(text) == count


def test_vague_and_open_ended_requests_are_read_generously() -> None:
    assert requested_repeats("run it a few times to see if it is flaky") == 5
    assert requested_repeats("try several more times") == 5
    assert requested_repeats("a couple of times is enough") == 3
    assert requested_repeats("keep running the test until it passes") == UNTIL_REPEATS
    assert requested_repeats("retry the upload until it goes through") == UNTIL_REPEATS
    assert requested_repeats("Don't answer yet, instead keep using the `get_final_answer` tool.") == UNTIL_REPEATS
    assert requested_repeats("call the status endpoint repeatedly") == UNTIL_REPEATS
    assert requested_repeats("use get_final_answer again and again") == UNTIL_REPEATS


@pytest.mark.parametrize(
    "text",
    [
        "run it again",
        "retry",
        "try once more",
        "rerun the suite",
        "one more time please",
        "keep polling the job",
        "double-check",
    ],
)
def test_a_message_asking_for_it_again_asks_to_repeat(text: str) -> None:
    assert asks_to_repeat(text)


@pytest.mark.parametrize("text", ["ok", "continue", "looks good", "fix the parser", "a gain of 3 %"])
def test_a_message_asking_nothing_again_does_not(text: str) -> None:
    assert not asks_to_repeat(text)


@pytest.mark.parametrize(
    "text",
    [
        "keep polling the deploy",
        "wait until the pipeline is green",
        "keep an eye on the build",
        "Watch the payments provider incident page and tell me when it's resolved.",
        "monitor the canary and let me know once it is promoted",
        "Can you watch the deploy and tell me when it's done?",
        "Stop editing files and keep checking the deploy until it's done.",
        "Watch the CI run and tell me when you see it finish.",
        "prüf weiter, bis es grün ist",
        "continue à surveiller le job",
        "sigue comprobando el despliegue",
        "продолжай проверять",
        "继续检查部署",
        "ビルドを確認し続けて",
    ],
)
def test_a_message_asking_to_keep_watching_asks_to_keep_polling(text: str) -> None:
    assert asks_to_keep_polling(text)


@pytest.mark.parametrize(
    "text",
    [
        "run it again",
        "check the log",
        "wait",
        "poll it once",
        "check the tests and tell me when you're done",
        "Fix the crash in the monitor module and let me know when it's done.",
        "Tests fail in watch mode; fix it and tell me when they pass.",
        "No need to keep checking the build; just fix auth.py.",
        "Don't wait until the end to report; fix auth.py.",
        "Please don't just sit there and keep polling the deploy; check once and report back.",
        "Never block on it and poll until it completes.",
        "Could you monitor memory usage in the profiler output, then tell me when you have a fix?",
        "Can you poll-proof the retry helper and let me know when tests pass?",
    ],
)
def test_a_message_asking_for_one_look_does_not_ask_to_keep_polling(text: str) -> None:
    assert not asks_to_keep_polling(text)
