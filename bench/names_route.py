"""Cost of the naming contract (apps/kernel/names.py) per call, on a virtual host with 10 map keys
(some sharing prefixes, as `gateway` and `gateway-one` do) and 1,000 tools, 20 of them aliased.

Usage: ``python bench/names_route.py``. Prints microseconds per call; routing should stay well under 1 µs.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from apps.kernel.names import Naming  # noqa: E402

KEYS = ["gateway", "gateway-one", "gateway-one-eu", "github", "jira", "a", "a-b", "search", "1db", "my_files"]
TOOLS = [(key, f"tool_{i:03d}.op-{key[:2]}") for key in KEYS for i in range(100)]
ALIASES = {f"Alias.{i}_X": TOOLS[i * 50] for i in range(20)}


def bench(label: str, fn: Callable[[], object], calls: int) -> None:
    best = float("inf")
    for _ in range(15):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    print(f"{label:52} {best / calls * 1e6:8.3f} µs")


def main() -> None:
    table = {key: key for key in KEYS}
    bench("reference: dict.get (scale for this machine)", lambda: [table.get("github") for _ in range(10000)], 10000)
    started = time.perf_counter()
    naming = Naming.build(KEYS, ALIASES)
    print(f"{'build (10 map keys, 20 aliases)':52} {(time.perf_counter() - started) * 1e6:8.1f} µs")
    exposed = [name for key, tool in TOOLS for name in naming.tool_names(key, tool)]
    assert len(exposed) == len(TOOLS)
    uris = [naming.expose_uri(key, f"file:///srv/{tool}") or "" for key, tool in TOOLS]
    deep = [name for name in exposed if name.startswith("gateway-one-eu-")]
    n = len(exposed)

    bench("route_tool (1,000 exposed names)", lambda: [naming.route_tool(x) for x in exposed], n)
    bench("route_tool (deepest key, gateway-one-eu-*)", lambda: [naming.route_tool(x) for x in deep], len(deep))
    bench("route_tool (alias)", lambda: [naming.route_tool(x) for x in ALIASES], len(ALIASES))
    bench("route_tool (unknown name)", lambda: [naming.route_tool("gateway-one-nope-" + "x") for _ in range(n)], n)
    bench("expose_tool (1,000 tools)", lambda: [naming.expose_tool(k, t) for k, t in TOOLS], n)
    bench("route_uri (1,000 URIs)", lambda: [naming.route_uri(x) for x in uris], n)
    bench("expose_uri (1,000 URIs)", lambda: [naming.expose_uri(k, f"file:///srv/{t}") for k, t in TOOLS], n)
    params = [{"name": x, "arguments": {}} for x in exposed]
    call = "tools/call"
    bench("route_request tools/call (incl. params copy)", lambda: [naming.route_request(call, p) for p in params], n)
    listed = {key: [{"name": tool, "inputSchema": {}} for k, tool in TOOLS if k == key] for key in KEYS}
    bench("expose_tools, per tool (10 lists of 100)", lambda: [naming.expose_tools(k, v) for k, v in listed.items()], n)


if __name__ == "__main__":
    main()
