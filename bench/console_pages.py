"""Console pages and REST lists at scale (docs/console.md): server time to render each page of a tenant
with 20,000 tools (every OpenAPI spec of ../shared/data/catalog, plus copies of EC2 to pass 20,000)
and 1,000,000 audit rows — one virtual host mounting every backend, curated — and the number of
queries each makes.

    .venv/bin/python -m bench.console_pages [--repeat N] [--output FILE]

Runs in its own database (`gateway_bench_console` on the embedded PostgreSQL, created, migrated and
seeded on the first run — about two minutes — and reused after). Each page is requested in this
process through Django's test client, as a signed-in tenant admin: the time is the whole server side
(URL routing, middleware, queries, template rendering), not the network. Pages are interleaved, so
a noisy moment of the machine hits them all alike."""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time
from pathlib import Path

from bench.databases import bench_database

ROOT = Path(__file__).resolve().parents[1]
CATALOG = ROOT.parent / "shared" / "data" / "catalog" / "openapi"
DB_NAME = "gateway_bench_console"
TENANT = "bench-console"
AUDIT_ROWS = 1_000_000
TOOLS_AT_LEAST = 20_000


os.environ["DATABASE_URL"] = bench_database(DB_NAME)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gatewaysite.settings.dev")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection, reset_queries  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import override_settings  # noqa: E402
from django.urls import reverse  # noqa: E402

from apps.catalog.curation import tool_rule_delete, tool_rules_add, tools_hide, tools_show  # noqa: E402
from apps.catalog.models import Backend, Tool, VirtualHost  # noqa: E402
from apps.catalog.services import backend_create, virtual_host_create  # noqa: E402
from apps.catalog.specs import spec_upload  # noqa: E402
from apps.gateway.exposure import exposed_tools_forget  # noqa: E402
from apps.kernel.curation import ToolRuleSpec  # noqa: E402
from apps.tenants.models import ApiKey, Tenant  # noqa: E402
from apps.tenants.services import api_key_issue, membership_set, team_create, tenant_create  # noqa: E402
from bench.stats import percentile  # noqa: E402
from gatewaysite.celery import app as celery_app  # noqa: E402

celery_app.conf.task_always_eager = True  # an upload compiles before it returns: no worker needed

USERNAME = "bench-admin"


def _specs() -> list[Path]:
    return sorted(p for p in CATALOG.rglob("*") if p.suffix in {".json", ".yaml", ".yml"})


def seed() -> Tenant:
    """The tenant with its tools and audit rows; idempotent (each part is skipped when present)."""
    call_command("migrate", verbosity=0)
    tenant = Tenant.objects.filter(slug=TENANT).first() or tenant_create(slug=TENANT, name="Console benchmark")
    user = get_user_model().objects.filter(username=USERNAME).first() or get_user_model().objects.create_user(
        username=USERNAME, password="bench-password")
    membership_set(tenant=tenant, user=user, role="admin")
    if not Backend.objects.filter(tenant=tenant).exists():
        started = time.monotonic()
        specs = _specs()
        for path in specs:
            _backend_with_spec(tenant, path.stem.lower().replace("_", "-")[:60], path)
        copy = 0
        while Tool.objects.filter(backend__tenant=tenant).count() < TOOLS_AT_LEAST:
            copy += 1
            _backend_with_spec(tenant, f"ec2-copy-{copy}", CATALOG / "aws" / "ec2.json")
        print(f"seeded {Tool.objects.filter(backend__tenant=tenant).count():,} tools from {len(specs)} specs "
              f"in {time.monotonic() - started:.0f} s", file=sys.stderr)
    if not ApiKey.objects.filter(tenant=tenant).exists():
        teams = [team_create(tenant=tenant, slug=f"team-{n}") for n in range(5)]
        for n in range(50):
            api_key_issue(tenant=tenant, name=f"agent-{n}", team=teams[n % 5], owner=user)
    if not VirtualHost.objects.filter(tenant=tenant).exists():
        backends = {b.name: b for b in Backend.objects.filter(tenant=tenant).order_by("name")}
        virtual_host_create(tenant=tenant, slug="aws", mounts={
            name: backends[name] for name in ("ec2", "s3", "iam", "lambda", "dynamodb") if name in backends})
    if not VirtualHost.objects.filter(tenant=tenant, slug="everything").exists():
        # Every tool of the tenant on one host, curated: its tools list is the console's biggest.
        every = {b.name[:32].strip("-_."): b for b in Backend.objects.filter(tenant=tenant).order_by("name")}
        host = virtual_host_create(tenant=tenant, slug="everything", mounts=every)
        tool_rules_add(virtual_host=host, rules=[ToolRuleSpec("exclude", "glob", "Delete*"),
                                                 ToolRuleSpec("exclude", "tag", "Deprecated")])
    _audit_seed(tenant)
    return tenant


def _backend_with_spec(tenant: Tenant, name: str, path: Path) -> None:
    backend = backend_create(tenant=tenant, name=name, kind="openapi", urls=[], base_url="http://127.0.0.1:9/")
    with override_settings(GATEWAY_TOOL_INDEX=False):
        spec_upload(backend=backend, document=path.read_bytes(), filename=path.name)


