#!/usr/bin/env python3
"""ask-openai: an ask command for repeat-tool-guard's ``rescue`` policy that
talks to any OpenAI-compatible chat completions endpoint, using only the
Python standard library.

Contract (docs/policies/rescue.md): invoked as ``ask-openai "<question>"``,
one argument, no stdin; prints the advice on stdout and exits 0. Any failure
(no answer, HTTP error, timeout, empty reply) prints a reason on stderr and
exits 1, which the guard treats as "unavailable".

Environment:
    OPENAI_BASE_URL   endpoint root, default https://api.openai.com/v1
                      (a local server works too: http://localhost:11434/v1)
    OPENAI_API_KEY    sent as a bearer token when set
    OPENAI_MODEL      the model; default: $ASK_MODEL, which the guard sets
                      from its ``ask_model`` setting (so set ``ask_model`` to
                      a model your endpoint serves)
    ASK_HTTP_TIMEOUT  seconds to wait for the reply, default 80 (keep it
                      below the guard's ``ask_timeout_ms``)

Install:  cp docs/examples/ask-openai.py ~/.local/bin/ask-openai
          chmod +x ~/.local/bin/ask-openai
Not tested against a real service by this project's test suite.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request

SYSTEM = (
    "You advise an AI agent that is stuck repeating a tool call. You cannot use tools or see any files: answer "
    "from the text of the question alone. Reply with one concrete next action, in a few sentences."
)


def ask(question: str) -> str:
    base = os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1").rstrip("/")
    model = os.environ.get("OPENAI_MODEL") or os.environ.get("ASK_MODEL")
    if not model:
        raise RuntimeError("no model: set OPENAI_MODEL or the guard's ask_model")
    headers = {"Content-Type": "application/json"}
    key = os.environ.get("OPENAI_API_KEY")
    if key:
        headers["Authorization"] = f"Bearer {key}"
    body = {"model": model, "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]}
    request = urllib.request.Request(
        f"{base}/chat/completions", data=json.dumps(body).encode("utf-8"), headers=headers, method="POST"
    )
    timeout = float(os.environ.get("ASK_HTTP_TIMEOUT", "80"))
    with urllib.request.urlopen(request, timeout=timeout) as response:
        reply = json.load(response)
    try:
        text = reply["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise RuntimeError(f"unexpected reply: {json.dumps(reply)[:300]}") from None
    if not isinstance(text, str) or not text.strip():
        raise RuntimeError("empty reply")
    return text.strip()


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not argv[1]:
        print('usage: ask-openai "<question>"', file=sys.stderr)
        return 2
    try:
        advice = ask(argv[1])
    except urllib.error.HTTPError as exc:
        detail = exc.read(300).decode("utf-8", "replace")
        print(f"ask-openai: HTTP {exc.code}: {detail}", file=sys.stderr)
        return 1
    except (OSError, ValueError, RuntimeError) as exc:  # URLError and timeouts are OSErrors
        print(f"ask-openai: {exc}", file=sys.stderr)
        return 1
    print(advice)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
