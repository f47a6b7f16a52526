"""Cost of the pure part of a multi-backend `tools/list`: merge 10 backends × 100 tools, page the
result, encode and decode a cursor; and of cutting a pass-through backend's 3 MB page in pieces
(`list_pieces.py`). No I/O; prints µs per operation (median of several runs).

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
from apps.gateway.pipeline.list_pieces import ListPieces  # noqa: E402
from apps.gateway.pipeline.listing import PageLimits, list_result, merge_lists, paged  # noqa: E402
from apps.gateway.pipeline.values import VirtualHostView  # noqa: E402
from apps.gateway.protocol import jsonrpc  # noqa: E402
from apps.gateway.protocol.jsonrpc import classify  # noqa: E402


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

    limits = PageLimits(items=page_size)
    cut = paged(merged, limits)
    kept: dict[int, tuple[Any, int]] = {}

    def encoded_once(start: int) -> tuple[Any, int]:  # as HostLists keeps a merged list's pages
        page = kept.get(start)
        if page is None:
            page = kept[start] = cut(start)
        return page

    def first_page() -> dict[str, Any]:
        return list_result(merged, None, codec=codec, tenant_id=1, vhost="main", pages=encoded_once)

    def next_page() -> dict[str, Any]:
        return list_result(merged, cursor, codec=codec, tenant_id=1, vhost="main", pages=encoded_once)

    def every_page() -> None:
        token = None
        while True:
            result = list_result(merged, token, codec=codec, tenant_id=1, vhost="main", pages=encoded_once)
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
    measure("a first page, cut and encoded (not kept)", lambda: cut(0), 500)
    pieces_of_a_big_page(codec)


def pieces_of_a_big_page(codec: CursorCodec) -> None:
    """A backend that never pages answers 1,500 tools with 2 kB descriptions (3 MB): what cutting
    its page costs on the first request and on each following piece, against relaying it whole."""
    filler = "".join(chr(0x61 + i % 26) for i in range(2000))
    tools = [{"name": f"tool{i:04d}", "description": filler, "inputSchema": {"type": "object"}} for i in range(1500)]
    payload = jsonrpc.dumps({"jsonrpc": "2.0", "id": 1, "result": {"tools": tools}})
    vhost = VirtualHostView(1, "acme", "main", {}, {})  # type: ignore[arg-type]
    pieces = ListPieces(codec, PageLimits())
    request = classify({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    first = pieces.prepare(vhost, request).reshape
    assert first is not None
    token = jsonrpc.loads(first(payload))["result"]["nextCursor"]
    following = pieces.prepare(vhost, classify({**request.raw, "params": {"cursor": token}})).reshape
    assert following is not None
    print(f"a {len(payload) / 1e6:.1f} MB page of {len(tools)} tools, cut to {PageLimits().bytes:,} bytes")
    measure("a page within the limits (the length check)", lambda: pieces.prepare(vhost, request).reshape(b"{}"), 20000)  # type: ignore[misc]
    measure("the first piece (parse, cut, encode)", lambda: first(payload), 20)
    measure("a following piece (parse, check, cut, encode)", lambda: following(payload), 20)
    measure("for scale: parsing the page alone", lambda: jsonrpc.loads(payload), 20)


if __name__ == "__main__":
    main(sys.argv[1:])
