"""Retrieval evaluation (issue 6 §6): load a pool of the shared catalog into the real index and run
every development query of that pool through the real `tool_search` service — fused, dense only
and full text only — then score the predictions with the data set's own scorer.

    .venv/bin/python -m bench.retrieval [--tier cloud3k] [--queries queries.jsonl] [--k 15] [--output FILE]

Prints Recall@1/5/10/15 and MRR (overall and per query kind) for each path, the search latency
percentiles, and how long compiling and indexing took; `--output` appends the same as markdown."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gatewaysite.settings.dev")
os.environ.setdefault("GATEWAY_TOOL_INDEX", "0")  # the harness indexes itself, timed, not through Celery
django.setup()

from django.conf import settings  # noqa: E402

from apps.retrieval.search import DENSE, PATHS, TEXT, prerequisites_get, tool_index_search  # noqa: E402
from bench.retrieval.pool import SHARED, pool_load  # noqa: E402

DATA = SHARED / "retrieval-dev"
#: run -> (paths, whether ids are rewritten)
RUNS = {
    "fused (RRF)": (PATHS, True),
    "fused, no id rewriting": ((DENSE, TEXT), False),
    "dense only": ((DENSE,), True),
    "full text only": ((TEXT,), True),
}


def _percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


def _score(predictions: list[dict], queries: Path) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as out:
        out.writelines(json.dumps(p) + "\n" for p in predictions)
    try:
        done = subprocess.run([sys.executable, str(DATA / "score.py"), out.name, "--queries", str(queries), "--json"],
                              capture_output=True, text=True, check=True)
    finally:
        os.unlink(out.name)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tier", default="cloud3k")
    parser.add_argument("--queries", default="queries.jsonl", help="a file of ../shared/data/retrieval-dev")
    parser.add_argument("--k", type=int, default=15)
    parser.add_argument("--output", type=Path, help="append the markdown report to this file")
    args = parser.parse_args()

    started = time.perf_counter()
    pool = pool_load(args.tier)
    print(f"pool {args.tier}: {len(pool.tool_ids)} tools; compile {pool.compile_seconds:.1f} s, "
          f"index {pool.index_seconds:.1f} s ({pool.embedded} embedded) in {time.perf_counter() - started:.1f} s",
          flush=True)
    queries_path = DATA / args.queries
    queries = [json.loads(line) for line in queries_path.read_text().splitlines() if line.strip()]
    queries = [q for q in queries if args.tier in q.get("tiers", [])]

    results: dict[str, dict] = {}
    latencies: dict[str, list[float]] = {}
    tool_index_search(tenant_id=pool.tenant.pk, scope=pool.scope, query="warm up the model", k=args.k)
    for run, (paths, rewrite_ids) in RUNS.items():
        predictions, times = [], []
        for query in queries:
            t0 = time.perf_counter()
            hits = tool_index_search(tenant_id=pool.tenant.pk, scope=pool.scope, query=query["query"], k=args.k,
                                     paths=paths, rewrite_ids=rewrite_ids)
            times.append((time.perf_counter() - t0) * 1000)
            predictions.append({"qid": query["qid"], "ranked_tools": [pool.tool_ids[(h.backend_id, h.name)] for h in hits]})
        results[run] = _score(predictions, queries_path)
        latencies[run] = times

    chains = _prerequisites(pool)
    report = _markdown(args, pool, len(queries), results, latencies) + chains
    print(report)
    if args.output:
        with args.output.open("a", encoding="utf-8") as out:
            out.write("\n" + report)


def _prerequisites(pool) -> str:  # noqa: ANN001
    """Score the stored prerequisite chains of the development set's targets that lie in the pool
    (with every tool of their gold chain) with the data set's `score_prereqs.py`."""
    ids = {tool_id: key for key, tool_id in pool.tool_ids.items()}
    gold = [json.loads(line) for line in (DATA / "prereqs.jsonl").read_text().splitlines() if line.strip()]
    gold = [g for g in gold if g["target"] in ids and set(g["closure"]) <= ids.keys()]
    if not gold:
        return ""
    stored = prerequisites_get(tenant_id=pool.tenant.pk, keys=[ids[g["target"]] for g in gold])
    with tempfile.TemporaryDirectory() as folder:
        gold_path, derived_path = Path(folder) / "gold.jsonl", Path(folder) / "derived.jsonl"
        gold_path.write_text("".join(json.dumps(g) + "\n" for g in gold))
        derived_path.write_text("".join(json.dumps({"target": g["target"], "closure": [
            pool.tool_ids[key] for key in stored.get(ids[g["target"]], ()) if key in pool.tool_ids]}) + "\n" for g in gold))
        done = subprocess.run([sys.executable, str(DATA / "score_prereqs.py"), str(derived_path), "--gold", str(gold_path)],
                              capture_output=True, text=True, check=True)
    sizes = [len(chain) for chain in stored.values()]
    line = done.stdout.strip().splitlines()[-1]
    return (f"\nPrerequisite chains, the {len(gold)} development targets in the pool (`score_prereqs.py`): "
            f"`{' '.join(line.split())}`; mean chain length over those targets and their chains' members "
            f"{statistics.mean(sizes) if sizes else 0:.1f}.\n")


def _markdown(args: argparse.Namespace, pool, n: int, results: dict[str, dict], latencies: dict[str, list[float]]) -> str:  # noqa: ANN001
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"### Retrieval, `{args.tier}` pool, `{args.queries}` — {now}",
        "",
        f"Command: `python -m bench.retrieval --tier {args.tier} --queries {args.queries} --k {args.k}`. "
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}. "
        f"Model: {settings.GATEWAY_EMBEDDING_MODEL}. Pool: {len(pool.tool_ids):,} tools; {n} queries. "
        f"Compile {pool.compile_seconds:.0f} s; index {pool.index_seconds:.0f} s ({pool.embedded:,} tools embedded).",
        "",
        "| run | queries | R@1 | R@5 | R@10 | R@15 | MRR | p50 | p95 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for run, scored in results.items():
        times = latencies[run]
        for subset, metrics in _subsets(scored):
            lines.append(
                f"| {run}: {subset} | {metrics['n']} | {metrics['R@1']:.3f} | {metrics['R@5']:.3f} | "
                f"{metrics['R@10']:.3f} | {metrics['R@15']:.3f} | {metrics['MRR']:.3f} | "
                + (f"{statistics.median(times):.1f} ms | {_percentile(times, 95):.1f} ms |" if subset == "all" else " | |")
            )
    return "\n".join(lines) + "\n"


def _subsets(scored: dict) -> list[tuple[str, dict]]:
    """Overall, then per query kind (the scorer's "kind:<name>" entries), strict scoring."""
    strict = scored["strict"]
    out = [("all", strict["all"])]
    out += [(key.removeprefix("kind:"), m) for key, m in sorted(strict.items()) if key.startswith("kind:") and m]
    return out

if __name__ == "__main__":
    main()
