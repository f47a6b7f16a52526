"""Retrieval evaluation: load a pool of the shared catalog into the real index and run every query
of that pool through the real `tool_search` service — fused, dense only, full text only, and
fused without id rewriting, and fused by plain Reciprocal Rank Fusion — then score the predictions with the data set's own scorer.

    .venv/bin/python -m bench.retrieval [--tier cloud3k] [--queries queries.jsonl ...] [--tuning-only]
                                        [--run NAME ...] [--k 15] [--output FILE] [--rankings FILE]
                                        [--alternatives FILE [--also-weight W]] [--predictions FILE]

Every number is given for the tuning and the validation part separately (`split.py`: by the
answer tool's service), overall and per query kind: Recall@1/5/15 and MRR; then the search latency
(new queries, in process) and how long compiling and indexing took. `--queries` names files of
`../shared/data/retrieval-dev` (default `queries.jsonl`); the project's own held-out queries
(`bench/retrieval/data/*.jsonl`, validation only whatever their service) that have answers in the
pool are added unless `--no-held-out`; `--tuning-only` runs and prints the tuning part alone (for
tuning loops: a validation number never shows). `--rankings` writes each query's per-path
rankings before fusion (JSONL), to try fusions offline; `--predictions` writes each run's ranked
tools per query (JSONL `{"set", "part", "run", "qid", "ranked_tools"}`), to compare other rankers
query by query; `--output` appends the report as markdown.
`--alternatives` (JSONL rows `{"qid", "alternatives": [...]}`, an agent's other phrasings of each
query) adds the run "fused + agent phrasings": each query searched with its alternatives as
`tool_search`'s `also` (a query without any: alone), with its gains and losses against "fused"."""

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
from dataclasses import dataclass
from pathlib import Path

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gatewaysite.settings.dev")
os.environ.setdefault("GATEWAY_TOOL_INDEX", "0")  # the harness indexes itself, timed, not through Celery
django.setup()

from django.conf import settings  # noqa: E402

from apps.retrieval.chains import prerequisites_get  # noqa: E402
from apps.retrieval.fusion import ALSO_WEIGHT, rrf  # noqa: E402
from apps.retrieval.search import (  # noqa: E402
    DENSE,
    PATHS,
    TEXT,
    tool_index_rankings,
    tool_index_search,
)
from bench.retrieval.pool import SHARED, Pool, pool_load  # noqa: E402
from bench.retrieval.split import PARTS, TUNING, VALIDATION, part_of_tool  # noqa: E402

DATA = SHARED / "retrieval-dev"
HELD_OUT = Path(__file__).resolve().parent / "data"
#: The project's own prerequisite gold over tuning-part services (the others of `HELD_OUT` validate).
TUNING_GOLD = "prereqs-tuning.jsonl"
#: run -> (paths, whether ids are rewritten, whether fused by plain RRF rather than the search's own fusion)
RUNS = {
    "fused": (PATHS, True, False),
    "fused by plain RRF": (PATHS, True, True),
    "fused, no id rewriting": ((DENSE, TEXT), False, False),
    "dense only": ((DENSE,), True, False),
    "full text only": ((TEXT,), True, False),
}
#: Against which run the others' gains and losses are counted (queries whose answer enters or leaves the top n).
BASELINE = "fused by plain RRF"
#: The run with the agent's phrasings (`--alternatives`), counted against the single query's.
ALSO_RUN, SINGLE = "fused + agent phrasings", "fused"
METRICS = ("R@1", "R@5", "R@15", "MRR")


@dataclass(frozen=True)
class QuerySet:
    name: str  # as the report shows it
    path: Path
    queries: dict[str, list[dict]]  # part -> the pool's queries of that part


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


