"""Time ``build_request`` for a synthetic 100-parameter OpenAPI tool (mixed locations).

Usage: ``python bench/openapi_request.py [CALLS]`` (default 10,000). The tool is compiled through
``compile_spec`` from a generated OpenAPI 3.1 document: 4 path, 50 query (form, exploded/unexploded,
pipe/space-delimited, deepObject; scalars, arrays and objects), 16 header and 10 cookie parameters and a
JSON body of 20 properties. Prints the median and p99 of one call in µs (the plan is warmed first).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import orjson  # noqa: E402

from apps.catalog.openapi import (  # noqa: E402
    Credential,
    build_request,
    compile_spec,  # noqa: E402
)

QUERY_STYLES = [("form", True), ("form", False), ("pipeDelimited", False), ("spaceDelimited", False)]


def synthetic_spec() -> tuple[bytes, dict]:
    params: list[dict] = []
    args: dict = {}
    for i in range(4):
        params.append({"name": f"p{i}", "in": "path", "required": True, "schema": {"type": "string"}})
        args[f"p{i}"] = f"seg ment/{i}"
    for i in range(50):
        if i % 10 == 9:
            params.append({"name": f"q{i}", "in": "query", "style": "deepObject", "explode": True,
                           "schema": {"type": "object"}})
            args[f"q{i}"] = {"a": i, "b": "x y"}
            continue
        style, explode = QUERY_STYLES[i % 4]
        if i % 3 == 0:
            params.append({"name": f"q{i}", "in": "query", "style": style, "explode": explode,
                           "schema": {"type": "array", "items": {"type": "string"}}})
            args[f"q{i}"] = ["alpha", "beta", f"v{i}"]
        else:
            params.append({"name": f"q{i}", "in": "query", "schema": {"type": "string"}})
            args[f"q{i}"] = f"value {i}" if i % 2 else i
    for i in range(16):
        params.append({"name": f"X-H{i}", "in": "header", "schema": {"type": "string"}})
        args[f"X-H{i}"] = f"header-{i}"
    for i in range(10):
        params.append({"name": f"c{i}", "in": "cookie", "schema": {"type": "string"}})
        args[f"c{i}"] = f"cookie{i}"
    body_props = {f"b{i}": {"type": "string"} for i in range(20)}
    args.update({f"b{i}": f"body value {i}" for i in range(20)})
    path = "/items/" + "/".join(f"{{p{i}}}" for i in range(4))
    doc = {"openapi": "3.1.0", "info": {"title": "bench", "version": "1"},
           "servers": [{"url": "https://api.example.com/v1"}],
           "paths": {path: {"post": {"operationId": "big", "parameters": params, "requestBody": {
               "required": True,
               "content": {"application/json": {"schema": {"type": "object", "properties": body_props}}}},
               "responses": {"200": {"description": "ok"}}}}}}
    return orjson.dumps(doc), args


def main(argv: list[str]) -> int:
    calls = int(argv[0]) if argv else 10_000
    data, args = synthetic_spec()
    result = compile_spec(data)
    assert result.ok and len(result.tools) == 1, result.errors
    tool = result.tools[0]
    assert len(tool.binding.arguments) == 100 and len(args) == 100
    credential = Credential("bearer", "token")
    for _ in range(200):  # warm the plan cache and the interpreter
        build_request(tool, args, credential=credential)
    clock = time.perf_counter_ns
    samples: list[int] = []
    for _ in range(calls):
        t0 = clock()
        build_request(tool, args, credential=credential)
        samples.append(clock() - t0)
    samples.sort()
    median = statistics.median(samples) / 1000
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))] / 1000
    request = build_request(tool, args, credential=credential)
    print(f"build_request, 100-argument tool: {calls:,} calls, median {median:.1f} µs, p99 {p99:.1f} µs")
    print(f"  url {len(request.url)} chars, {len(request.headers)} headers, body {len(request.body)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