def _audit_seed(tenant: Tenant) -> None:
    """AUDIT_ROWS rows over the last 7 days, denser in the last hour (the dashboard's window),
    spread over the tenant's keys, tools and every outcome."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM audit_auditrecord WHERE tenant_id = %s", [tenant.pk])
        have = cursor.fetchone()[0]
        if have >= AUDIT_ROWS:
            return
        started = time.monotonic()
        keys = list(ApiKey.objects.filter(tenant=tenant).values_list("pk", "name"))
        tools = list(Tool.objects.filter(backend__tenant=tenant).values_list("name", "backend__name")[:2000])
        cursor.execute("CREATE TEMP TABLE bench_keys (n int, id bigint, name text)")
        cursor.executemany("INSERT INTO bench_keys VALUES (%s, %s, %s)", [(n, k, f"key:{name}") for n, (k, name) in enumerate(keys)])
        cursor.execute("CREATE TEMP TABLE bench_tools (n int, name text, backend text)")
        cursor.executemany("INSERT INTO bench_tools VALUES (%s, %s, %s)", [(n, t, b) for n, (t, b) in enumerate(tools)])
        # 5 % of the rows in the last hour, the rest over 7 days; outcomes ~ 90 % ok.
        cursor.execute(
            """
            INSERT INTO audit_auditrecord (created_at, tenant_id, tenant_slug, virtual_host, principal, api_key_id,
                backend, backend_kind, method, exposed_name, upstream_name, outcome, error_code, latency_ms,
                bytes_in, bytes_out, session_id, trace_id, rule, arguments, limit_state, cost)
            SELECT
                CASE WHEN i %% 20 = 0 THEN now() - (random() * interval '1 hour')
                     ELSE now() - (random() * interval '7 days') END,
                %(tenant)s, %(slug)s, 'aws', k.name, k.id, t.backend, 'openapi', 'tools/call', t.name, t.name,
                (ARRAY['ok','ok','ok','ok','ok','ok','ok','ok','ok','tool_error','error','denied','rate_limited',
                       'over_budget'])[1 + (i %% 14)],
                NULL, 2 + random() * 200, 100 + (i %% 900), 200 + (i %% 5000), '', '', '', NULL, '', 1
            FROM generate_series(%(start)s, %(stop)s) AS i
            JOIN bench_keys k ON k.n = i %% %(keys)s
            JOIN bench_tools t ON t.n = i %% %(tools)s
            """,
            {"tenant": tenant.pk, "slug": tenant.slug, "start": have + 1, "stop": AUDIT_ROWS, "keys": len(keys),
             "tools": len(tools)},
        )
        cursor.execute("ANALYZE audit_auditrecord")
        print(f"seeded {AUDIT_ROWS - have:,} audit rows in {time.monotonic() - started:.0f} s", file=sys.stderr)


def pages(tenant: Tenant) -> dict[str, str]:
    """What to measure: the console's pages and the REST API's lists, by label."""
    t = {"tenant": tenant.slug}
    backend = Backend.objects.get(tenant=tenant, name="ec2")
    host = VirtualHost.objects.get(tenant=tenant, slug="aws")
    every = VirtualHost.objects.get(tenant=tenant, slug="everything")
    every_tools = reverse("console:vhost-tools", kwargs={**t, "vhost_id": every.pk})
    tool = Tool.objects.get(backend=backend, name="AuthorizeSecurityGroupIngress")
    key = ApiKey.objects.filter(tenant=tenant).order_by("name").first()
    assert key is not None
    return {
        "dashboard (hour)": reverse("console:dashboard", kwargs=t),
        "dashboard (day)": reverse("console:dashboard", kwargs=t) + "?window=day",
        "audit log, first page": reverse("console:audit-list", kwargs=t),
        "audit log, outcome=denied": reverse("console:audit-list", kwargs=t) + "?outcome=denied",
        f"audit log, key={key.name}": reverse("console:audit-list", kwargs=t) + f"?key={key.pk}",
        "tools, first page": reverse("console:tool-list", kwargs=t),
        "tools, last page": reverse("console:tool-list", kwargs=t) + "?page=9999",
        "tools, search 'security group'": reverse("console:tool-list", kwargs=t) + "?q=security+group",
        "tool detail (prerequisite graph)": reverse("console:tool-detail", kwargs={**t, "tool_id": tool.pk}),
        "backends list": reverse("console:backend-list", kwargs=t),
        "OpenAPI spec page (ec2)": reverse("console:backend-spec", kwargs={**t, "backend_id": backend.pk}),
        "virtual hosts list": reverse("console:vhost-list", kwargs=t),
        "virtual host (5 mounts)": reverse("console:vhost-detail", kwargs={**t, "vhost_id": host.pk}),
        f"virtual host ({every.mounts.count()} mounts)": reverse("console:vhost-detail",
                                                               kwargs={**t, "vhost_id": every.pk}),
        "its tools, first page": every_tools,
        "its tools, first page, right after one of its tools is hidden or shown": every_tools + "?changed=1",
        "its tools, first page, right after a change to every mount (a rule of every backend)": every_tools + "?changed=all",
        "its tools, first page, in a new process": every_tools + "?cold=1",
        "its tools, page 200": every_tools + "?page=200",
        "its tools, search 'vpc'": every_tools + "?q=vpc",
        "its tools, search 'vpc', right after a change to every mount": every_tools + "?q=vpc&changed=all",
        "its tools, search 'vpc', in a new process": every_tools + "?q=vpc&cold=1",
        "its tools, hidden": every_tools + "?state=hidden",
        "its tool picker, 'describe'": reverse("console:vhost-tool-options", kwargs={**t, "vhost_id": every.pk})
        + "?q=describe",
        "API keys": reverse("console:key-list", kwargs=t),
        "access rules": reverse("console:access-list", kwargs=t),
        "limits": reverse("console:limit-list", kwargs=t),
        "sessions": reverse("console:session-list", kwargs=t),
        "API: audit": f"/api/v1/tenants/{tenant.slug}/audit",
        "API: tools search": f"/api/v1/tenants/{tenant.slug}/tools?search=security+group",
        "API: keys": f"/api/v1/tenants/{tenant.slug}/keys",
        "API: a host's tool rules": f"/api/v1/tenants/{tenant.slug}/virtual-hosts/{every.pk}/tool-rules",
    }


def _hide_or_show(host: VirtualHost) -> None:
    """Hide one tool of the host's first mount, or show it again when it is hidden."""
    mount = host.mounts.order_by("map_key").select_related("backend").first()
    assert mount is not None
    tool = (mount.map_key, Tool.objects.filter(backend=mount.backend).order_by("name").values_list("name", flat=True)[0])
    if host.tool_rules.filter(action="exclude", match="name", pattern=tool[1], map_key=tool[0]).exists():
        tools_show(virtual_host=host, tools=[tool])
    else:
        tools_hide(virtual_host=host, tools=[tool])