def _query_sets(tier: str, names: list[str], *, tuning_only: bool, held_out: bool) -> list[QuerySet]:
    """The pool's queries of each named development file, by part, then (with `held_out`, never
    with `tuning_only`) those of every held-out query file, all validation."""
    sets = []
    files = [(name, DATA / name, False) for name in names]
    if held_out and not tuning_only:
        files += [(f"data/{path.name}", path, True) for path in sorted(HELD_OUT.glob("*.jsonl"))]
    for name, path, is_held_out in files:
        if not path.exists():
            raise SystemExit(f"no query file {path}")
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        rows = [row for row in rows if "query" in row and tier in row.get("tiers", [])]  # not prerequisite gold
        parts: dict[str, list[dict]] = {part: [] for part in PARTS}
        for row in rows:
            parts[VALIDATION if is_held_out else part_of_tool(row["tool"])].append(row)
        if tuning_only:
            parts = {TUNING: parts[TUNING]}
        if any(parts.values()):
            sets.append(QuerySet(name, path, parts))
    return sets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tier", default="cloud3k")
    parser.add_argument("--queries", action="append", help="a file of ../shared/data/retrieval-dev (repeatable)")
    parser.add_argument("--tuning-only", action="store_true", help="run and print the tuning part alone")
    parser.add_argument("--no-held-out", action="store_true", help="leave the held-out query files out")
    parser.add_argument("--run", action="append", choices=list(RUNS), help="the runs to make (default: all)")
    parser.add_argument("--k", type=int, default=15)
    parser.add_argument("--output", type=Path, help="append the markdown report to this file")
    parser.add_argument("--rankings", type=Path, help="write each query's per-path rankings (JSONL) here")
    parser.add_argument("--predictions", type=Path, help="write each run's ranked tools per query (JSONL) here")
    parser.add_argument("--alternatives", type=Path, help="JSONL of {qid, alternatives}: add the run with them")
    parser.add_argument("--also-weight", type=float, default=ALSO_WEIGHT, help="an alternative's weight in the fusion")
    args = parser.parse_args()
    args.queries = args.queries or ["queries.jsonl"]
    runs = {name: RUNS[name] for name in (args.run or RUNS)}
    alternatives: dict[str, list[str]] = {}
    if args.alternatives:
        alternatives = _alternatives_read(args.alternatives)
        runs = {**{SINGLE: RUNS[SINGLE]}, **runs, ALSO_RUN: RUNS[SINGLE]}

    started = time.perf_counter()
    pool = pool_load(args.tier)
    print(f"pool {args.tier}: {len(pool.tool_ids)} tools; compile {pool.compile_seconds:.1f} s, "
          f"index {pool.index_seconds:.1f} s ({pool.embedded} embedded) in {time.perf_counter() - started:.1f} s",
          flush=True)
    sets = _query_sets(args.tier, args.queries, tuning_only=args.tuning_only, held_out=not args.no_held_out)
    tool_index_search(tenant_id=pool.tenant.pk, scope=pool.scope, query="warm up the model", k=args.k)

    results: dict[tuple[str, str, str], dict] = {}  # (set, run, part) -> scores
    ranks: dict[tuple[str, str, str], list[int | None]] = {}  # (set, run, part) -> each query's answer's rank
    latencies: dict[tuple[str, str], list[float]] = {}  # (set, run) -> ms per query
    written = []  # with --predictions: every run's predictions, with their set, part and run
    for qset in sets:
        for run, (paths, rewrite_ids, plain) in runs.items():
            times = latencies.setdefault((qset.name, run), [])
            for part, queries in qset.queries.items():
                predictions = []
                for query in queries:
                    also = alternatives.get(query["qid"], []) if run == ALSO_RUN else []
                    t0 = time.perf_counter()
                    if plain:
                        found = tool_index_rankings(tenant_id=pool.tenant.pk, scope=pool.scope, query=query["query"],
                                                    k=args.k, paths=paths, rewrite_ids=rewrite_ids)
                        keys = [f.key for f in rrf({p: [key for key, _ in ranked] for p, ranked in found.items()})]
                    else:
                        keys = [(h.backend_id, h.name) for h in tool_index_search(
                            tenant_id=pool.tenant.pk, scope=pool.scope, query=query["query"], k=args.k, paths=paths,
                            rewrite_ids=rewrite_ids, also=also, also_weight=args.also_weight)]
                    if run != ALSO_RUN or also:  # its latency: of the queries searched with alternatives
                        times.append((time.perf_counter() - t0) * 1000)
                    predictions.append({"qid": query["qid"], "ranked_tools": [pool.tool_ids[key] for key in keys[:args.k]]})
                written += [{"set": qset.name, "part": part, "run": run, **p} for p in predictions]
                if predictions:
                    results[(qset.name, run, part)] = _score(predictions, qset.path)
                    ranks[(qset.name, run, part)] = [
                        p["ranked_tools"].index(q["tool"]) + 1 if q["tool"] in p["ranked_tools"] else None
                        for p, q in zip(predictions, queries, strict=True)]
    if args.rankings:
        _rankings_write(args.rankings, pool, sets, args.k)
    if args.predictions:
        args.predictions.write_text("".join(json.dumps(p) + "\n" for p in written), encoding="utf-8")

    report = (_markdown(args, pool, sets, runs, results, latencies) + _changes(sets, runs, ranks)
              + (_changes(sets, runs, ranks, baseline=SINGLE, only=(ALSO_RUN,), alternatives=alternatives)
                 if alternatives else "")
              + _prerequisites(pool, tuning_only=args.tuning_only))
    print(report)
    if args.output:
        with args.output.open("a", encoding="utf-8") as out:
            out.write("\n" + report)


