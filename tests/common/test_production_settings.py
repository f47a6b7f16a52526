"""The production settings (gatewaysite/settings/prod.py), imported in a process of their own with a
controlled environment: they refuse to start with a missing, default or example secret, a default
database or Redis password, or a host list that accepts any host; with a valid environment
`manage.py check --deploy` reports nothing at all."""

from __future__ import annotations

import secrets
import subprocess
import sys

import pytest

from tests.processes import ROOT

pytestmark = pytest.mark.slow

VALID = {
    "GATEWAY_SECRET_KEY": secrets.token_urlsafe(48),
    "DATABASE_URL": f"postgresql://gateway:{secrets.token_hex(16)}@db.internal:5432/gateway",
    "REDIS_URL": f"redis://:{secrets.token_hex(16)}@redis.internal:6379/0",
    "GATEWAY_ALLOWED_HOSTS": "mcp.example.com",
}


def run(argv: list[str], **environment: str | None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(ROOT), "DJANGO_SETTINGS_MODULE": "gatewaysite.settings.prod",
           # Not the checkout's var/ (its development key would be refused as such).
           "GATEWAY_VAR_DIR": str(ROOT / "var" / "prod-settings-test")}
    env.update({name: value for name, value in {**VALID, **environment}.items() if value is not None})
    return subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def import_settings(**environment: str | None) -> subprocess.CompletedProcess[str]:
    return run(["-c", "import django; django.setup(); from django.conf import settings; settings.SECRET_KEY"],
               **environment)


def refusal(**environment: str | None) -> str:
    result = import_settings(**environment)
    assert result.returncode != 0, "the production settings started"
    assert "ImproperlyConfigured: the production settings refuse to start:" in result.stderr, result.stderr
    return result.stderr.rsplit("refuse to start:", 1)[1]


def test_a_valid_environment_starts() -> None:
    result = import_settings()
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(("environment", "message"), [
    ({"GATEWAY_SECRET_KEY": None}, "GATEWAY_SECRET_KEY is not set"),
    ({"GATEWAY_SECRET_KEY": ""}, "GATEWAY_SECRET_KEY is not set"),
    ({"GATEWAY_SECRET_KEY": "a-short-random-Key-31-characters"[:31]}, "GATEWAY_SECRET_KEY has 31 characters"),
    ({"GATEWAY_SECRET_KEY": "changeme"}, "GATEWAY_SECRET_KEY is an example or default value"),
    ({"GATEWAY_SECRET_KEY": "test-secret-key-not-for-production-0123456789"}, "is an example or default value"),
    ({"GATEWAY_SECRET_KEY": "django-insecure-" + secrets.token_urlsafe(40)}, "is an example or default value"),
    ({"GATEWAY_SECRET_KEY": "ab" * 30}, "GATEWAY_SECRET_KEY repeats a few characters"),
    ({"DATABASE_URL": None}, "DATABASE_URL must be set in production"),
    ({"REDIS_URL": None}, "REDIS_URL must be set in production"),
    ({"DATABASE_URL": "postgresql://postgres:postgres@db:5432/gateway"}, "DATABASE_URL carries a default or example"),
    ({"DATABASE_URL": "postgresql://gateway:changeme@db:5432/gateway"}, "DATABASE_URL carries a default or example"),
    ({"DATABASE_URL": "postgresql://gateway:gateway@db:5432/gateway"}, "DATABASE_URL carries a default or example"),
    ({"REDIS_URL": "redis://:password@redis:6379/0"}, "REDIS_URL carries a default or example password"),
    ({"GATEWAY_ALLOWED_HOSTS": ""}, "GATEWAY_ALLOWED_HOSTS is empty"),
    ({"GATEWAY_ALLOWED_HOSTS": "mcp.example.com,*"}, "GATEWAY_ALLOWED_HOSTS contains '*'"),
])
def test_each_default_or_missing_value_is_refused(environment: dict[str, str | None], message: str) -> None:
    assert message in refusal(**environment)


def test_every_problem_is_named_at_once() -> None:
    problems = refusal(GATEWAY_SECRET_KEY="changeme", REDIS_URL=None, GATEWAY_ALLOWED_HOSTS="*")
    assert problems.count("\n- ") == 3, problems


def test_the_development_key_is_refused(tmp_path) -> None:  # noqa: ANN001 - pytest fixture
    key = secrets.token_urlsafe(48)
    (tmp_path / "secret_key").write_text(key + "\n")
    assert "is the development key generated into" in refusal(GATEWAY_SECRET_KEY=key, GATEWAY_VAR_DIR=str(tmp_path))


def test_any_host_needs_the_explicit_opt_in() -> None:
    assert import_settings(GATEWAY_ALLOWED_HOSTS="*", GATEWAY_ALLOW_ANY_HOST="true").returncode == 0


def test_a_url_without_a_password_is_accepted() -> None:
    # Peer, certificate or socket authentication: nothing to guess.
    result = import_settings(DATABASE_URL="postgresql://gateway@/gateway?host=/run/postgresql")
    assert result.returncode == 0, result.stderr


def test_check_deploy_reports_nothing() -> None:
    result = run(["manage.py", "check", "--deploy", "--fail-level", "DEBUG"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout, result.stdout + result.stderr


def test_the_operator_can_turn_the_redirect_and_preload_on_and_then_nothing_is_silenced() -> None:
    result = run(["manage.py", "check", "--deploy", "--fail-level", "DEBUG"], GATEWAY_SSL_REDIRECT="true",
                 GATEWAY_HSTS_PRELOAD="true")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)" in result.stdout, result.stdout


def test_turning_hsts_off_is_reported() -> None:
    result = run(["manage.py", "check", "--deploy"], GATEWAY_HSTS_SECONDS="0")
    assert "security.W004" in result.stdout + result.stderr