def _rule_toggle(host: VirtualHost) -> None:
    """Add an exclude rule of every backend (naming no tool), or remove it: every mount is named again."""
    rule = host.tool_rules.filter(action="exclude", match="name", pattern="NoSuchTool", map_key="").first()
    if rule is not None:
        tool_rule_delete(tool_rule=rule)
    else:
        tool_rules_add(virtual_host=host, rules=[ToolRuleSpec("exclude", "name", "NoSuchTool", "")])


def measure(client: Client, urls: dict[str, str], repeat: int) -> dict[str, tuple[list[float], int]]:
    times: dict[str, list[float]] = {label: [] for label in urls}
    queries: dict[str, int] = {}
    with override_settings(DEBUG=True):  # to count queries
        for _ in range(repeat):
            for label, url in urls.items():
                if url.endswith("cold=1"):
                    exposed_tools_forget()  # as in a new process (but spec versions' tools stay read: ~80 ms)
                elif url.endswith("changed=1"):
                    _hide_or_show(VirtualHost.objects.get(tenant__slug=TENANT, slug="everything"))
                elif url.endswith("changed=all"):
                    _rule_toggle(VirtualHost.objects.get(tenant__slug=TENANT, slug="everything"))
                reset_queries()
                started = time.perf_counter()
                response = client.get(url)
                times[label].append((time.perf_counter() - started) * 1000)
                if response.status_code != 200:
                    raise SystemExit(f"{url}: HTTP {response.status_code}")
                queries[label] = len(connection.queries)
    return {label: (times[label], queries[label]) for label in urls}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    tenant = seed()
    client = Client(HTTP_HOST="127.0.0.1")  # an allowed host of the dev settings
    client.force_login(get_user_model().objects.get(username=USERNAME))
    urls = pages(tenant)
    measure(client, urls, 2)  # warm: templates compiled, connections open
    results = measure(client, urls, args.repeat)
    tools = Tool.objects.filter(backend__tenant=tenant).count()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM audit_auditrecord WHERE tenant_id = %s", [tenant.pk])
        audit = cursor.fetchone()[0]
    now = datetime.datetime.now(datetime.UTC)
    lines = [
        f"## Console pages at scale (`python -m bench.console_pages`) — {now:%Y-%m-%d %H:%M} UTC",
        "",
        f"One tenant with {tools:,} tools and {audit:,} audit rows; {platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, PostgreSQL (embedded), "
        f"DEBUG off except for counting queries; {args.repeat} requests per page, interleaved; "
        "server time in process (routing, middleware, queries, rendering). Aim: under 200 ms.",
        "",
        "| page | p50 ms | p95 ms | max ms | queries |",
        "|---|---|---|---|---|",
    ]
    for label, (samples, count) in results.items():
        lines.append(f"| {label} | {percentile(samples, 50):.1f} | {percentile(samples, 95):.1f} | "
                     f"{max(samples):.1f} | {count} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.output:
        args.output.write_text(text)
    return 0 if settings.DATABASES["default"]["NAME"] == DB_NAME else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
