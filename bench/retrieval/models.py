"""Embedding models side by side, dense retrieval only, offline: no database, no Django.

    .venv/bin/python -m bench.retrieval.models [--tier cloud3k] [--output FILE] MODEL [MODEL ...]

A MODEL is a name known to `apps.retrieval.embeddings` (`all-MiniLM-L6-v2`, `all-MiniLM-L6-v2-int8`)
or a sentence-transformers model directory, run by torch, or by ONNX Runtime int8 when followed by
`@int8` (`/path/to/all-mpnet-base-v2@int8`). The tier's tools are compiled from the shared catalog
by the product's compiler and embedded exactly as the index embeds them
(`apps.retrieval.text.index_text(...).document()`); every development query of the tier is
embedded as it is typed — the real search embeds it after id rewriting, which is the same text
for most queries, so this compares models, not the search — and the tools are ranked by cosine.
Scored by the data set's `score.py` (strict), for the tuning and the validation part
(`bench/retrieval/split.py`), overall and per kind, and on the queries written for this project
(`bench/retrieval/data/`: AWS paraphrases, Alibaba, RestBench), which only validate.

Each model runs in a child process of its own, on one thread (`OMP_NUM_THREADS=1`), so that its
peak RSS and timings are its own: documents per second over the whole tier (batches of 32, as
indexing encodes them), the p50/p95 of one query through `encode_soon` (the search's path), the
load time (an int8 model's export is made beforehand, and timed apart). Vectors are kept under
`--work` so that int8 and fp32 vectors of one model can be compared (cosine agreement)."""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data"
DATA = SHARED / "retrieval-dev"
CATALOG = SHARED / "catalog"
K = 15
#: The queries written for this project (validation only, whatever their service), with their pool.
EXTRA = {"aws-paraphrases": "cloud3k", "alibaba": "alibaba", "restbench": "restbench"}


def tier_tools(tier: str) -> Iterator[tuple[str, bytes, Any, Any]]:
    """(service, its spec's bytes, its compiled result, a tool) of each of the tier's tools, compiled
    by the product's compiler, services in order."""
    from apps.catalog.openapi.compiler import compile_spec
    from apps.catalog.openapi.model import CompileOptions

    wanted: dict[str, set[str]] = {}
    for line in (CATALOG / "tiers" / f"{tier}.txt").read_text().split():
        service, operation = line.split("::", 1)
        wanted.setdefault(service, set()).add(operation)
    for service in sorted(wanted):
        document = next(p for vendor in ("aws", "alibaba", "restbench")
                        if (p := CATALOG / "openapi" / vendor / f"{service}.json").exists()).read_bytes()
        result = compile_spec(document, options=CompileOptions(include_deprecated=True))
        for tool in result.tools:
            if tool.operation_id in wanted[service]:
                yield service, document, result, tool


def _documents(tier: str) -> tuple[list[str], list[str]]:
    """(tool ids, the text the index embeds for each) of the tier's tools."""
    from apps.retrieval.text import ToolText, index_text

    ids, texts = [], []
    for service, _, result, tool in tier_tools(tier):
        ids.append(f"{service}::{tool.operation_id}")
        texts.append(index_text(ToolText(tool.name, tool.description, tool.input_schema, service[:64],
                                         result.title[:255])).document())
    return ids, texts


def _embedder(spec: str, cache_dir: Path):  # noqa: ANN202
    from apps.retrieval.embeddings import PACKAGED_MODELS, Embedder, ModelSource, OnnxEmbedder, model_source

    if spec in PACKAGED_MODELS:
        source = model_source(spec)
    else:
        path, _, runtime = spec.partition("@")
        source = ModelSource(spec, Path(path), "onnx-int8" if runtime == "int8" else "torch")
    if source.runtime == "onnx-int8":
        return OnnxEmbedder(source, threads=1, cache_dir=cache_dir)
    return Embedder(source, threads=1)


