"""`make run`'s settings (gatewaysite.settings.dev) under Daphne: no Django debug pages — settings,
tracebacks and their local variables — unless GATEWAY_DEBUG asks for them."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.conf import settings

from tests.processes import free_port, gateway_argv, gateway_env, running


@contextmanager
def dev_gateway(**extra: str) -> Iterator[int]:
    port = free_port()
    env = gateway_env(settings.DATABASES["default"]["NAME"], settings.REDIS_URL,
                      DJANGO_SETTINGS_MODULE="gatewaysite.settings.dev", REDIS_URL=settings.REDIS_URL,
                      GATEWAY_SECRET_KEY="dev-gateway-of-the-debug-page-test-0123456789", **extra)
    with running(gateway_argv(port), port, env=env, log_name="gateway-dev"):
        yield port


def bad_host_page(port: int) -> tuple[int, str]:
    """What a request with a Host outside ALLOWED_HOSTS gets (Django's DisallowedHost: 400)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET /console/login/ HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n")
        answer = b""
        while data := sock.recv(65536):
            answer += data
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body.decode("utf-8", "replace")


def test_make_run_serves_no_debug_pages_by_default(django_db_setup: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GATEWAY_DEBUG", raising=False)
    with dev_gateway() as port:
        status, body = bad_host_page(port)
    assert status == 400
    for leak in ("Traceback", "DisallowedHost", "REDIS_URL", "Request information", "settings"):
        assert leak not in body, leak


def test_gateway_debug_turns_them_on(django_db_setup: None) -> None:
    with dev_gateway(GATEWAY_DEBUG="1") as port:
        status, body = bad_host_page(port)
    assert status == 400 and "DisallowedHost" in body
