"""Configuration snapshots at many tenants (docs/scale.md): one instance's memory and cold start with
every tenant loaded, what checking the tenants' version counters costs, and what one tenant's edit
costs — it reloads that tenant alone.

    .venv/bin/python -m bench.snapshot_scale [--tenants 1000] [--backends 10] [--output BENCHMARKS.md]

The deployment is built once in a database of its own (`gw_snapshot_scale` on the embedded
PostgreSQL; kept between runs, rebuilt when the shape asked for differs): a template tenant made by
the services — `--backends` OpenAPI backends, each with a real AWS spec from the catalog uploaded
and compiled (the specs nearest 200 tools each, so about 2,000 tools per tenant), one virtual host mounting
them all, one API key — then copied to the other tenants by SQL, tool rows and all (each tenant has
its own spec versions and tool rows, as if each had uploaded its own specs).

The measuring runs in a fresh process (`--measure`), so its memory is the snapshots' alone: it
loads every tenant through the gateway's own `SnapshotDirectory`, one after another, then bumps one
tenant's counter and serves every tenant again."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

DATABASE = "gw_snapshot_scale"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gatewaysite.settings.dev")
import psycopg  # noqa: E402

from bench.databases import SERVER, bench_database  # noqa: E402

os.environ["DATABASE_URL"] = f"{SERVER}/{DATABASE}"

CATALOG = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "catalog" / "openapi" / "aws"
PREFIX = "scale-"


def database_ensure(shape: str) -> None:
    """The database, made afresh unless it holds a deployment of `shape` already."""
    url = bench_database(DATABASE)
    try:
        with psycopg.connect(url) as built:
            if built.execute("SELECT 1 FROM tenants_tenant WHERE slug = %s", [f"{PREFIX}shape-{shape}"]).fetchone():
                return
    except psycopg.errors.UndefinedTable:
        pass
    bench_database(DATABASE, fresh=True)


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def specs_pick(count: int) -> list[Path]:
    """The `count` AWS specs whose tool counts are nearest 200 (compiled here to count them), the
    same ones every run."""
    from apps.catalog.openapi import compile_spec

    sized = sorted((abs(len(compile_spec(p.read_bytes()).tools) - 200), p.name, p) for p in CATALOG.glob("*.json"))
    return [path for _, _, path in sized[:count]]


def deployment_build(tenants: int, backends: int) -> None:
    from django.core.management import call_command
    from django.db import connection

    from apps.catalog.models import Backend, SpecVersion, Tool, VirtualHost, VirtualHostBackend
    from apps.catalog.services import backend_create, virtual_host_create
    from apps.catalog.specs import spec_upload
    from apps.tenants.models import ApiKey, Tenant
    from apps.tenants.services import api_key_issue, tenant_create
    from gatewaysite.celery import app

    call_command("migrate", verbosity=0)
    shape = f"{tenants}x{backends}"
    if Tenant.objects.filter(slug=f"{PREFIX}shape-{shape}").exists():
        return
    app.conf.task_always_eager = True  # the template's specs compile here, now
    template = tenant_create(slug=f"{PREFIX}0", name="Template")
    mounts = {}
    for n, path in enumerate(specs_pick(backends)):
        backend = backend_create(tenant=template, name=f"svc{n}", urls=[], kind=Backend.Kind.OPENAPI,
                                 base_url="http://10.0.0.1/")
        spec_upload(backend=backend, document=path.read_bytes(), filename=path.name)
        mounts[f"svc{n}"] = backend
    virtual_host_create(tenant=template, slug="main", mounts=mounts)
    api_key_issue(tenant=template, name="ci")

    table = {model: connection.ops.quote_name(model._meta.db_table) for model in
             (Tenant, Backend, SpecVersion, Tool, VirtualHost, VirtualHostBackend, ApiKey)}

    def columns(model: type, *skip: str) -> list[str]:
        return [f.column for f in model._meta.concrete_fields if f.column not in ("id", *skip)]

    started = time.perf_counter()
    with connection.cursor() as cursor:
        for n in range(1, tenants):
            cursor.execute(
                f"INSERT INTO {table[Tenant]} ({', '.join(columns(Tenant))}) SELECT "
                + ", ".join("%s" if c in ("slug", "name") else c for c in columns(Tenant))
                + f" FROM {table[Tenant]} WHERE id = %s RETURNING id", [f"{PREFIX}{n}", f"Tenant {n}", template.pk])
            tenant_id = cursor.fetchone()[0]
            backend_ids, version_ids = {}, {}
            for backend in Backend.objects.filter(tenant=template).order_by("pk"):
                cols = columns(Backend, "active_spec_id")
                cursor.execute(
                    f"INSERT INTO {table[Backend]} ({', '.join(cols)}) SELECT "
                    + ", ".join("%s" if c == "tenant_id" else c for c in cols)
                    + f" FROM {table[Backend]} WHERE id = %s RETURNING id", [tenant_id, backend.pk])
                backend_ids[backend.pk] = cursor.fetchone()[0]
                cols = columns(SpecVersion)
                cursor.execute(  # no document: snapshots never read it
                    f"INSERT INTO {table[SpecVersion]} ({', '.join(cols)}) SELECT "
                    + ", ".join({"backend_id": "%s", "document": "''::bytea"}.get(c, c) for c in cols)
                    + f" FROM {table[SpecVersion]} WHERE id = %s RETURNING id",
                    [backend_ids[backend.pk], backend.active_spec_id])
                version_ids[backend.pk] = cursor.fetchone()[0]
                cols = columns(Tool)
                cursor.execute(
                    f"INSERT INTO {table[Tool]} ({', '.join(cols)}) SELECT "
                    + ", ".join({"backend_id": "%s", "spec_version_id": "%s"}.get(c, c) for c in cols)
                    + f" FROM {table[Tool]} WHERE spec_version_id = %s",
                    [backend_ids[backend.pk], version_ids[backend.pk], backend.active_spec_id])
                cursor.execute(f"UPDATE {table[Backend]} SET active_spec_id = %s WHERE id = %s",
                               [version_ids[backend.pk], backend_ids[backend.pk]])
            cols = columns(VirtualHost, "anonymous_key_id")
            cursor.execute(
                f"INSERT INTO {table[VirtualHost]} ({', '.join(cols)}) SELECT "
                + ", ".join("%s" if c == "tenant_id" else c for c in cols)
                + f" FROM {table[VirtualHost]} WHERE tenant_id = %s RETURNING id", [tenant_id, template.pk])
            vhost_id = cursor.fetchone()[0]
            for mount in VirtualHostBackend.objects.filter(virtual_host__tenant=template):
                cursor.execute(f"INSERT INTO {table[VirtualHostBackend]} (virtual_host_id, map_key, backend_id) "
                               "VALUES (%s, %s, %s)", [vhost_id, mount.map_key, backend_ids[mount.backend_id]])
            cols = columns(ApiKey, "team_id", "owner_id")
            cursor.execute(
                f"INSERT INTO {table[ApiKey]} ({', '.join(cols)}) SELECT "
                + ", ".join({"tenant_id": "%s", "secret_hash": "substr(md5(%s) || secret_hash, 1, 64)", "prefix": "%s"}.get(c, c)
                            for c in cols)
                + f" FROM {table[ApiKey]} WHERE tenant_id = %s",
                [tenant_id, str(n), f"k{n}", template.pk])
            if n % 100 == 0:
                print(f"  {n} tenants copied, {time.perf_counter() - started:.0f} s", file=sys.stderr)
    Tenant.objects.create(slug=f"{PREFIX}shape-{shape}", name="marks the shape this database was built for")
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")


async def measure() -> dict[str, float]:
    from apps.catalog.models import Tool
    from apps.common.config_version import config_version_bump
    from apps.common.redis import async_redis_client
    from apps.gateway.adapters.openapi_tool_server import OpenApiHttp
    from apps.gateway.adapters.snapshot_directory import SnapshotDirectory
    from apps.tenants.models import Tenant

    slugs = await asyncio.to_thread(lambda: sorted(
        Tenant.objects.filter(slug__startswith=PREFIX).exclude(slug__startswith=f"{PREFIX}shape").values_list(
            "slug", flat=True), key=lambda s: int(s.removeprefix(PREFIX))))
    tools = await asyncio.to_thread(lambda: Tool.objects.filter(backend__tenant__slug__startswith=PREFIX).count())
    directory = SnapshotDirectory(async_redis_client(), check_seconds=3600, http=OpenApiHttp())
    loads = 0
    load = directory._load

    async def counted(**kwargs: object) -> object:
        nonlocal loads
        loads += 1
        return await load(**kwargs)

    directory._load = counted  # type: ignore[method-assign]
    before = rss_bytes()
    started = time.perf_counter()
    first = await directory.tenant(slugs[0])
    first_s = time.perf_counter() - started
    for slug in slugs[1:]:
        assert await directory.tenant(slug) is not None
    cold_s = time.perf_counter() - started
    after = rss_bytes()
    # A check: one HMGET naming every tenant held, as every instance makes each GATEWAY_SNAPSHOT_CHECK_SECONDS.
    directory._check_seconds = 0
    started = time.perf_counter()
    for _ in range(100):
        await directory.tenant(slugs[0])
    check_ms = (time.perf_counter() - started) * 10
    loads_before = loads
    edited = slugs[len(slugs) // 2]
    await asyncio.to_thread(config_version_bump, tenant_id=(await directory.tenant(edited)).tenant_id)  # type: ignore[union-attr]
    started = time.perf_counter()
    assert await directory.tenant(edited) is not None
    reload_ms = (time.perf_counter() - started) * 1000
    for slug in slugs:
        await directory.tenant(slug)
    assert first is not None
    return {
        "tenants": len(slugs), "tools": tools, "first_s": first_s, "cold_s": cold_s,
        "rss_before_mb": before / 2**20, "rss_after_mb": after / 2**20,
        "per_tenant_kb": (after - before) / len(slugs) / 1024, "check_ms": check_ms, "reload_ms": reload_ms,
        "reloaded_after_edit": loads - loads_before,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tenants", type=int, default=1000)
    parser.add_argument("--backends", type=int, default=10)
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    if not args.measure:
        database_ensure(f"{args.tenants}x{args.backends}")
    import django

    django.setup()
    if args.measure:
        print(json.dumps(asyncio.run(measure())))
        return
    started = time.perf_counter()
    deployment_build(args.tenants, args.backends)
    print(f"deployment ready in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    answer = subprocess.run([sys.executable, "-m", "bench.snapshot_scale", "--measure"], check=True,
                            capture_output=True, text=True, env={**os.environ, "GATEWAY_LOG_LEVEL": "WARNING"})
    r = json.loads(answer.stdout.strip().splitlines()[-1])
    table = "\n".join([
        f"| {r['tenants']:,} tenants × {args.backends} OpenAPI backends, {r['tools']:,} tools | |",
        "|---|---:|",
        f"| first tenant served from cold (s) | {r['first_s']:.2f} |",
        f"| every tenant loaded, one after another (s) | {r['cold_s']:.1f} |",
        f"| process memory before → after (MB) | {r['rss_before_mb']:.0f} → {r['rss_after_mb']:.0f} |",
        f"| memory per tenant held (KB) | {r['per_tenant_kb']:,.0f} |",
        f"| a version check naming every tenant held (ms) | {r['check_ms']:.2f} |",
        f"| one tenant's edit: its next call, reload included (ms) | {r['reload_ms']:.0f} |",
        f"| snapshots reloaded by that edit | {r['reloaded_after_edit']} |",
    ])
    print(table)
    if args.output:
        with args.output.open("a") as out:
            out.write(f"\n<!-- bench.snapshot_scale {datetime.date.today()} {platform.machine()} "
                      f"{os.cpu_count()} cores -->\n{table}\n")


if __name__ == "__main__":
    main()
