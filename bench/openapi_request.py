"""Time ``build_request`` for a synthetic 100-parameter OpenAPI tool (mixed locations).

Usage: ``python bench/openapi_request.py [CALLS]`` (default 10,000). The tool is compiled through
``compile_spec`` from a generated OpenAPI 3.1 document: 4 path, 50 query (form, exploded/unexploded,
pipe/space-delimited, deepObject; scalars, arrays and objects), 16 header and 10 cookie parameters and a
JSON body of 20 properties. Prints the median and p99 of one call in µs (the plan is warmed first).

The machine's speed drifts (2x within minutes on the shared sandbox), so the run also times, interleaved in
blocks of 100 calls, two references in the same process and prints the ratios of the medians, which drift
far less: ``build_request_reference`` (the generic walk over the plan that ``build_request`` used before
the per-tool generated builders) and ``orjson.dumps`` of the same arguments.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import orjson  # noqa: E402

from apps.catalog.openapi import Credential, build_request, compile_spec  # noqa: E402
from apps.catalog.openapi.invoke import build_request_reference, prepare_builder  # noqa: E402

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
    subjects: dict[str, Callable[[], object]] = {
        "build_request": partial(build_request, tool, args, credential=credential),
        "reference": partial(build_request_reference, tool, args, credential=credential),
        "orjson": partial(orjson.dumps, args),
    }
    assert subjects["build_request"]() == subjects["reference"]()
    prepare_builder(tool)  # what the gateway does in a worker thread after a tool's first call
    for subject in subjects.values():  # warm the plan cache, the memo and the interpreter
        for _ in range(200):
            subject()
    clock = time.perf_counter_ns
    samples: dict[str, list[int]] = {name: [] for name in subjects}
    block = 100
    for _ in range(max(1, calls // block)):
        for name, subject in subjects.items():
            out = samples[name]
            for _ in range(block):
                t0 = clock()
                subject()
                out.append(clock() - t0)
    medians = {name: statistics.median(values) / 1000 for name, values in samples.items()}
    timed = sorted(samples["build_request"])
    p99 = timed[min(len(timed) - 1, int(len(timed) * 0.99))] / 1000
    request = build_request(tool, args, credential=credential)
    print(f"build_request, 100-argument tool: {len(timed):,} calls, median {medians['build_request']:.1f} µs, "
          f"p99 {p99:.1f} µs")
    print(f"  url {len(request.url)} chars, {len(request.headers)} headers, body {len(request.body)} bytes")
    print(f"  same process, interleaved: reference (generic walk) median {medians['reference']:.1f} µs, "
          f"ratio {medians['build_request'] / medians['reference']:.2f}; orjson.dumps(arguments) median "
          f"{medians['orjson']:.2f} µs, ratio {medians['build_request'] / medians['orjson']:.1f}")
    return 0

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