def _child(spec: str, work: Path, cache_dir: Path) -> None:
    """Run one model over the documents and queries in `work`; write its vectors and numbers."""
    import numpy as np

    texts = json.loads((work / "documents.json").read_text())["texts"]
    queries = json.loads((work / "queries.json").read_text())
    started = time.perf_counter()
    model = _embedder(spec, cache_dir)
    model.encode_soon("warm up").result()
    load = time.perf_counter() - started
    started = time.perf_counter()
    documents = model.encode(texts)
    encode = time.perf_counter() - started
    vectors, times = [], []
    for query in queries:
        t0 = time.perf_counter()
        vectors.append(model.encode_soon(query["query"]).result())
        times.append((time.perf_counter() - t0) * 1000)
    slug = _slug(spec)
    np.save(work / f"{slug}.documents.npy", documents)
    np.save(work / f"{slug}.queries.npy", np.array(vectors))
    ordered = sorted(times)
    (work / f"{slug}.json").write_text(json.dumps({
        "load_s": load, "documents_per_s": len(texts) / encode, "index_minutes": encode / 60,
        "query_p50_ms": statistics.median(times), "query_p95_ms": ordered[round(0.95 * (len(ordered) - 1))],
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "dimensions": int(documents.shape[1]),
    }))
    extra = json.loads((work / "extra.json").read_text())  # after the timings: untimed
    for tier, tier_texts in extra["tiers"].items():
        np.save(work / f"{slug}.tier-{tier}.npy", documents if tier_texts is None else model.encode(tier_texts))
    for label, texts_of_set in extra["sets"].items():
        np.save(work / f"{slug}.set-{label}.npy", np.array([model.encode_soon(t).result() for t in texts_of_set]))


def _slug(spec: str) -> str:
    return hashlib.sha256(spec.encode()).hexdigest()[:12]


def _score(predictions: list[dict], queries: Path = DATA / "queries.jsonl") -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as out:
        out.writelines(json.dumps(p) + "\n" for p in predictions)
    try:
        done = subprocess.run([sys.executable, str(DATA / "score.py"), out.name, "--queries", str(queries),
                               "--json"], capture_output=True, text=True, check=True)
    finally:
        os.unlink(out.name)
    return json.loads(done.stdout)["strict"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*")
    parser.add_argument("--tier", default="cloud3k")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "bench-models")
    parser.add_argument("--cache-dir", type=Path, default=ROOT / "var" / "embeddings", help="where int8 exports are kept")
    parser.add_argument("--output", type=Path, help="append the markdown report to this file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    if args.child:
        _child(args.child, args.work, args.cache_dir)
        return

    import numpy as np

    from bench.retrieval.split import PARTS, part_of_tool

    text_py = (ROOT / "apps" / "retrieval" / "text.py").read_bytes()
    ids, texts = _documents(args.tier)
    (args.work / "documents.json").write_text(json.dumps({"ids": ids, "texts": texts}))
    queries = [json.loads(line) for line in (DATA / "queries.jsonl").read_text().splitlines() if line.strip()]
    queries = [q for q in queries if args.tier in q.get("tiers", [])]
    (args.work / "queries.json").write_text(json.dumps(queries))
    tiers: dict[str, tuple[list[str], list[str] | None]] = {args.tier: (ids, None)}
    sets: dict[str, list[dict]] = {}
    for label, tier in EXTRA.items():
        if tier not in tiers:
            tier_ids, tier_texts = _documents(tier)
            tiers[tier] = (tier_ids, tier_texts)
        path = ROOT / "bench" / "retrieval" / "data" / f"{label}.jsonl"
        sets[label] = [q for q in map(json.loads, path.read_text().splitlines()) if tier in q.get("tiers", [])]
    (args.work / "extra.json").write_text(json.dumps({"tiers": {t: texts for t, (_, texts) in tiers.items()},
                                                       "sets": {label: [q["query"] for q in qs] for label, qs in sets.items()}}))
    print(f"{args.tier}: {len(ids)} tools, {len(queries)} queries; text.py sha256 {hashlib.sha256(text_py).hexdigest()[:12]}",
          flush=True)

    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    rows = []
    for spec in args.models:
        if spec.endswith("-int8") or spec.endswith("@int8"):  # the export, once, apart from the timings
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", "import sys; from bench.retrieval.models import _embedder; "
                            "_embedder(sys.argv[1], __import__('pathlib').Path(sys.argv[2]))", spec, str(args.cache_dir)],
                           check=True, env=env, cwd=ROOT)
            export = time.perf_counter() - started
        else:
            export = None
        subprocess.run([sys.executable, "-m", "bench.retrieval.models", "--child", spec, "--work", str(args.work),
                        "--cache-dir", str(args.cache_dir)], check=True, env=env, cwd=ROOT)
        stats = json.loads((args.work / f"{_slug(spec)}.json").read_text()) | {"export_s": export}
        documents = np.load(args.work / f"{_slug(spec)}.documents.npy")
        vectors = np.load(args.work / f"{_slug(spec)}.queries.npy")
        ranked = np.argsort(-(vectors @ documents.T), axis=1)[:, :K]
        scores = {}
        for part in PARTS:
            predictions = [{"qid": q["qid"], "ranked_tools": [ids[i] for i in ranked[n]]}
                           for n, q in enumerate(queries) if part_of_tool(q["tool"]) == part]
            scores[part] = _score(predictions)
        for label, tier in EXTRA.items():
            tier_ids = tiers[tier][0]
            ranked = np.argsort(-(np.load(args.work / f"{_slug(spec)}.set-{label}.npy")
                                  @ np.load(args.work / f"{_slug(spec)}.tier-{tier}.npy").T), axis=1)[:, :K]
            scores[label] = _score([{"qid": q["qid"], "ranked_tools": [tier_ids[i] for i in ranked[n]]}
                                    for n, q in enumerate(sets[label])], ROOT / "bench" / "retrieval" / "data" / f"{label}.jsonl")
        rows.append((spec, stats, scores))
        print(spec, json.dumps(stats), {p: scores[p]["all"] for p in PARTS}, flush=True)

    report = _markdown(args, len(ids), queries, rows, hashlib.sha256(text_py).hexdigest()[:12])
    print(report)
    if args.output:
        with args.output.open("a", encoding="utf-8") as out:
            out.write("\n" + report)


