"""What `tool_search` answers cost an agent's context: the bytes of each answer at k=15 through a
running gateway, against the bytes of the host's whole `tools/list` (what an agent would read
without search).

    .venv/bin/python -m bench.tool_search_answers [--tier cloud3k] [--k 15] [--output FILE]

Needs the pool in the development database (`python -m bench.retrieval --tier cloud3k` loads it;
this loads it too if it is missing). The pool's tenant gets a virtual host mounting all of its
backends with `tool_search: listed`, so one host answers both the list (every page) and the
searches. Queries: the development queries of the pool (`queries.jsonl`) and the project's own
held-out ones (`bench/retrieval/data/`), each reported for its part (`bench/retrieval/split.py`).
An answer's size is the JSON of its `CallToolResult` as the gateway sent it."""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import platform
import statistics
import sys
from pathlib import Path

import django
import httpx

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gatewaysite.settings.dev")
os.environ.setdefault("GATEWAY_TOOL_INDEX", "0")
django.setup()

from apps.catalog.models import VirtualHost  # noqa: E402
from bench.proxy_latency import ACCEPT, JSON, META  # noqa: E402
from bench.retrieval.pool import SHARED, pool_host_prepare  # noqa: E402
from bench.retrieval.split import TUNING, VALIDATION, part_of_tool  # noqa: E402
from tests.processes import free_port, gateway_argv, running  # noqa: E402

KEY = "bench-answers-key-0123456789abcdef-"  # and the tier: one key per pool
OWN = Path(__file__).parent / "retrieval" / "data"


def _queries(tier: str) -> list[tuple[str, str]]:
    """(part, query) of every query whose answer lies in `tier`; the project's own only validate."""
    found: list[tuple[str, str]] = []
    for path in [SHARED / "retrieval-dev" / "queries.jsonl", *sorted(OWN.glob("*.jsonl"))]:
        own = path.parent == OWN
        for line in path.read_text().splitlines():
            row = json.loads(line) if line.strip() else None
            if row is None or "query" not in row or tier not in row.get("tiers", ()):
                continue
            found.append((VALIDATION if own else part_of_tool(row["tool"]), row["query"]))
    return found


def _post(client: httpx.Client, url: str, key: str, request_id: int, method: str, params: dict) -> bytes:
    headers = dict([JSON, ACCEPT, ("authorization", f"Bearer {key}"), ("mcp-protocol-version", "2026-07-28"),
                    ("mcp-method", method)])
    if "name" in params:
        headers["mcp-name"] = params["name"]
    body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {**params, "_meta": META}}
    response = client.post(url, json=body, headers=headers, timeout=120)
    response.raise_for_status()
    message = response.json()
    if "result" not in message:
        raise RuntimeError(f"{method} failed: {message}")
    return json.dumps(message["result"], separators=(",", ":"), ensure_ascii=False).encode()


def run(tier: str, k: int) -> str:
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per request otherwise
    path = pool_host_prepare(tier=tier, slug="answers", mode=VirtualHost.ToolSearch.LISTED, key=KEY + tier)
    queries = _queries(tier)
    port = free_port()
    env = {"GATEWAY_INSTANCE_ID": "bench", "GATEWAY_LOG_LEVEL": "WARNING", "GATEWAY_TOOL_INDEX": "0"}
    sizes: dict[str, list[int]] = {TUNING: [], VALIDATION: []}
    with running([*gateway_argv(port), "-v", "0"], port, env=env, log_name="bench-tool-search-answers"), \
            httpx.Client() as client:
        url = f"http://127.0.0.1:{port}{path}"
        list_bytes, cursor, request_id, listed = 0, None, 0, 0
        while True:
            request_id += 1
            page = _post(client, url, KEY + tier, request_id, "tools/list", {"cursor": cursor} if cursor else {})
            list_bytes += len(page)
            result = json.loads(page)
            listed += len(result["tools"])
            cursor = result.get("nextCursor")
            if not cursor:
                break
        for part, query in queries:
            request_id += 1
            answer = _post(client, url, KEY + tier, request_id, "tools/call",
                           {"name": "tool_search", "arguments": {"query": query, "k": k}})
            sizes[part].append(len(answer))
    return _markdown(tier, k, listed, list_bytes, sizes)


def _markdown(tier: str, k: int, listed: int, list_bytes: int, sizes: dict[str, list[int]]) -> str:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"### `tool_search` answer sizes, `{tier}` pool, k={k} — {now}",
        "",
        f"Command: `python -m bench.tool_search_answers --tier {tier} --k {k}`. Machine: {platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}. The host's `tools/list`: {listed:,} tools, "
        f"{list_bytes / 1024:,.0f} KiB over every page.",
        "",
        "| part | answers | median | p90 | max | `tools/list` ÷ median answer |",
        "|---|---|---|---|---|---|",
    ]
    for part, values in sizes.items():
        if not values:
            continue
        ordered = sorted(values)
        median = statistics.median(ordered)
        p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
        lines.append(f"| {part} | {len(values)} | {median / 1024:.1f} KiB | {p90 / 1024:.1f} KiB | "
                     f"{ordered[-1] / 1024:.1f} KiB | {list_bytes / median:,.0f}× |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tier", default="cloud3k")
    parser.add_argument("--k", type=int, default=15)
    parser.add_argument("--output", type=Path, help="append the markdown table to this file")
    args = parser.parse_args()
    report = run(args.tier, args.k)
    print(report)
    if args.output:
        with args.output.open("a", encoding="utf-8") as out:
            out.write("\n" + report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
