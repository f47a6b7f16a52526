"""The audit log at volume (docs/deploy.md, "Audit storage"): the writer's rows/s per instance,
the console's audit pages, and retention, in the day-partitioned log and in the one table it replaced,
at growing row counts.

    .venv/bin/python -m bench.audit_volume --rows 1000000 10000000 [--plain-up-to N] [--max-gb 40]
        [--migration-rows N] [--reuse] [--output FILE] [--drop]

Runs in its own database, `gw_audit_volume` on the embedded PostgreSQL (another server:
BENCH_POSTGRES=postgresql://user@host:port), created and migrated; `--drop` drops it at the end.
For each count the log is generated anew with SQL (a table per day filled by INSERT … SELECT from
generate_series, then attached: PostgreSQL builds each day's indexes then): 90 days ending now, 50
tenants, one of them with 40 % of the rows (its 20 keys, 5 teams and 10 backends real, so that the
console's filters take them; 200 tools), outcomes ~88 % ok, a trace id on every row, a session id per
50 calls. Up to `--plain-up-to` rows the same rows are also copied into the layout of migration 0012
(schema `plain`: one table, primary key `id`, the same indexes); both layouts are then measured in
this one process, interleaved, by switching `search_path`: the code measured is the same.

- writer: `audit_records_write` (what the audit writer's thread runs per flush: COPY, then the
  per-minute counts) in batches of 1,000 rows of the big tenant; rows/s of one writer.
- pages: `audit_record_page` (what the console's audit log, its live tail and the REST API read) for
  the big and a small tenant, each filter, a next and a 20th page; then the console's page itself
  (routing, middleware, form, rendering) through Django's test client. Warm: each case repeated.
- retention, last (it removes data): the oldest day's rows removed (`audit_records_prune`: a partition
  dropped) against the DELETE in batches of 10,000 that pruned the one table before (then hourly: an
  hour of rows each run, a day's in 24 runs; vacuum's work after it is not counted).

- migration (`--migration-rows`): `migrate audit 0013` timed on a log of that many rows written
  before it, in a database of its own (`gw_audit_migration`, dropped after).

`--reuse` measures the log a previous run left (its largest count, less the day its retention step
removed) instead of generating it again.

A count whose estimated size (600 bytes a row with its indexes; twice with the plain copy) passes
`--max-gb` or the free disk is refused."""

from __future__ import annotations

import argparse
import datetime
import importlib
import os
import platform
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from bench.databases import SERVER, bench_database

DB_NAME = "gw_audit_volume"

os.environ["DATABASE_URL"] = bench_database(DB_NAME)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gatewaysite.settings.dev")

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection, connections  # noqa: E402
from django.db.backends.signals import connection_created  # noqa: E402
from django.test import Client  # noqa: E402
from django.urls import reverse  # noqa: E402

from apps.audit.selectors import AuditFilter, audit_record_page  # noqa: E402
from apps.audit.services import audit_partitions_ensure, audit_records_prune  # noqa: E402
from apps.audit.writer import audit_records_write  # noqa: E402
from apps.catalog.services import backend_create  # noqa: E402
from apps.kernel.audit_entry import AuditEntry  # noqa: E402
from apps.kernel.identity import Principal  # noqa: E402
from apps.tenants.models import ApiKey, Tenant  # noqa: E402
from apps.tenants.services import api_key_issue, membership_set, team_create, tenant_create  # noqa: E402
from bench.stats import percentile  # noqa: E402

MIGRATION = importlib.import_module("apps.audit.migrations.0013_audit_partitioned")
DAYS = 90
SMALL_TENANTS = 49
KEYS, TEAMS, BACKENDS, TOOLS = 20, 5, 10, 200
BYTES_PER_ROW = 600  # heap and its 9 indexes: 589 MB per million rows, measured
BATCH, WRITER_BATCHES, WRITER_ROUNDS = 1000, 20, 6
REPEAT = 15
USERNAME = "bench-audit"
BIG = "volume-big"