def _agreement(work: Path, spec: str) -> str:
    """Cosine between a model's int8 and fp32 vectors (documents and queries), when both ran."""
    import numpy as np

    base = spec.removesuffix("@int8").removesuffix("-int8")
    if base == spec or not (work / f"{_slug(base)}.documents.npy").exists():
        return ""
    cosines = np.concatenate([
        (np.load(work / f"{_slug(spec)}.{kind}.npy") * np.load(work / f"{_slug(base)}.{kind}.npy")).sum(axis=1)
        for kind in ("documents", "queries")
    ])
    return f"{cosines.mean():.4f} / {cosines.min():.3f}"


def _markdown(args: argparse.Namespace, tools: int, queries: list[dict], rows: list, text_version: str) -> str:
    from bench.retrieval.split import PARTS, part_of_tool

    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    counts = {p: sum(part_of_tool(q["tool"]) == p for q in queries) for p in PARTS}
    lines = [
        f"Command: `python -m bench.retrieval.models --tier {args.tier} {' '.join(Path(m).name for m in args.models)}` "
        f"({now}). Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, one thread "
        f"per model. Pool: {tools:,} tools; queries: {counts['tuning']} tuning, {counts['validation']} validation "
        f"(raw query text, no id rewriting; strict). Document text: `apps/retrieval/text.py` sha256 {text_version}.",
        "",
        "| model | part | R@1 | R@5 | R@15 | MRR |" + "".join(f" {kind} R@15 |" for kind in _kinds(rows)),
        "|---|---|---|---|---|---|" + "---|" * len(_kinds(rows)),
    ]
    for spec, _, scores in rows:
        for part in PARTS:
            s = scores[part]
            lines.append(f"| {Path(spec).name} | {part} ({s['all']['n']}) | {s['all']['R@1']:.3f} | {s['all']['R@5']:.3f} | "
                         f"{s['all']['R@15']:.3f} | {s['all']['MRR']:.3f} |"
                         + "".join(f" {s[kind]['R@15']:.3f} ({s[kind]['n']}) |" if s.get(kind) else " |" for kind in _kinds(rows)))
    lines += ["", "Queries written for this project before any result was seen (`bench/retrieval/data/`), validation only:", "",
              "| model | set | R@1 | R@5 | R@15 | MRR |", "|---|---|---|---|---|---|"]
    for spec, _, scores in rows:
        for label in EXTRA:
            s = scores[label]["all"]
            lines.append(f"| {Path(spec).name} | {label} ({s['n']}) | {s['R@1']:.3f} | {s['R@5']:.3f} | {s['R@15']:.3f} | {s['MRR']:.3f} |")
    lines += ["", "| model | dim | documents/s | index the pool | query p50 / p95 | load | export | peak RSS | cosine to fp32 (mean / min) |",
              "|---|---|---|---|---|---|---|---|---|"]
    for spec, st, _ in rows:
        export = "" if st["export_s"] is None else f"{st['export_s']:.0f} s"
        lines.append(f"| {Path(spec).name} | {st['dimensions']} | {st['documents_per_s']:.1f} | {st['index_minutes']:.1f} min | "
                     f"{st['query_p50_ms']:.1f} / {st['query_p95_ms']:.1f} ms | {st['load_s']:.1f} s | "
                     f"{export} | {st['peak_rss_mb']:.0f} MB | "
                     f"{_agreement(args.work, spec)} |")
    return "\n".join(lines) + "\n"


def _kinds(rows: list) -> list[str]:
    from bench.retrieval.split import PARTS

    return sorted({key for _, _, scores in rows for part in PARTS for key in scores[part] if key.startswith("kind:")})


if __name__ == "__main__":
    main()