def _alternatives_read(path: Path) -> dict[str, list[str]]:
    """qid -> its alternatives; SystemExit naming the line of a row that is not one."""
    found: dict[str, list[str]] = {}
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        texts = row.get("alternatives")
        if not isinstance(row.get("qid"), str) or not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise SystemExit(f"{path}:{number}: not a row {{\"qid\": ..., \"alternatives\": [strings]}}")
        found[row["qid"]] = texts
    return found


def _rankings_write(path: Path, pool: Pool, sets: list[QuerySet], k: int) -> None:
    """One line per query: its set, part, kind, answer, and what each path ranked (tool ids with
    the path's scores, best first), for fusing offline exactly as the search would."""
    with path.open("w", encoding="utf-8") as out:
        for qset in sets:
            for part, queries in qset.queries.items():
                for query in queries:
                    found = tool_index_rankings(tenant_id=pool.tenant.pk, scope=pool.scope, query=query["query"], k=k)
                    out.write(json.dumps({
                        "set": qset.name, "part": part, "qid": query["qid"], "kind": query.get("kind", "?"),
                        "query": query["query"], "tool": query["tool"],
                        "paths": {p: [[pool.tool_ids[key], score] for key, score in ranked] for p, ranked in found.items()},
                    }) + "\n")


def _prerequisites(pool: Pool, *, tuning_only: bool) -> str:
    """Score the stored prerequisite chains of the gold targets that lie in the pool (with every
    tool of their gold chain) with the data set's `score_prereqs.py`: the development set's per
    part, then the project's own: its tuning gold (`TUNING_GOLD`) and, unless `tuning_only`, its
    held-out gold (`bench/retrieval/data/prereqs*.jsonl`)."""
    ids = {tool_id: key for key, tool_id in pool.tool_ids.items()}
    groups: dict[str, list[dict]] = {}
    own = [path for path in sorted(HELD_OUT.glob("prereqs*.jsonl"))
           if path.name == TUNING_GOLD or not tuning_only]
    for path in [DATA / "prereqs.jsonl", *own]:
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            g = json.loads(line)
            if g["target"] in ids and set(g["closure"]) <= ids.keys():
                part = TUNING if path.name == TUNING_GOLD else VALIDATION
                group = part_of_tool(g["target"]) if path.parent == DATA else f"data/{path.name} ({part})"
                groups.setdefault(group, []).append(g)
    if tuning_only:
        groups.pop(VALIDATION, None)
    if not groups:
        return ""
    stored = prerequisites_get(tenant_id=pool.tenant.pk, keys=[ids[g["target"]] for gold in groups.values() for g in gold])
    lines = []
    for group, targets in sorted(groups.items(), key=lambda item: (item[0] not in PARTS, item[0] != TUNING, item[0])):
        with tempfile.TemporaryDirectory() as folder:
            gold_path, derived_path = Path(folder) / "gold.jsonl", Path(folder) / "derived.jsonl"
            gold_path.write_text("".join(json.dumps(g) + "\n" for g in targets))
            derived_path.write_text("".join(json.dumps({"target": g["target"], "closure": [
                pool.tool_ids[key] for key in stored.get(ids[g["target"]], ()) if key in pool.tool_ids]}) + "\n"
                for g in targets))
            done = subprocess.run([sys.executable, str(DATA / "score_prereqs.py"), str(derived_path), "--gold",
                                   str(gold_path)], capture_output=True, text=True, check=True)
        sizes = [len(stored.get(ids[g["target"]], ())) for g in targets]
        line = done.stdout.strip().splitlines()[-1]
        lines.append(f"- {group}: {len(targets)} targets, `{' '.join(line.split())}`; "
                     f"mean chain length {statistics.mean(sizes):.1f}")
    return "\nPrerequisite chains of the gold targets in the pool (`score_prereqs.py`):\n\n" + "\n".join(lines) + "\n"


