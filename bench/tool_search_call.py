"""`tool_search` called through the gateway over the `full_aws` pool (18,378 tools), a new query
and a cached one, against the cheapest answer of the same host (docs/tool-search.md).

    .venv/bin/python -m bench.tool_search_call [--calls N] [--output FILE]

Needs the pool in the development database (`python -m bench.retrieval --tier full_aws` loads it;
this loads it too if it is missing, which takes about ten minutes). The pool's tenant gets a
virtual host mounting all of its 424 backends with `tool_search: only`, and a key. Paths, all
stateless (2026-07-28) requests from one client, alternated in rounds:
- tools/list: the host's list (the `tool_search` tool alone), the floor of any answer;
- tool_search, cached: the same query every time, answered from the gateway's cache;
- tool_search, new query: each call a query the gateway has not seen (the development queries,
  numbered), embedded and searched (the database only stems it: docs/tool-search.md, "How a search runs").
The in-process search service alone (`tool_index_search`, same queries) is timed after."""

from __future__ import annotations

import asyncio
import datetime
import itertools
import json
import os
import platform
import statistics
import sys
import time

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gatewaysite.settings.dev")
os.environ.setdefault("GATEWAY_TOOL_INDEX", "0")
django.setup()

from apps.catalog.models import VirtualHost  # noqa: E402
from apps.retrieval.search import tool_index_search  # noqa: E402
from bench.proxy_latency import Caller, bench_main, calibrate, measure, percentile  # noqa: E402
from bench.retrieval.pool import SHARED, pool_host_prepare, pool_load  # noqa: E402
from tests.processes import free_port, gateway_argv, running  # noqa: E402

KEY = "bench-search-key-0123456789abcdef"
TIER = "full_aws"
CACHED_QUERY = "list the subnets of a vpc"


def queries() -> list[str]:
    rows = (json.loads(line) for line in (SHARED / "retrieval-dev" / "queries.jsonl").read_text().splitlines() if line)
    return [row["query"] for row in rows if TIER in row["tiers"]]


class NewQueries(Caller):
    """Calls tool_search with a query the gateway has not answered before, every time."""

    def __init__(self, url: str, texts: list[str]) -> None:
        super().__init__(url, "modern", "tools/call", {}, True, key=KEY)
        self._texts = (f"{text} {n}" for n, text in enumerate(itertools.cycle(texts)))

    async def call(self, request_id: int) -> None:
        self.params = {"name": "tool_search", "arguments": {"query": next(self._texts), "k": 15}}
        await super().call(request_id)


def run(calls: int) -> str:
    path = pool_host_prepare(tier=TIER, slug="search", mode=VirtualHost.ToolSearch.ONLY, key=KEY)
    texts = queries()
    port = free_port()
    env = {"GATEWAY_INSTANCE_ID": "bench", "GATEWAY_LOG_LEVEL": "WARNING", "GATEWAY_DEBUG": "0", "GATEWAY_TOOL_INDEX": "0"}
    before = calibrate()
    with running([*gateway_argv(port), "-v", "0"], port, env=env, log_name="bench-tool-search") as gateway:
        url = f"http://127.0.0.1:{port}{path}"
        search = {"name": "tool_search", "arguments": {"query": CACHED_QUERY, "k": 15}}
        measured = asyncio.run(measure({
            "tools/list": Caller(url, "modern", "tools/list", {}, True, key=KEY),
            "tool_search, cached": Caller(url, "modern", "tools/call", search, True, key=KEY),
            "tool_search, new query": NewQueries(url, texts),
        }, 1, calls, gateway.pid, max(calls // 50, 1)))
    pool = pool_load(TIER)
    service = []
    for text in texts[:calls]:
        started = time.perf_counter()
        tool_index_search(tenant_id=pool.tenant.pk, scope=pool.scope, query=f"{text} service", k=15)
        service.append((time.perf_counter() - started) * 1000)
    rows = {name: (percentile(lat, 50), percentile(lat, 99), cpu) for name, (lat, _, cpu) in measured.items()}
    rows["search service in process"] = (statistics.median(service), percentile(service, 99), None)
    for name, (p50, p99, cpu) in rows.items():
        print(f"{name:28} p50={p50:7.2f} ms  p99={p99:7.2f} ms" + (f"  gateway CPU {cpu:.2f} ms/call" if cpu else ""))
    return markdown(rows, calls, len(pool.tool_ids), before, calibrate())


def markdown(rows: dict[str, tuple[float, float, float | None]], calls: int, tools: int, before: float, after: float) -> str:
    floor = rows["tools/list"][0]
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"### `tool_search` through the gateway, `{TIER}` pool — {now}",
        "",
        f"Command: `python -m bench.tool_search_call --calls {calls}`. Machine: {platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}. {tools:,} tools behind one virtual host "
        f"(`tool_search: only`), stateless requests, one client. Machine speed: a fixed 5M-iteration Python "
        f"loop took {before:.3f} s before and {after:.3f} s after.",
        "",
        "| path | p50 | p99 | gateway CPU/call | p50 − tools/list |",
        "|---|---|---|---|---|",
    ]
    for name, (p50, p99, cpu) in rows.items():
        cpu_text = f"{cpu:.2f} ms" if cpu is not None else "—"
        delta = f"{p50 - floor:+.2f} ms" if name != "tools/list" and cpu is not None else ""
        lines.append(f"| {name} | {p50:.2f} ms | {p99:.2f} ms | {cpu_text} | {delta} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    bench_main(__doc__ or "", run)


if __name__ == "__main__":
    sys.exit(main())
