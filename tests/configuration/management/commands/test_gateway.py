"""`manage.py gateway`: output, exit codes, and seed-demo."""

from __future__ import annotations

import io
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from apps.catalog.models import VirtualHost
from apps.tenants.keys import key_generate, key_hash
from apps.tenants.models import ApiKey, Tenant
from tests.configuration.documents import README_EXAMPLE, full_example

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[4]


def _gateway(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("gateway", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def _write(tmp_path: Path, text: str, name: str = "gateway.yaml") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_apply_lists_changes_and_prints_generated_secrets_once(tmp_path: Path) -> None:
    path = _write(tmp_path, full_example())
    out, _ = _gateway("apply", "-f", path)
    assert "created    tenant        acme" in out
    assert "generated key secrets (shown once" in out
    secret_line = next(line for line in out.splitlines() if line.startswith("  globex/agent: "))
    secret = secret_line.split(": ", 1)[1]
    assert ApiKey.objects.get(tenant__slug="globex", name="agent").secret_hash == key_hash(secret)
    again, _ = _gateway("apply", "-f", path)
    assert "nothing to change" in again
    assert "generated" not in again and secret not in again


def test_invalid_file_exits_2_listing_every_problem(tmp_path: Path) -> None:
    bad = README_EXAMPLE.replace('"acme-agent-0123456789abcdef"', '"short"').replace("{demo: demo}", "{x: nope}")
    err = io.StringIO()
    with pytest.raises(CommandError) as excinfo:
        call_command("gateway", "apply", "-f", _write(tmp_path, bad), stderr=err)
    assert excinfo.value.returncode == 2
    lines = err.getvalue().splitlines()
    assert any(line.startswith("tenants[0].keys[0].secret: the secret is too weak") for line in lines)
    assert any(line.startswith("virtual_hosts[0].backends.x: unknown backend 'nope'") for line in lines)
    assert not Tenant.objects.exists()


def test_missing_file_exits_2(tmp_path: Path) -> None:
    with pytest.raises(CommandError) as excinfo:
        _gateway("apply", "-f", str(tmp_path / "absent.yaml"))
    assert excinfo.value.returncode == 2


def test_dry_run_and_export(tmp_path: Path) -> None:
    path = _write(tmp_path, README_EXAMPLE)
    out, _ = _gateway("apply", "-f", path, "--dry-run")
    assert "dry run: nothing was written" in out
    assert not Tenant.objects.exists()
    _gateway("apply", "-f", path, "--prune")
    exported, _ = _gateway("export")
    assert "slug: acme" in exported and "secret" not in exported.split("\n", 2)[2]
    out, _ = _gateway("apply", "-f", _write(tmp_path, exported, "export.yaml"), "--prune")
    assert "nothing to change" in out


@pytest.mark.django_db(transaction=True)
def test_exit_codes_of_the_real_process(tmp_path: Path) -> None:
    database = connection.settings_dict
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "gatewaysite.settings.test",
        "DATABASE_URL": f"postgresql://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}",
    }

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "manage.py", "gateway", *args], cwd=ROOT, env=env, capture_output=True, text=True,
            timeout=120,
        )

    ok = run("apply", "-f", _write(tmp_path, README_EXAMPLE))
    assert ok.returncode == 0, ok.stderr
    assert Tenant.objects.filter(slug="acme").exists()
    bad = run("apply", "-f", _write(tmp_path, "tenants: [{slug: Bad}]\n", "bad.yaml"))
    assert bad.returncode == 2
    assert "tenants[0].slug: a tenant's slug is 1-64 lowercase letters, digits and inner hyphens, not 'Bad'" in bad.stderr
    assert "tenants[0].name: is required" in bad.stderr


def _seed(tmp_path: Path) -> str:
    out, _ = _gateway(
        "seed-demo", "--backend-url", "http://127.0.0.1:9001/mcp",
        "--key-file", str(tmp_path / "run" / "demo.key"),
        "--admin-password-file", str(tmp_path / "run" / "admin.password"),
    )
    return out


def test_seed_demo_is_idempotent_and_reuses_its_files(tmp_path: Path) -> None:
    first_out = _seed(tmp_path)
    key_file, password_file = tmp_path / "run" / "demo.key", tmp_path / "run" / "admin.password"
    secret, password = key_file.read_text().strip(), password_file.read_text().strip()
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(password_file.stat().st_mode) == 0o600
    assert secret not in first_out and password not in first_out
    key = ApiKey.objects.get(tenant__slug="demo", name="demo-agent")
    assert key.secret_hash == key_hash(secret) and key.team.slug == "default"
    host = VirtualHost.objects.get(tenant__slug="demo", slug="main")
    assert host.mounts.get(map_key="demo").backend.replicas.get().url == "http://127.0.0.1:9001/mcp"
    rest = VirtualHost.objects.get(tenant__slug="demo", slug="rest").mounts.get(map_key="pets").backend
    assert (rest.kind, rest.base_url) == ("openapi", "http://127.0.0.1:9001/rest")
    assert rest.spec_versions.get().filename == "petstore.yaml"
    admin = get_user_model().objects.get(username="admin")
    assert admin.is_superuser and admin.check_password(password)
    from apps.oauth.models import AuthorizationServer

    server = AuthorizationServer.objects.get(tenant__slug="demo")  # people sign in to its hosts
    assert server.enabled

    assert "nothing to change" in _seed(tmp_path)
    assert AuthorizationServer.objects.get(tenant__slug="demo").key_id == server.key_id  # the same key
    assert key_file.read_text().strip() == secret
    assert ApiKey.objects.get(pk=key.pk).secret_hash == key_hash(secret)
    assert get_user_model().objects.get(username="admin").check_password(password)


def test_seed_demo_uses_an_existing_key_file(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    secret, _ = key_generate()
    (tmp_path / "run" / "demo.key").write_text(secret + "\n")
    _seed(tmp_path)
    assert ApiKey.objects.get(name="demo-agent").secret_hash == key_hash(secret)