def _markdown(args: argparse.Namespace, pool: Pool, sets: list[QuerySet], runs: dict, results: dict,
              latencies: dict) -> str:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    command = f"python -m bench.retrieval --tier {args.tier} " + " ".join(f"--queries {q}" for q in args.queries)
    if args.tuning_only:
        command += " --tuning-only"
    if args.alternatives:
        command += f" --alternatives {args.alternatives} --also-weight {args.also_weight}"
    lines = [
        f"### Retrieval, `{args.tier}` pool — {now}",
        "",
        f"Command: `{command} --k {args.k}`. "
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}. "
        f"Model: {settings.GATEWAY_EMBEDDING_MODEL}. Pool: {len(pool.tool_ids):,} tools. "
        f"Compile {pool.compile_seconds:.0f} s; index {pool.index_seconds:.0f} s ({pool.embedded:,} tools embedded).",
    ]
    for qset in sets:
        counts = ", ".join(f"{part} {len(queries)}" for part, queries in qset.queries.items() if queries)
        lines += ["", f"`{qset.name}` ({counts} queries):", "",
                  "| run | part: kind | queries | " + " | ".join(METRICS) + " |",
                  "|---|---|---|" + "---|" * len(METRICS)]
        for run in runs:
            for part in qset.queries:
                scored = results.get((qset.name, run, part))
                if scored is None:
                    continue
                for subset, metrics in _subsets(scored):
                    lines.append(f"| {run} | {part}: {subset} | {metrics['n']} | "
                                 + " | ".join(f"{metrics[m]:.3f}" for m in METRICS) + " |")
        lines += ["", "Latency per new query, in process: " + "; ".join(
            f"{run}{' (the queries with alternatives)' if run == ALSO_RUN else ''} "
            f"p50 {statistics.median(t):.1f} ms, p95 {_percentile(t, 95):.1f} ms"
            for (name, run), t in latencies.items() if name == qset.name and t) + "."]
    return "\n".join(lines) + "\n"


def _changes(sets: list[QuerySet], runs: dict, ranks: dict, *, baseline: str = BASELINE, only: tuple[str, ...] = (),
             alternatives: dict[str, list[str]] | None = None) -> str:
    """Per set and part, how many queries each run (of `only`, if given) gains and loses against
    `baseline` (the primary answer entering or leaving the first 5 and the first 15); with
    `alternatives`, also how many of the part's queries have any."""
    if baseline not in runs:
        return ""
    lines = []
    for qset in sets:
        for part, queries in qset.queries.items():
            base = ranks.get((qset.name, baseline, part))
            if base is None:
                continue
            for run in runs:
                if run == baseline or (only and run not in only) or (qset.name, run, part) not in ranks:
                    continue
                counts = []
                if alternatives is not None:
                    counts.append(f"{sum(q['qid'] in alternatives for q in queries)} of {len(queries)}")
                for n in (5, 15):
                    inside = [[r is not None and r <= n for r in ranks[(qset.name, name, part)]] for name in (run, baseline)]
                    gained = sum(a and not b for a, b in zip(*inside, strict=True))
                    lost = sum(b and not a for a, b in zip(*inside, strict=True))
                    counts.append(f"R@{n} +{gained}/−{lost}")
                lines.append(f"| `{qset.name}` | {part} | {run} | " + " | ".join(counts) + " |")
    if not lines:
        return ""
    extra = ("with alternatives | ", "---|") if alternatives is not None else ("", "")
    return (f"\nQueries gained/lost against {baseline}:\n\n| set | part | run | {extra[0]}top 5 | top 15 |\n"
            f"|---|---|---|{extra[1]}---|---|\n" + "\n".join(lines) + "\n")


def _subsets(scored: dict) -> list[tuple[str, dict]]:
    """Overall, then per query kind (the scorer's "kind:<name>" entries), strict scoring."""
    strict = scored["strict"]
    kinds = [(key.removeprefix("kind:"), m) for key, m in sorted(strict.items()) if key.startswith("kind:") and m]
    return [("all", strict["all"])] + (kinds if len(kinds) > 1 else [])


if __name__ == "__main__":
    main()
