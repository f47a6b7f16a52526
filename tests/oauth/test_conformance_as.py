"""The official conformance suite's authorization-server scenarios (`conformance authorization`,
the alpha suite) against the gateway's own authorization server: its metadata endpoint, and the
authorization code grant — the suite prints the authorization URL and waits on its own callback
listener, as for a person; here headless Chromium is that person (signs in, clicks Allow)."""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess
import time
from typing import Any

import httpx
import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import Page, expect

from apps.oauth.services import authorization_server_enable
from apps.tenants.services import membership_set
from tests import factories
from tests.browser import user_factory
from tests.conformance.runner import NODE_BIN
from tests.processes import ROOT, free_port

pytestmark = pytest.mark.slow

SUITE = "alpha/node_modules/@modelcontextprotocol/conformance/dist/index.js"


def _suite(conformance: pathlib.Path, args: list[str], out: pathlib.Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PATH": f"{conformance / NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.Popen(["node", str(conformance / SUITE), "authorization", *args, "-o", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def _checks(out: pathlib.Path) -> list[dict[str, Any]]:
    found = sorted(out.rglob("checks.json"))
    assert found, f"no checks.json under {out}"
    return [check for path in found for check in json.loads(path.read_text())]


def test_the_suites_authorization_server_scenarios_pass(transactional_db: None, gateway_url: str, page: Page,
                                                         tmp_path: pathlib.Path) -> None:
    conformance = pathlib.Path(os.environ.get("CONFORMANCE_DIR", ROOT / "var" / "conformance"))
    if not (conformance / SUITE).exists() or shutil.which("chromium") is None:
        pytest.fail("run scripts/install-node-parts.sh and scripts/install-browser.sh")
    tenant = factories.tenant_factory()
    factories.virtual_host_factory(tenant=tenant, slug="main")
    authorization_server_enable(tenant=tenant)
    login = user_factory()
    membership_set(tenant=tenant, user=get_user_model().objects.get(username=login.username), role="member")
    issuer, resource, port = f"{gateway_url}/oauth/{tenant.slug}", f"{gateway_url}/mcp/{tenant.slug}/main", free_port()
    time.sleep(1)  # (the gateway's snapshot takes the new server within GATEWAY_SNAPSHOT_CHECK_SECONDS)
    client_id = httpx.post(f"{issuer}/register", json={
        "redirect_uris": [f"http://127.0.0.1:{port}/callback"], "client_name": "conformance",
        "grant_types": ["authorization_code", "refresh_token"]}).json()["client_id"]

    # Every scenario of the suite's authorization-server set, in one run (the grant reads the
    # metadata the first one fetched).
    grant = _suite(conformance, ["--url", issuer, "--client-id", client_id, "--resource", resource,
                                 "--port", str(port)], tmp_path)
    assert grant.stdout is not None
    printed = []
    for line in grant.stdout:  # until it prints the URL to open, as for a person
        printed.append(line)
        if re.match(r"^https?://\S+/authorize\?", line.strip()):
            break
    else:
        pytest.fail("".join(printed))
    page.goto(line.strip())
    page.get_by_label("Username").fill(login.username)
    page.get_by_label("Password").fill(login.password)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("button", name="Allow")).to_be_visible()
    page.get_by_role("button", name="Allow").click()
    rest, _ = grant.communicate(timeout=120)
    output = "".join(printed) + rest
    checks = _checks(tmp_path)
    assert {c["id"] for c in checks} >= {"authorization-code-grant"}, output
    assert grant.returncode == 0 and {c["status"] for c in checks} == {"SUCCESS"}, output
