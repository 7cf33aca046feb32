"""A throwaway ``redis-server`` for the fleet benchmarks and the tests alike.
Standard library only, so ``python -m benchmarks`` runs without the test tools."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time

__all__ = ["RedisServer", "free_port", "start_redis_server"]


class RedisServer:
    """A real ``redis-server`` on a free loopback port, persistence off."""

    def __init__(self, port: int, process: subprocess.Popen[bytes]) -> None:
        self.port = port
        self.process = process

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_redis_server() -> RedisServer:
    """Start ``redis-server`` on a free port and wait until it answers
    ``PING``. Raises ``FileNotFoundError`` when the binary is absent
    (``apt-get install redis-server``; ``.ci/run`` does it)."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise FileNotFoundError("redis-server is not installed (apt-get install redis-server; .ci/run does it)")
    port = free_port()
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                if sock.recv(16).startswith(b"+PONG"):
                    return RedisServer(port, process)
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"redis-server did not answer on port {port} within 10 s")
