"""Real processes for end-to-end tests: backends and Daphne-served gateways on loopback ports."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


_handed_out: set[int] = set()


def free_port() -> int:
    """A loopback port nothing listens on now, and never one this process handed out before: the
    kernel may give a just-closed port again, and two servers of one test given the same port leave
    one of them failing to bind while waiting for its port finds the other (whose answers are then
    taken for its own)."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port not in _handed_out:
            _handed_out.add(port)
            return port


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"process exited with {process.returncode} before listening on {port}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listening on {port} after {timeout}s")


def log_path(log_name: str, port: int) -> Path:
    """Where `running` writes the output of the process it started with `log_name` on `port`."""
    return ROOT / "var" / "test-logs" / f"{log_name}-{port}.log"


@contextlib.contextmanager
def running(argv: list[str], port: int, *, env: Mapping[str, str] | None = None, log_name: str = "proc") -> Iterator[subprocess.Popen[bytes]]:
    path = log_path(log_name, port)
    path.parent.mkdir(parents=True, exist_ok=True)
    log_file = open(path, "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen(argv, cwd=ROOT, env={**os.environ, **(env or {})}, stdout=log_file, stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, process)
        yield process
    finally:
        stop(process)
        log_file.close()


def stop(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout: float = 10.0) -> int:
    if process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.returncode


def backend_argv(module: str, port: int) -> list[str]:
    return [sys.executable, "-m", module, "--host", "127.0.0.1", "--port", str(port)]


def gateway_env(database_name: str, redis_url: str, **extra: str) -> dict[str, str]:
    return {
        "DJANGO_SETTINGS_MODULE": "gatewaysite.settings.test",
        "DATABASE_URL": f"postgresql://postgres@127.0.0.1:55432/{database_name}",
        "GATEWAY_TEST_REDIS_URL": redis_url,
        **extra,
    }


def gateway_argv(port: int) -> list[str]:
    return [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "gatewaysite.asgi:application"]
