"""The package's public names load on first use, and the command hook
imports only what it needs: a process of its own per hook event pays for
every module it loads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import guard

REPO = Path(__file__).resolve().parents[2]

HEAVY = ("structlog", "anyio", "hypercorn", "starlette", "httpx", "redis", "guard.server", "guard.importers")


def _modules_after(code: str, stdin: bytes = b"", env: dict[str, str] | None = None) -> set[str]:
    """The modules a fresh interpreter has loaded after running ``code``."""
    script = f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)), file=sys.stderr)"
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=stdin,
        capture_output=True,
        cwd=REPO,
        env={**os.environ, **(env or {})},
        check=False,
    )
    assert done.returncode in (0, None), done.stderr.decode()
    return set(json.loads(done.stderr.decode().splitlines()[-1]))


def test_every_public_name_is_importable_and_listed() -> None:
    for name in guard.__all__:
        assert getattr(guard, name) is not None, name
    assert set(guard.__all__) <= set(dir(guard))
    assert set(guard._HOMES) == set(guard.__all__)  # every lazy name is public, every public name lazy
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        guard.nothing_here  # noqa: B018


def test_a_submodule_import_does_not_shadow_the_name_it_shares() -> None:
    import guard.fingerprint as same
    from guard import fingerprint

    assert fingerprint is same  # type: ignore[comparison-overlap]  # a function, as the package always exported
    assert callable(guard.fingerprint)
    assert guard.fingerprint.__module__ == "guard.fingerprint"


def test_importing_the_package_loads_none_of_it() -> None:
    loaded = _modules_after("import guard")
    assert not {m for m in loaded if m.startswith("guard.")}
    assert "msgspec" not in loaded
    assert "typing" not in loaded


PRE_TOOL_USE = json.dumps(
    {"session_id": "s1", "hook_event_name": "PreToolUse", "tool_use_id": "t1", "tool_name": "Read", "tool_input": {}}
).encode()


def test_the_hook_loads_nothing_heavy(tmp_path: Path) -> None:
    code = f"from guard.cli import main\nmain(['hook', '--state-dir', {str(tmp_path)!r}])"
    for _ in range(2):  # the first call starts the session, the second restores its snapshot
        loaded = _modules_after(code, PRE_TOOL_USE)
    assert "guard.policies.remind" in loaded
    assert not {m for m in loaded if m.startswith(HEAVY)}
    assert "inspect" not in loaded  # msgspec was imported without typing_extensions, which loads it
    assert "_hashlib" not in loaded  # digests come from _blake2 (guard.fingerprint), not hashlib's OpenSSL
    assert "guard.verdicts" not in loaded
    assert "guard.sessions.resume" not in loaded
    assert "importlib.metadata" not in loaded  # plugins are looked up only when a config names one


@pytest.fixture
def answering_socket(tmp_path: Path) -> Iterator[Path]:
    """A Unix socket in another process that answers one request with
    ``{"systemMessage":"from the server"}``, as a running ``serve`` would."""
    path = tmp_path / "up.sock"
    with subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import socket, sys\n"
            f"s = socket.socket(socket.AF_UNIX); s.bind({str(path)!r}); s.listen(1)\n"
            "print('up', flush=True); c, _ = s.accept(); c.recv(65536)\n"
            'body = b\'{"systemMessage":"from the server"}\'\n'
            "c.sendall(b'HTTP/1.1 200 OK\\r\\ncontent-length: %d\\r\\n\\r\\n%s' % (len(body), body)); c.close()",
        ],
        stdout=subprocess.PIPE,
    ) as listener:
        assert listener.stdout is not None
        assert listener.stdout.readline() == b"up\n"
        yield path
        listener.wait(10)


def test_the_forwarding_hook_loads_nothing_but_its_client(tmp_path: Path, answering_socket: Path) -> None:
    code = f"from guard.cli import main\nmain(['hook', '--serve', 'unix:{tmp_path}/s.sock'])"
    loaded = _modules_after(code, PRE_TOOL_USE)
    guard_modules = {m for m in loaded if m.startswith("guard")}
    assert guard_modules >= {"guard", "guard.cli", "guard.hook_forward"}
    assert "guard.adapters.claude_hooks" in guard_modules  # nothing answered: in-process

    code = f"from guard.cli import main\nmain(['hook', '--serve', 'unix:{answering_socket}'])"
    loaded = _modules_after(code, PRE_TOOL_USE)
    assert {m for m in loaded if m.startswith("guard")} == {"guard", "guard.cli", "guard.hook_forward"}
    assert not {m for m in loaded if m.startswith(("msgspec", "bus", "argparse", "typing", "socket"))}


def test_the_forwarding_command_in_the_settings_imports_nothing_else(
    tmp_path: Path, answering_socket: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command ``hook-settings --serve`` writes, run by a shell in a
    project that has a ``guard`` package of its own, prints the server's
    answer having imported the guard's client and nothing else: not ``re``,
    which the ``repeat-tool-guard`` script pip writes imports first."""
    from guard.cli import main

    assert main(["hook-settings", "--agent", "codex", "--serve", f"unix:{answering_socket}"]) == 0
    command = json.loads(capsys.readouterr().out)["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    project = tmp_path / "project"
    (project / "guard").mkdir(parents=True)
    (project / "guard" / "__init__.py").write_text("print('the project ran')\n")
    done = subprocess.run(
        ["/bin/sh", "-c", command],
        input=PRE_TOOL_USE,
        capture_output=True,
        cwd=project,
        env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"},
        check=True,
    )
    assert done.stdout == b'{"systemMessage":"from the server"}\n'
    imported = {line.rpartition("|")[2].strip() for line in done.stderr.decode().splitlines()}
    assert {"guard", "guard.cli", "guard.hook_forward"} <= imported
    assert not imported & {"re", "enum", "argparse", "msgspec", "typing"}


def test_typing_extensions_imports_again_once_the_hook_has_msgspec(tmp_path: Path) -> None:
    code = (
        f"from guard.cli import main\nmain(['hook', '--state-dir', {str(tmp_path)!r}])\n"
        "import typing_extensions  # a plugin policy may use it"
    )
    assert "typing_extensions" in _modules_after(code, PRE_TOOL_USE)


def test_a_msgspec_that_needs_typing_extensions_still_imports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from guard.cli import _import_msgspec_alone

    fake = tmp_path / "msgspec"
    fake.mkdir()
    (fake / "__init__.py").write_text("import typing_extensions\n")
    # A stand-in: the real one run twice patches typing for both copies, breaking what imported the first.
    (tmp_path / "typing_extensions.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "msgspec")
    monkeypatch.delitem(sys.modules, "typing_extensions", raising=False)
    _import_msgspec_alone()
    assert "msgspec" not in sys.modules  # its import failed without typing_extensions, and left nothing
    import msgspec  # the hook's own import, next

    assert msgspec.__file__ == str(fake / "__init__.py")
    assert sys.modules["typing_extensions"].__file__ == str(tmp_path / "typing_extensions.py")
