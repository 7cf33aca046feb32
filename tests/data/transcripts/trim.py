"""Trim a real transcript for the repository: every long text shortened, nothing else changed.

    python tests/data/transcripts/trim.py UPSTREAM_FILE COPY_IN_THIS_FOLDER

A JSON string value (never a key) longer than ``LIMIT`` characters keeps its
first ``HEAD`` and last ``TAIL`` characters; between them goes a marker with
the original length and the start of its SHA-256, so two texts that were
equal stay equal and two that differed stay different. A long string that
holds JSON (importers parse some, as tool arguments) is trimmed inside and
stays JSON. A ``.jsonl`` file stays one object per line; a ``.json`` file
is written compact. Every record, call, argument and result stays where it
was, so what the importers count is what upstream holds (``DATA.md``).
Standard library only: it runs wherever the files are regenerated.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

LIMIT = 512
HEAD = 256
TAIL = 128


def trim_text(text: str) -> str:
    if len(text) <= LIMIT:
        return text
    if text.lstrip()[:1] in ("{", "["):
        try:
            nested = json.loads(text)
        except ValueError:
            pass
        else:
            return _dump(trim(nested))
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{text[:HEAD]}\n[trimmed: {len(text)} characters in all, sha256 {digest}...]\n{text[-TAIL:]}"


def trim(value: Any) -> Any:
    if isinstance(value, str):
        return trim_text(value)
    if isinstance(value, list):
        return [trim(item) for item in value]
    if isinstance(value, dict):
        return {key: trim(item) for key, item in value.items()}
    return value


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def trim_file(source: Path, target: Path) -> None:
    text = source.read_text(encoding="utf-8")
    if source.suffix == ".jsonl":
        lines = [_dump(trim(json.loads(line))) if line.strip() else line for line in text.splitlines()]
        trimmed = "".join(line + "\n" for line in lines)
    else:
        trimmed = _dump(trim(json.loads(text))) + "\n"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(trimmed, encoding="utf-8")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__.splitlines()[2].strip())
    trim_file(Path(sys.argv[1]), Path(sys.argv[2]))
