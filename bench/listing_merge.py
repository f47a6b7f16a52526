"""Cost of the pure part of a multi-backend `tools/list`: merge 10 backends × 100 tools, page the
result, encode and decode a cursor. No I/O; prints µs per operation (median of several runs).

Usage: ``python bench/listing_merge.py [BACKENDS] [TOOLS_PER_BACKEND] [PAGE_SIZE]`` (default 10 100 100).
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from apps.gateway.pipeline.cursors import CursorCodec, ListScope  # noqa: E402
from apps.gateway.pipeline.listing import list_result, merge_lists  # noqa: E402


def measure(label: str, run: Callable[[], Any], number: int) -> float:
    """Median µs per call over 7 rounds of `number` calls."""
    rounds = []
    for _ in range(7):
        started = time.perf_counter()
        for _ in range(number):
            run()
        rounds.append((time.perf_counter() - started) / number * 1e6)
    median = statistics.median(rounds)
    print(f"{label:48} {median:10.2f} µs")
    return median


def main(argv: list[str]) -> None:
    backends = int(argv[0]) if argv else 10
    per_backend = int(argv[1]) if len(argv) > 1 else 100
    page_size = int(argv[2]) if len(argv) > 2 else 100
    lists = {
        f"backend-{b}": [
            {"name": f"backend-{b}-tool_{t:04d}", "description": f"Tool {t}.", "inputSchema": {"type": "object"}}
            for t in range(per_backend)
        ]
        for b in range(backends)
    }
    codec = CursorCodec(b"bench-secret-bench-secret-32byte")
    merged = merge_lists("tools", lists)
    scope = ListScope("tools", 1, "main", merged.version)
    cursor = codec.encode(scope, page_size, merged.identities[page_size - 1])
    total = backends * per_backend
    print(f"{backends} backends × {per_backend} tools = {total} tools, page size {page_size}, "
          f"cursor {len(cursor)} chars")

    def first_page() -> dict[str, Any]:
        return list_result(merged, None, codec=codec, tenant_id=1, vhost="main", page_size=page_size)

    def next_page() -> dict[str, Any]:
        return list_result(merged, cursor, codec=codec, tenant_id=1, vhost="main", page_size=page_size)

    def every_page() -> None:
        token = None
        while True:
            result = list_result(merged, token, codec=codec, tenant_id=1, vhost="main", page_size=page_size)
            token = result.get("nextCursor")
            if token is None:
                return

    measure("merge_lists", lambda: merge_lists("tools", lists), 200)
    measure("list_result, first page (encode)", first_page, 5000)
    measure("list_result, second page (decode + encode)", next_page, 5000)
    measure(f"list_result, all {-(-total // page_size)} pages", every_page, 200)
    measure("cursor encode", lambda: codec.encode(scope, page_size, merged.identities[page_size - 1]), 20000)
    measure("cursor decode", lambda: codec.decode(cursor, scope), 20000)
    measure("ListScope (vhost tag)", lambda: ListScope("tools", 1, "main", merged.version), 20000)


if __name__ == "__main__":
    main(sys.argv[1:])
