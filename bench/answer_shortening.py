"""What fitting a `tool_search` answer into its byte budget costs (`search_answers.answer_build`),
for hits shortened the first time and for hits an earlier answer already shortened (the
`Shortened` that `ToolSearch` keeps across answers).

Usage: ``python bench/answer_shortening.py [ANSWERS]`` (default 400). The tools are the real
schemas of eight AWS services of ``../shared/data/catalog`` (ec2, iam, s3, ecs, eks, rds, lambda,
dynamodb), compiled here and listed as `tools/list` lists them. Each answer holds 15 hits drawn
from 300 of those tools (the tools a day of queries keeps finding), no chains. Three runs over the
same answers: `fresh` (nothing kept: every hit shortened again, as before answers shared the
work), `first` (one `Shortened`, cold), `again` (the same answers once more, every hit kept). Prints
the median and p95 of one answer in ms, and checks that every answer is byte for byte the same."""

from __future__ import annotations

import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import orjson  # noqa: E402

from apps.catalog.openapi import compile_spec  # noqa: E402
from apps.catalog.openapi.model import CompileOptions  # noqa: E402
from apps.gateway.pipeline.tool_search_answers import Shortened, answer_build, answer_result  # noqa: E402
from apps.kernel.search_tool import Found  # noqa: E402

CATALOG = Path(__file__).resolve().parents[2] / "shared" / "data" / "catalog" / "openapi" / "aws"
SERVICES = ("ec2", "iam", "s3", "ecs", "eks", "rds", "lambda", "dynamodb")


def listed_tools() -> dict[tuple[int, str], dict[str, Any]]:
    shown: dict[tuple[int, str], dict[str, Any]] = {}
    for backend, service in enumerate(SERVICES, start=1):
        compiled = compile_spec((CATALOG / f"{service}.json").read_bytes(), options=CompileOptions(include_deprecated=True))
        for tool in compiled.tools:
            item: dict[str, Any] = {"name": tool.name, "description": tool.description, "inputSchema": tool.input_schema}
            if tool.output_schema is not None:
                item["outputSchema"] = tool.output_schema
            if tool.annotations:
                item["annotations"] = tool.annotations
            shown[(backend, tool.name)] = item
    return shown


def run(answers: list[list[tuple[int, str]]], shown: dict, kept: Shortened | None) -> tuple[list[float], list[bytes]]:
    times, encoded = [], []
    for hits in answers:
        started = time.perf_counter()
        result = answer_result(answer_build(Found(hits, {}), shown, shortened=kept))
        times.append((time.perf_counter() - started) * 1000)
        encoded.append(orjson.dumps(result))
    return times, encoded


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    shown = listed_tools()
    rnd = random.Random(1)
    popular = rnd.sample(sorted(shown), 300)
    answers = [rnd.sample(popular, 15) for _ in range(count)]
    kept = Shortened()
    results = {"fresh": run(answers, shown, None), "first": run(answers, shown, kept), "again": run(answers, shown, kept)}
    assert results["fresh"][1] == results["first"][1] == results["again"][1], "answers differ"
    print(f"{len(shown)} tools of {len(SERVICES)} services; {count} answers of 15 hits from 300 of them")
    print("| run | p50 | p95 |\n|---|---|---|")
    for name, (times, _) in results.items():
        times.sort()
        print(f"| {name} | {statistics.median(times):.2f} ms | {times[int(len(times) * 0.95)]:.2f} ms |")


if __name__ == "__main__":
    main()