# --- Which layout the connection reads and writes -------------------------------------------------

_layout = "partitioned"


def _search_path(**kwargs: Any) -> None:
    path = "plain, public" if _layout == "plain" else "public"
    with kwargs["connection"].cursor() as cursor:
        cursor.execute(f"SET search_path TO {path}")


connection_created.connect(_search_path)  # a connection the console's request opens anew too


def _use(layout: str) -> None:
    global _layout
    _layout = layout
    if connection.connection is not None:
        _search_path(connection=connection)


# --- Data -------------------------------------------------------------------------------------------


def tenants_ensure() -> tuple[Tenant, list[Tenant]]:
    """The big tenant (with its keys, teams, backends and a member to sign in as) and the small ones."""
    big = Tenant.objects.filter(slug=BIG).first()
    if big is None:
        big = tenant_create(slug=BIG, name="Audit volume")
        teams = [team_create(tenant=big, slug=f"team-{n}") for n in range(TEAMS)]
        for n in range(KEYS):
            api_key_issue(tenant=big, name=f"agent-{n}", team=teams[n % TEAMS])
        for n in range(BACKENDS):
            backend_create(tenant=big, name=f"svc-{n}", urls=["http://127.0.0.1:9/mcp"])
        user = get_user_model().objects.create_user(username=USERNAME, password=secrets.token_urlsafe())
        membership_set(tenant=big, user=user, role="admin")
    small = [Tenant.objects.filter(slug=f"volume-{n}").first() or tenant_create(slug=f"volume-{n}", name=f"V {n}")
             for n in range(SMALL_TENANTS)]
    return big, small


def _keys(big: Tenant) -> list[ApiKey]:
    return list(ApiKey.objects.filter(tenant=big).select_related("team").order_by("pk"))


# Row i of a day: 40 % the big tenant's, the rest spread over the small ones; tenant, key, tool and
# outcome from independent hashes of i (PostgreSQL's own), so that no filter's rows follow another's.
ROWS_SQL = """
INSERT INTO {table} (id, created_at, tenant_id, tenant_slug, virtual_host, principal, api_key_id, team, backend,
    backend_kind, method, exposed_name, upstream_name, outcome, error_code, latency_ms, bytes_in, bytes_out,
    session_id, trace_id, rule, limit_state, arguments, cost, task_id, origin, console_user)
SELECT %(base)s + i, %(start)s + (i - 1) * %(step)s, t.id, t.slug, 'main', 'key:agent-' || g.k,
    CASE WHEN g.big THEN (%(keys)s::bigint[])[1 + g.k] ELSE 1000000000 + t.id * 100 + g.k END,
    CASE WHEN g.big THEN 'team-' || (g.k %% {teams}) ELSE '' END,
    'svc-' || (g.tool %% {backends}), 'mcp', 'tools/call', 'svc-' || (g.tool %% {backends}) || '_tool_' || g.tool,
    'tool_' || g.tool,
    CASE WHEN g.o < 88 THEN 'ok' WHEN g.o < 93 THEN 'tool_error' WHEN g.o < 95 THEN 'error'
         WHEN g.o < 97 THEN 'denied' WHEN g.o < 98 THEN 'rate_limited' WHEN g.o < 99 THEN 'over_budget'
         ELSE 'cancelled' END,
    CASE WHEN g.o IN (93, 94) THEN -32603 END, 2 + (i * 37 %% 4000) / 10.0, 100 + i %% 900, 200 + i * 13 %% 5000,
    md5(((%(base)s + i) / 50)::text), md5((%(base)s + i)::text), '', 'ok', NULL, 1, '', 'mcp', ''
FROM generate_series(1::bigint, %(n)s) AS i
CROSS JOIN LATERAL (SELECT (hashint8extended(i, 0) & 1048575) %% 10 < 4 AS big,
                           (hashint8extended(i, 1) & 1048575) %% {keys_n} AS k,
                           (hashint8extended(i, 2) & 1048575) %% {tools} AS tool,
                           (hashint8extended(i, 3) & 1048575) %% 100 AS o,
                           (hashint8extended(i, 4) & 1048575) %% {small} AS s) AS g
JOIN bench_tenants AS t ON t.n = CASE WHEN g.big THEN -1 ELSE g.s END
"""


