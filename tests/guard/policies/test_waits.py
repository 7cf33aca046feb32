"""How long a wait says it lasts, and how long a failure says to wait."""

from typing import Any

import pytest

from guard.patterns import shell_command
from guard.policies.waits import declared_wait, stated_wait


@pytest.mark.parametrize(
    ("args", "seconds"),
    [
        ({"command": "sleep 30"}, 30.0),
        ({"command": "sleep 1.5m"}, 90.0),
        ({"command": "Start-Sleep -Milliseconds 500"}, 0.5),
        ({"command": "Start-Sleep 20;"}, 20.0),
        ({"command": "cmd //c timeout /t 15 /nobreak"}, 15.0),
        ({"command": "sleep 10 && make"}, 10.0),  # the wait a check opens with
        ({"command": "make && sleep 10"}, 0.0),
        ({"reason": "build", "seconds": 45}, 45.0),
        ({"durationMs": 2500}, 2.5),
        ({"seconds": True}, 0.0),
        ({"note": "later"}, 0.0),
        ("30", 0.0),
    ],
)
def test_how_long_a_wait_says_it_waits(args: Any, seconds: float) -> None:
    assert declared_wait(args, shell_command(args)) == seconds


@pytest.mark.parametrize(
    ("content", "seconds"),
    [
        ("429 Too Many Requests\nRetry-After: 30", 30.0),
        ("rate limited, retry after 60s", 60.0),
        ("Please try again in 1.5 seconds.", 1.5),
        ("overloaded: retry in 2 minutes", 120.0),
        ('{"error": "slow down", "retry_after": 250ms}', 0.25),
        ("503 Service Unavailable", 0.0),
    ],
)
def test_how_long_a_failure_says_to_wait(content: str, seconds: float) -> None:
    assert stated_wait(content, 2000) == seconds


def test_a_wait_stated_past_the_head_read_is_not_read() -> None:
    assert stated_wait("x" * 100 + " retry after 30s", 50) == 0.0