def generate(rows: int, big: Tenant, small: list[Tenant]) -> float:
    """The log anew: `rows` rows over the DAYS days ending now, a partition per day; seconds taken."""
    started = time.monotonic()
    _use("partitioned")
    now = datetime.datetime.now(datetime.UTC)
    today = now.date()
    keys = [key.pk for key in _keys(big)]
    per_day = rows // DAYS
    with connection.cursor() as cursor:
        cursor.execute("DROP SCHEMA IF EXISTS plain CASCADE")
        cursor.execute("SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                       "WHERE i.inhparent = 'audit_auditrecord'::regclass AND c.relname <> 'audit_auditrecord_default'")
        for (name,) in cursor.fetchall():
            cursor.execute(f"DROP TABLE {name}")
        cursor.execute("TRUNCATE audit_auditrecord, audit_auditminute")
        cursor.execute("CREATE TEMP TABLE IF NOT EXISTS bench_tenants (n int, id bigint, slug text)")
        cursor.execute("TRUNCATE bench_tenants")
        cursor.executemany("INSERT INTO bench_tenants VALUES (%s, %s, %s)",
                           [(-1, big.pk, big.slug), *((n, t.pk, t.slug) for n, t in enumerate(small))])
        sql = ROWS_SQL.format(table="{table}", teams=TEAMS, backends=BACKENDS, keys_n=KEYS, tools=TOOLS,
                              small=SMALL_TENANTS)
        for n in range(DAYS):
            day = today - datetime.timedelta(days=DAYS - 1 - n)
            start = datetime.datetime.combine(day, datetime.time(), datetime.UTC)
            length = (now - start) if day == today else datetime.timedelta(days=1)
            name = f"audit_auditrecord_p{day:%Y%m%d}"
            cursor.execute(f"CREATE TABLE {name} (LIKE audit_auditrecord INCLUDING DEFAULTS INCLUDING CONSTRAINTS)")
            cursor.execute(sql.format(table=name), {"base": n * per_day, "start": start, "step": length / per_day,
                                                    "keys": keys, "n": per_day})
            cursor.execute(f"ALTER TABLE audit_auditrecord ATTACH PARTITION {name} FOR VALUES FROM (%s) TO (%s)",
                           [start, start + datetime.timedelta(days=1)])
        cursor.execute("SELECT setval('audit_auditrecord_id_seq', %s)", [DAYS * per_day])
        cursor.execute("ANALYZE audit_auditrecord")
    audit_partitions_ensure(days_ahead=7, days_back=DAYS)  # the days ahead, as beat keeps them
    return time.monotonic() - started


def plain_copy() -> float:
    """The same rows in the layout of migration 0012, in schema `plain`; seconds taken."""
    started = time.monotonic()
    with connection.cursor() as cursor:
        cursor.execute("CREATE SCHEMA plain")
        cursor.execute("CREATE TABLE plain.audit_auditrecord "
                       "(LIKE public.audit_auditrecord INCLUDING DEFAULTS INCLUDING CONSTRAINTS)")
        cursor.execute("INSERT INTO plain.audit_auditrecord SELECT * FROM public.audit_auditrecord")
        cursor.execute("ALTER TABLE plain.audit_auditrecord ADD PRIMARY KEY (id)")
        for sql in MIGRATION.INDEXES:
            cursor.execute(sql.format(table="plain.audit_auditrecord"))
        cursor.execute("ANALYZE plain.audit_auditrecord")
    return time.monotonic() - started


def _size(table: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT coalesce((SELECT sum(pg_total_relation_size(relid)) "
                       "FROM pg_partition_tree(%s::regclass) WHERE isleaf), pg_total_relation_size(%s::regclass))",
                       [table, table])
        return int(cursor.fetchone()[0])


# --- Measurements -----------------------------------------------------------------------------------


def writer(big: Tenant, layouts: list[str]) -> dict[str, list[float]]:
    """Rows/s of `audit_records_write` per round of WRITER_BATCHES batches, per layout, rounds alternating."""
    keys = _keys(big)
    rates: dict[str, list[float]] = {layout: [] for layout in layouts}
    for n in range(WRITER_ROUNDS * len(layouts)):
        layout = layouts[n % len(layouts)]
        batches = []
        for b in range(WRITER_BATCHES):
            batch = []
            for i in range(BATCH):
                key, tool = keys[(b * BATCH + i) % KEYS], (b * BATCH + i) * 131 % TOOLS
                principal = Principal(tenant_id=big.pk, tenant_slug=big.slug, key_id=key.pk, key_name=key.name,
                                      team=key.team.slug if key.team else None)
                batch.append(AuditEntry(
                    principal=principal, virtual_host="main", backend=f"svc-{tool % BACKENDS}", method="tools/call",
                    exposed_name=f"svc-{tool % BACKENDS}_tool_{tool}", upstream_name=f"tool_{tool}",
                    outcome="ok" if i % 10 else "tool_error", error_code=None, latency_ms=2.0 + i % 400,
                    bytes_in=100 + i, bytes_out=200 + i, session_id=secrets.token_hex(16),
                    trace_id=secrets.token_hex(16), at=time.time(),
                ))
            batches.append(batch)
        _use(layout)
        started = time.perf_counter()
        for batch in batches:
            audit_records_write(batch)
        rates[layout].append(BATCH * WRITER_BATCHES / (time.perf_counter() - started))
    return rates


def _page_cases(big: Tenant, small: Tenant) -> dict[str, Callable[[], object]]:
    key = _keys(big)[3]
    month_ago = datetime.datetime.now(datetime.UTC).replace(hour=0, minute=0, second=0, microsecond=0) - \
        datetime.timedelta(days=30)
    filters = {
        "big tenant, first page": AuditFilter(),
        f"big tenant, key={key.name}": AuditFilter(api_key_id=key.pk),
        "big tenant, team=team-2": AuditFilter(team="team-2"),
        "big tenant, tool (1 of 200)": AuditFilter(tool="svc-7_tool_17"),
        "big tenant, backend=svc-4": AuditFilter(backend="svc-4"),
        "big tenant, outcome=cancelled (1 %)": AuditFilter(outcome="cancelled"),
        "big tenant, key and outcome=cancelled": AuditFilter(api_key_id=key.pk, outcome="cancelled"),
        "big tenant, one day a month ago": AuditFilter(since=month_ago, until=month_ago + datetime.timedelta(days=1)),
        "big tenant, a tool no row has": AuditFilter(tool="no-such-tool"),
    }
    cases: dict[str, Callable[[], object]] = {
        label: (lambda f=f: audit_record_page(tenant=big, filters=f)) for label, f in filters.items()
    }
    cases["big tenant, next page"] = lambda: audit_record_page(tenant=big, cursor=_cursor(big, 1))
    cases["big tenant, 20th page"] = lambda: audit_record_page(tenant=big, cursor=_cursor(big, 19))
    cases["small tenant (1.2 %), first page"] = lambda: audit_record_page(tenant=small)
    cases["small tenant, tool (1 of 200)"] = lambda: audit_record_page(tenant=small, filters=AuditFilter(
        tool="svc-7_tool_17"))
    return cases


_cursors: dict[tuple[str, int], str] = {}


def _cursor(tenant: Tenant, pages: int) -> str:
    """The cursor of the page after `pages` pages, in the layout in use (made once)."""
    if (_layout, pages) not in _cursors:
        cursor = ""
        for _ in range(pages):
            cursor = audit_record_page(tenant=tenant, cursor=cursor).older or ""
        _cursors[(_layout, pages)] = cursor
    return _cursors[(_layout, pages)]


def pages(big: Tenant, small: Tenant, layouts: list[str]) -> dict[tuple[str, str], list[float]]:
    """ms per call of each case and layout: the selectors, then the console's page; interleaved."""
    _cursors.clear()
    cases = _page_cases(big, small)
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(get_user_model().objects.get(username=USERNAME))
    url = reverse("console:audit-list", kwargs={"tenant": big.slug})
    key = _keys(big)[3]
    cases["console page: big tenant's log"] = lambda: _get(client, url)
    cases[f"console page: key={key.name}"] = lambda: _get(client, f"{url}?key={key.pk}")
    times: dict[tuple[str, str], list[float]] = {(label, layout): [] for label in cases for layout in layouts}
    for repeat in range(REPEAT + 1):
        for label, case in cases.items():
            for layout in layouts:
                _use(layout)
                started = time.perf_counter()
                case()
                if repeat:  # the first round warms: cursors made, templates compiled
                    times[(label, layout)].append((time.perf_counter() - started) * 1000)
    return times


def _get(client: Client, url: str) -> None:
    response = client.get(url)
    if response.status_code != 200:
        raise SystemExit(f"{url}: HTTP {response.status_code}")


def plan_times(big: Tenant, layouts: list[str]) -> dict[str, tuple[float, float]]:
    """Planning and execution ms of the first page's query (EXPLAIN ANALYZE), per layout."""
    from apps.audit.models import AuditRecord

    result = {}
    for layout in layouts:
        _use(layout)
        text = AuditRecord.objects.filter(tenant_id=big.pk).order_by("-created_at", "-pk")[:51].explain(analyze=True)
        lines = {line.split(":")[0].strip(): line.split(":")[1] for line in text.splitlines() if "Time:" in line}
        result[layout] = (float(lines["Planning Time"].split()[0]), float(lines["Execution Time"].split()[0]))
    return result


def retention(layouts: list[str]) -> dict[str, tuple[float, int]]:
    """Seconds to remove the oldest day's rows, and how many there were, per layout."""
    today = datetime.datetime.now(datetime.UTC).date()
    cutoff = datetime.datetime.combine(today - datetime.timedelta(days=DAYS - 2), datetime.time(), datetime.UTC)
    result = {}
    for layout in layouts:
        _use(layout)
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM audit_auditrecord WHERE created_at < %s", [cutoff])
            rows = cursor.fetchone()[0]
        started = time.perf_counter()
        if layout == "partitioned":
            audit_records_prune(older_than_days=DAYS - 1, now=cutoff + datetime.timedelta(days=DAYS - 1))
        else:
            _old_prune(cutoff)
        result[layout] = (time.perf_counter() - started, rows)
    return result


def _old_prune(cutoff: datetime.datetime) -> None:
    """The prune of the one table, as it was before partitioning."""
    with connection.cursor() as cursor:
        while True:
            cursor.execute("DELETE FROM plain.audit_auditrecord WHERE id IN "
                           "(SELECT id FROM plain.audit_auditrecord WHERE created_at < %s LIMIT 10000)", [cutoff])
            if cursor.rowcount < 10000:
                return


def migration(rows: int) -> list[str]:
    """Migration 0013 timed on a log of `rows` rows written before it, in a database of its own
    (`gw_audit_migration`, dropped after): the swap, then the copy in batches."""
    name = "gw_audit_migration"
    env = {**os.environ, "DATABASE_URL": f"{SERVER}/{name}"}
    manage = [sys.executable, str(Path(__file__).resolve().parents[1] / "manage.py"), "migrate", "-v", "0"]
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    subprocess.run([*manage, "audit", "0012"], env=env, check=True)
    started = time.monotonic()
    per_day = rows // DAYS
    today = datetime.datetime.now(datetime.UTC).date()
    with psycopg.connect(f"{SERVER}/{name}", autocommit=True) as db:
        db.execute("CREATE TEMP TABLE bench_tenants (n int, id bigint, slug text)")
        db.execute("INSERT INTO bench_tenants SELECT n, n + 2, 'volume-' || n FROM generate_series(-1, %s) AS n",
                   [SMALL_TENANTS - 1])
        sql = ROWS_SQL.format(table="audit_auditrecord", teams=TEAMS, backends=BACKENDS, keys_n=KEYS, tools=TOOLS,
                              small=SMALL_TENANTS)
        for n in range(DAYS):
            start = datetime.datetime.combine(today - datetime.timedelta(days=DAYS - n), datetime.time(), datetime.UTC)
            db.execute(sql, {"base": n * per_day, "start": start, "step": datetime.timedelta(days=1) / per_day,
                             "keys": list(range(1, KEYS + 1)), "n": per_day})
        db.execute("SELECT setval(pg_get_serial_sequence('audit_auditrecord', 'id'), %s)", [DAYS * per_day])
        db.execute("VACUUM ANALYZE audit_auditrecord")
        written = time.monotonic() - started
        started = time.monotonic()
        subprocess.run([*manage, "audit", "0013"], env=env, check=True)
        migrated = time.monotonic() - started
        kept = db.execute("SELECT count(*) FROM audit_auditrecord").fetchone()[0]
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
    return [f"### Migration 0013 on {DAYS * per_day:,} rows", "",
            f"Rows written before it (one table, its 9 indexes) in {written:.0f} s; `migrate audit 0013` took "
            f"**{migrated:.0f} s** ({DAYS * per_day / migrated:,.0f} rows/s copied); {kept:,} rows after it.", ""]


# --- The run ----------------------------------------------------------------------------------------


def _fits(rows: int, plain: bool, max_gb: float) -> None:
    need = rows * BYTES_PER_ROW * (2 if plain else 1) / 1e9
    free = shutil.disk_usage("/").free / 1e9  # the embedded server's data lives on this machine's disk
    if need > max_gb or need > free - 5:
        raise SystemExit(f"{rows:,} rows need ~{need:.0f} GB: over --max-gb {max_gb:g} or the free {free:.0f} GB")


def scale(rows: int, big: Tenant, small: Tenant, small_all: list[Tenant], plain: bool, reuse: bool) -> list[str]:
    layouts = ["partitioned", "plain"] if plain else ["partitioned"]
    size = f"partitioned {_size('audit_auditrecord') / 1e9:.1f} GB"
    if reuse and not plain and _count() >= rows * 0.97:
        lines = [f"### {rows:,} rows", "", f"The log of a previous run, {_count():,} rows; {size}.", ""]
    else:
        generated = generate(rows, big, small_all)
        copied = plain_copy() if plain else 0.0
        lines = [
            f"### {rows:,} rows", "",
            f"Generated in {generated:.0f} s ({rows / generated:,.0f} rows/s, indexes included); partitioned "
            f"{_size('audit_auditrecord') / 1e9:.1f} GB" + (f", plain copy in {copied:.0f} s, "
                                                          f"{_size('plain.audit_auditrecord') / 1e9:.1f} GB"
                                                          if plain else "") + ".", "",
        ]
    rates = writer(big, layouts)
    lines += ["| writer (one instance) | " + " | ".join(layouts) + " |", "|---|" + "---|" * len(layouts)]
    lines.append("| rows/s, median of rounds | " + " | ".join(f"{_median(rates[x]):,.0f}" for x in layouts) + " |")
    lines.append("| rows/s, slowest round | " + " | ".join(f"{min(rates[x]):,.0f}" for x in layouts) + " |")
    if plain:
        lines += ["", f"Writer, partitioned / plain: **{_median(rates['partitioned']) / _median(rates['plain']):.2f}**"]
    times = pages(big, small, layouts)
    lines += ["", "| page (ms) | " + " | ".join(f"{x} p50 | {x} p95" for x in layouts) + " |",
              "|---|" + "---|---|" * len(layouts)]
    for label in dict.fromkeys(label for label, _ in times):
        cells = " | ".join(f"{percentile(times[(label, x)], 50):.1f} | {percentile(times[(label, x)], 95):.1f}"
                           for x in layouts)
        lines.append(f"| {label} | {cells} |")
    plans = plan_times(big, layouts)
    lines += ["", "A query over every partition (the first page's, unbounded), EXPLAIN ANALYZE: " + "; ".join(
        f"{x} planning {p:.1f} ms, execution {e:.1f} ms" for x, (p, e) in plans.items()) + "."]
    kept = retention(layouts)
    lines += ["", "| retention: the oldest day's rows removed | " + " | ".join(layouts) + " |",
              "|---|" + "---|" * len(layouts)]
    lines.append("| seconds (" + ", ".join(f"{x}: {kept[x][1]:,} rows" for x in layouts) + ") | "
                 + " | ".join(f"{kept[x][0]:.2f}" for x in layouts) + " |")
    return lines + [""]


def _count() -> int:
    _use("partitioned")
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM audit_auditrecord")
        return cursor.fetchone()[0]


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def _options(counts: list[int], plain_up_to: int, migration_rows: int, reuse: bool) -> str:
    return "".join([
        f" --rows {' '.join(str(c) for c in counts)}" if counts else "",
        f" --plain-up-to {plain_up_to}" if plain_up_to else "",
        f" --migration-rows {migration_rows}" if migration_rows else "",
        " --reuse" if reuse else "",
    ])


def run(counts: list[int], *, plain_up_to: int, max_gb: float, migration_rows: int, reuse: bool) -> str:
    call_command("migrate", verbosity=0)
    big, small_all = tenants_ensure()
    if not reuse:
        for rows in counts:
            _fits(rows, rows <= plain_up_to, max_gb)
    now = datetime.datetime.now(datetime.UTC)
    lines = [
        f"## The audit log at volume (`python -m bench.audit_volume`) — {now:%Y-%m-%d %H:%M} UTC", "",
        f"Command: `python -m bench.audit_volume{_options(counts, plain_up_to, migration_rows, reuse)}`; "
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"PostgreSQL {connection.pg_version // 10000} (embedded, default settings). "
        f"{DAYS} days of rows; the big tenant has 40 % of them. Writer: {WRITER_ROUNDS} rounds of "
        f"{WRITER_BATCHES} × {BATCH} rows per layout, alternating. Pages: {REPEAT} calls per case, warm, "
        "interleaved.", "",
    ]
    for rows in counts:
        lines += scale(rows, big, small_all[0], small_all, rows <= plain_up_to, reuse)
        print("\n".join(lines), file=sys.stderr, flush=True)  # what is measured so far, in case of a stop
    _use("partitioned")
    with connection.cursor() as cursor:
        cursor.execute("DROP SCHEMA IF EXISTS plain CASCADE")
    if migration_rows:
        lines += migration(migration_rows)
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="*", default=[], help="row counts, measured in turn")
    parser.add_argument("--plain-up-to", type=int, default=0, help="the largest count also copied unpartitioned")
    parser.add_argument("--max-gb", type=float, default=40.0)
    parser.add_argument("--migration-rows", type=int, default=0, help="also time migration 0013 on this many rows")
    parser.add_argument("--reuse", action="store_true",
                        help="measure the log a previous run left when it holds the count (no plain copy)")
    parser.add_argument("--output", type=Path)
    parser.add_argument("--drop", action="store_true", help="drop the database at the end")
    args = parser.parse_args(argv)
    text = run(args.rows, plain_up_to=args.plain_up_to, max_gb=args.max_gb, migration_rows=args.migration_rows,
               reuse=args.reuse)
    print(text)
    if args.output:
        args.output.write_text(text)
    if args.drop:
        connections.close_all()
        with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{DB_NAME}" WITH (FORCE)')
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
