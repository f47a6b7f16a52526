"""The naive baseline of the hidden evaluation (docs/tool-search.md, "Evaluation"), offline (no database, no Django), beside our search.

    .venv/bin/python -m bench.retrieval.naive run [--tier cloud3k ...] [--predictions FILE] [--rankings FILE]
    .venv/bin/python -m bench.retrieval.naive compare FILE [FILE ...] --a RUN --b RUN
    .venv/bin/python -m bench.retrieval.naive swap --ours RANKINGS --naive RANKINGS [--validation]

The baseline: one text per tool — the API's title, the service, the operationId split into words,
the operation's summary, the first 600 characters of its description, the names of its required
parameters — ranked by a plain Okapi BM25 and by all-MiniLM-L6-v2 cosine (the product's embedder),
the same text for both, fused by Reciprocal Rank Fusion with the paper's k = 60. The tools are the
tier's, compiled by the product's compiler; summary and description are read from the spec's
operation, since the compiled description has the summary merged into it.

`run` scores the baseline (fused, BM25 only, dense only) per query set and part (`split.py`),
strict, overall and per kind, with the data set's `score.py`; the query sets are those
`python -m bench.retrieval` runs (the development files by the answer's service, the project's
held-out files as validation). `--predictions` writes each run's ranked tools per query in the
format of `bench.retrieval --predictions`, `--rankings` each path's ranking in the format of
`bench.retrieval --rankings`.

`compare` pairs two runs over the same queries (from any of the predictions files given, joined
on set and qid): per set and part, R@5, R@15 and MRR@15 of each, the queries gained and lost at 5
and 15, and a paired bootstrap interval of the differences.

`swap` fuses paths of our rankings and the baseline's, one component swapped at a time, on the
tuning part (`--validation`: the validation part, aggregates only)."""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from apps.retrieval.fusion import fuse, rrf
from apps.retrieval.text import identifier_words
from bench.retrieval.models import DATA, ROOT, _embedder, _score
from bench.retrieval.split import PARTS, TUNING, VALIDATION, part_of_tool

HELD_OUT = ROOT / "bench" / "retrieval" / "data"
MODEL = "all-MiniLM-L6-v2"
DESCRIPTION_CHARS = 600
RRF_K = 60  # the paper's constant, as the baseline uses it
#: How deep each path ranks: as deep as our search's paths do for k = 15 (`search.MIN_DEPTH`, 4·k).
DEPTH = 60
K = 15
BM25_K1, BM25_B = 1.2, 0.75
#: The query files of each tier: (the report's name, path, whether held out: validation whatever the service).
TIER_SETS = {
    "cloud3k": [("queries.jsonl", DATA / "queries.jsonl", False),
                ("queries_awscli.jsonl", DATA / "queries_awscli.jsonl", False),
                ("data/aws-paraphrases.jsonl", HELD_OUT / "aws-paraphrases.jsonl", True),
                ("data/aws-paraphrases-2.jsonl", HELD_OUT / "aws-paraphrases-2.jsonl", True),
                ("data/aws-ids.jsonl", HELD_OUT / "aws-ids.jsonl", True)],
    "alibaba": [("data/alibaba.jsonl", HELD_OUT / "alibaba.jsonl", True)],
    "restbench": [("data/restbench.jsonl", HELD_OUT / "restbench.jsonl", True)],
}
NAIVE, BM25_ONLY, DENSE_ONLY = "naive (RRF 60)", "naive BM25 only", "naive dense only"
BM25, DENSE = "bm25", "dense"


def naive_tools(tier: str) -> tuple[list[str], list[str]]:
    """(tool ids, the baseline's text of each) of the tier's tools."""
    from bench.retrieval.models import tier_tools

    ids, texts = [], []
    specs: dict[str, Mapping] = {}
    for service, document, result, tool in tier_tools(tier):
        spec = specs.get(service) or specs.setdefault(service, json.loads(document))
        operation = _pointed(spec, tool.pointer)
        summary, description = (" ".join(str(operation.get(field) or "").split()) for field in ("summary", "description"))
        required = tool.input_schema.get("required") or []
        parts = (result.title, service, " ".join(identifier_words(tool.operation_id)), summary,
                 description[:DESCRIPTION_CHARS], " ".join(required))
        ids.append(f"{service}::{tool.operation_id}")
        texts.append(" ".join(part for part in parts if part))
    return ids, texts


def _pointed(document: Mapping, pointer: str) -> Mapping:
    """The object at a JSON pointer (`/paths/~1pets/get`)."""
    node = document
    for token in pointer.lstrip("/").split("/"):
        node = node[token.replace("~1", "/").replace("~0", "~")]
    return node


def tokens(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


class Bm25:
    """Okapi BM25 over `texts` (k1 1.2, b 0.75; idf log(1 + (N − df + ½) / (df + ½)), never negative)."""

    def __init__(self, texts: Sequence[str]) -> None:
        counts = [Counter(tokens(text)) for text in texts]
        lengths = np.array([sum(c.values()) for c in counts], dtype=float)
        norm = BM25_K1 * (1 - BM25_B + BM25_B * lengths / lengths.mean())
        postings: dict[str, list[tuple[int, int]]] = {}
        for doc, c in enumerate(counts):
            for term, tf in c.items():
                postings.setdefault(term, []).append((doc, tf))
        self._size = len(texts)
        self._terms: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for term, found in postings.items():
            docs = np.array([d for d, _ in found])
            tf = np.array([t for _, t in found], dtype=float)
            idf = math.log(1 + (len(texts) - len(found) + 0.5) / (len(found) + 0.5))
            self._terms[term] = (docs, idf * tf * (BM25_K1 + 1) / (tf + norm[docs]))

    def rank(self, query: str, depth: int) -> list[tuple[int, float]]:
        """The best `depth` documents holding any query term, (index, score), best first; ties by index."""
        scores = np.zeros(self._size)
        for term in set(tokens(query)):
            if term in self._terms:
                docs, weights = self._terms[term]
                scores[docs] += weights
        found = np.flatnonzero(scores)
        order = found[np.argsort(-scores[found], kind="stable")][:depth]
        return [(int(d), float(scores[d])) for d in order]


def _vectors(texts: list[str], work: Path, encode: Callable[[list[str]], np.ndarray]) -> np.ndarray:
    """The embeddings of `texts`, kept in `work` by a digest of the model and texts."""
    path = work / f"naive-{hashlib.sha256(json.dumps([MODEL, texts]).encode()).hexdigest()[:16]}.npy"
    if not path.exists():
        np.save(path, encode(texts))
    return np.load(path)


def query_sets(tier: str) -> list[tuple[str, Path, dict[str, list[dict]]]]:
    """(name, path, part → queries) of the tier's query files, split as `bench.retrieval` splits them."""
    sets = []
    for name, path, held_out in TIER_SETS[tier]:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        parts: dict[str, list[dict]] = {part: [] for part in PARTS}
        for row in rows:
            if "query" in row and tier in row.get("tiers", []):
                parts[VALIDATION if held_out else part_of_tool(row["tool"])].append(row)
        sets.append((name, path, parts))
    return sets


def _subsets(strict: dict) -> list[tuple[str, dict]]:
    """Overall, then per query kind (the scorer's "kind:<name>" entries)."""
    kinds = [(key.removeprefix("kind:"), m) for key, m in sorted(strict.items()) if key.startswith("kind:") and m]
    return [("all", strict["all"])] + (kinds if len(kinds) > 1 else [])


def _table(rows: list[tuple[str, str, str, dict]]) -> str:
    """Markdown of (set, run, part, strict scores) rows, per kind."""
    lines = ["| set | run | part: kind | n | R@1 | R@5 | R@15 | MRR |", "|---|---|---|---|---|---|---|---|"]
    for name, run, part, strict in rows:
        for kind, m in _subsets(strict):
            lines.append(f"| `{name}` | {run} | {part}: {kind} | {m['n']} | {m['R@1']:.3f} | {m['R@5']:.3f} | "
                         f"{m['R@15']:.3f} | {m['MRR']:.3f} |")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> None:
    args.work.mkdir(parents=True, exist_ok=True)
    model = _embedder(MODEL, args.work)
    predictions: list[dict] = []  # every run's, with set, part and run
    rankings: list[dict] = []  # each query's per-path rankings
    scored: list[tuple[str, str, str, dict]] = []
    for tier in args.tier:
        ids, texts = naive_tools(tier)
        bm25 = Bm25(texts)
        documents = _vectors(texts, args.work, model.encode)
        print(f"{tier}: {len(ids)} tools, mean text {np.mean([len(t) for t in texts]):.0f} characters", flush=True)
        for name, path, parts in query_sets(tier):
            for part, queries in parts.items():
                if not queries:
                    continue
                by_run: dict[str, list[dict]] = {NAIVE: [], BM25_ONLY: [], DENSE_ONLY: []}
                for query in queries:
                    cosine = documents @ model.encode_soon(query["query"]).result()
                    dense = [(int(i), float(cosine[i])) for i in np.argsort(-cosine, kind="stable")[:DEPTH]]
                    found = {BM25: [(ids[i], s) for i, s in bm25.rank(query["query"], DEPTH)],
                             DENSE: [(ids[i], s) for i, s in dense]}
                    fused = [f.key for f in rrf({p: [key for key, _ in r] for p, r in found.items()}, k=RRF_K)]
                    for run_name, ranked in ((NAIVE, fused), (BM25_ONLY, [key for key, _ in found[BM25]]),
                                             (DENSE_ONLY, [key for key, _ in found[DENSE]])):
                        by_run[run_name].append({"qid": query["qid"], "ranked_tools": ranked[:K]})
                    rankings.append({"set": name, "part": part, "qid": query["qid"], "kind": query.get("kind", "?"),
                                     "tool": query["tool"], "paths": {p: [list(x) for x in r] for p, r in found.items()}})
                for run_name, predicted in by_run.items():
                    scored.append((name, run_name, part, _score(predicted, path)))
                    predictions += [{"set": name, "part": part, "run": run_name, **p} for p in predicted]
    print(_table(scored))
    if args.predictions:
        args.predictions.write_text("".join(json.dumps(p) + "\n" for p in predictions))
    if args.rankings:
        args.rankings.write_text("".join(json.dumps(r) + "\n" for r in rankings))


def _queries() -> dict[tuple[str, str], dict]:
    """(set, qid) → the query, of every tier's query files."""
    return {(name, q["qid"]): q for tier in TIER_SETS for name, _, parts in query_sets(tier)
            for queries in parts.values() for q in queries}


def _ranks(rows: list[dict], answers: Mapping[tuple[str, str], str]) -> dict[tuple[str, str], int | None]:
    """(set, qid) → the answer's 1-based rank in the row's ranked tools, or None."""
    found = {}
    for row in rows:
        ranked, answer = row["ranked_tools"], answers[(row["set"], row["qid"])]
        found[(row["set"], row["qid"])] = ranked.index(answer) + 1 if answer in ranked else None
    return found


def paired(a: Sequence[int | None], b: Sequence[int | None], *, resamples: int = 5000) -> dict[str, tuple[float, float, float]]:
    """B − A of R@5, R@15 and MRR@15 over the same queries: (mean, 2.5 %, 97.5 %) of a paired bootstrap."""
    rng = np.random.default_rng(0)
    picks = rng.integers(0, len(a), size=(resamples, len(a)))
    out = {}
    for metric, of in (("R@5", lambda r: float(r is not None and r <= 5)), ("R@15", lambda r: float(r is not None and r <= 15)),
                       ("MRR", lambda r: 1 / r if r is not None and r <= 15 else 0.0)):
        diff = np.array([of(y) - of(x) for x, y in zip(a, b, strict=True)])
        means = diff[picks].mean(axis=1)
        out[metric] = (float(diff.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5)))
    return out


def _comparison(runs: Mapping[str, dict[tuple[str, str], int | None]], groups: Mapping[str, Sequence[tuple[str, str]]],
                a: str, b: str) -> str:
    """Markdown: per group of (set, qid) keys (those both runs ranked), `b` against `a`."""
    lines = [f"{b} against {a} (MRR over the first {K}; bootstrap: 5,000 paired resamples, 95 %):", "",
             f"| group | n | R@5 {a} → {b} | R@15 | MRR | top 5 +/− | top 15 +/− | ΔR@5 [CI] | ΔR@15 [CI] | ΔMRR [CI] |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for group, members in groups.items():
        keys = [key for key in members if key in runs[a] and key in runs[b]]
        if not keys:
            continue
        ra, rb = [runs[a][key] for key in keys], [runs[b][key] for key in keys]
        cells = []
        for metric in ("R@5", "R@15", "MRR"):
            of = (lambda r, n=int(metric[2:]): r is not None and r <= n) if metric != "MRR" else (lambda r: 1 / r if r else 0.0)
            cells.append(f"{np.mean([of(r) for r in ra]):.3f} → {np.mean([of(r) for r in rb]):.3f}")
        for n in (5, 15):
            inside = [(x is not None and x <= n, y is not None and y <= n) for x, y in zip(ra, rb, strict=True)]
            cells.append(f"+{sum(y and not x for x, y in inside)}/−{sum(x and not y for x, y in inside)}")
        cells += [f"{d:+.3f} [{lo:+.3f}, {hi:+.3f}]" for d, lo, hi in paired(ra, rb).values()]
        lines.append(f"| {group} | {len(keys)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _grouped(rows: Sequence[Mapping], *, by_kind: bool) -> dict[str, list[tuple[str, str]]]:
    """Group name → (set, qid) keys: per set and part, all validation sets together, and (with
    `by_kind`) per set, part and kind."""
    groups: dict[str, list[tuple[str, str]]] = {}
    for row in rows:
        key = (row["set"], row["qid"])
        names = [f"`{row['set']}` {row['part']}"]
        if by_kind:
            names.append(f"`{row['set']}` {row['part']}: {row['kind']}")
        if row["part"] == VALIDATION:
            names.append("all validation")
        for name in names:
            groups.setdefault(name, []).append(key)
    return dict(sorted(groups.items(), key=lambda item: (item[0] == "all validation", item[0])))


def compare(args: argparse.Namespace) -> None:
    queries = _queries()
    answers = {key: q["tool"] for key, q in queries.items()}
    rows = [json.loads(line) for path in args.files for line in path.read_text().splitlines() if line.strip()]
    runs = {name: _ranks([r for r in rows if r["run"] == name], answers) for name in (args.a, args.b)}
    of_a = [{**r, "kind": queries[(r["set"], r["qid"])].get("kind", "?")} for r in rows if r["run"] == args.a]
    print(_comparison(runs, _grouped(of_a, by_kind=args.by_kind), args.a, args.b))


def _our_fusion(paths: Mapping[str, Sequence[str]]) -> list[str]:
    return [f.key for f in fuse(paths)]


def _our_fusion_own_protected(paths: Mapping[str, Sequence[str]]) -> list[str]:
    """Our fusion with only our own paths' first few protected: added paths only vote."""
    return [f.key for f in fuse(paths, protect=("dense", "text", "rewrite"))]


def _plain_rrf(paths: Mapping[str, Sequence[str]]) -> list[str]:
    return [f.key for f in rrf(paths, k=RRF_K)]


#: Each swap: (name, which paths from ours and from the baseline, the fusion).
OURS = "ours (fuse of dense, text, rewrite)"
SWAPS: list[tuple[str, dict[str, tuple[str, str]], Callable[[Mapping[str, Sequence[str]]], list[str]]]] = [
    (OURS, {"dense": ("ours", "dense"), "text": ("ours", "text"), "rewrite": ("ours", "rewrite")}, _our_fusion),
    ("ours, fused by RRF 60", {"dense": ("ours", "dense"), "text": ("ours", "text"), "rewrite": ("ours", "rewrite")}, _plain_rrf),
    ("ours, fused by RRF 60, no rewrite path", {"dense": ("ours", "dense"), "text": ("ours", "text")}, _plain_rrf),
    ("ours with naive dense", {"dense": ("naive", DENSE), "text": ("ours", "text"), "rewrite": ("ours", "rewrite")}, _our_fusion),
    ("ours with naive BM25", {"dense": ("ours", "dense"), "text": ("naive", BM25), "rewrite": ("ours", "rewrite")}, _our_fusion),
    ("ours + naive dense as a 4th path", {"dense": ("ours", "dense"), "text": ("ours", "text"), "rewrite": ("ours", "rewrite"),
                                          "naive": ("naive", DENSE)}, _our_fusion),
    ("ours + naive BM25 as a 4th path", {"dense": ("ours", "dense"), "text": ("ours", "text"), "rewrite": ("ours", "rewrite"),
                                         "naive": ("naive", BM25)}, _our_fusion),
    ("ours with naive BM25, + naive dense as a 4th path", {"dense": ("ours", "dense"), "text": ("naive", BM25),
                                                            "rewrite": ("ours", "rewrite"), "naive": ("naive", DENSE)}, _our_fusion),
    ("ours + naive BM25 and naive dense as 4th and 5th paths", {
        "dense": ("ours", "dense"), "text": ("ours", "text"), "rewrite": ("ours", "rewrite"),
        "naive": ("naive", BM25), "naive dense": ("naive", DENSE)}, _our_fusion),
    ("ours + naive BM25 and naive dense as 4th and 5th paths, unprotected", {
        "dense": ("ours", "dense"), "text": ("ours", "text"), "rewrite": ("ours", "rewrite"),
        "naive": ("naive", BM25), "naive dense": ("naive", DENSE)}, _our_fusion_own_protected),
    ("ours + naive dense as a 4th path, unprotected", {"dense": ("ours", "dense"), "text": ("ours", "text"),
                                                       "rewrite": ("ours", "rewrite"), "naive": ("naive", DENSE)},
     _our_fusion_own_protected),
    ("ours with naive dense, RRF 60", {"dense": ("naive", DENSE), "text": ("ours", "text"), "rewrite": ("ours", "rewrite")}, _plain_rrf),
    (NAIVE, {"dense": ("naive", DENSE), "text": ("naive", BM25)}, _plain_rrf),
    # One path alone (a single ranking fuses to itself): each text's own worth, for each ranker.
    ("our dense alone", {"dense": ("ours", "dense")}, _plain_rrf),
    ("naive dense alone", {"dense": ("naive", DENSE)}, _plain_rrf),
    ("our full text alone", {"text": ("ours", "text")}, _plain_rrf),
    ("naive BM25 alone", {"text": ("naive", BM25)}, _plain_rrf),
    ("naive BM25 + our dense, RRF 60", {"dense": ("ours", "dense"), "text": ("naive", BM25)}, _plain_rrf),
    ("our text + naive dense, RRF 60", {"dense": ("naive", DENSE), "text": ("ours", "text")}, _plain_rrf),
    ("naive + our rewrite path, RRF 60", {"dense": ("naive", DENSE), "text": ("naive", BM25), "rewrite": ("ours", "rewrite")}, _plain_rrf),
    ("naive, our fusion", {"dense": ("naive", DENSE), "text": ("naive", BM25)}, _our_fusion),
]


def swap(args: argparse.Namespace) -> None:
    part = VALIDATION if args.validation else TUNING
    read = {source: {(r["set"], r["qid"]): r for path in paths for line in path.read_text().splitlines()
                     if line.strip() and (r := json.loads(line))["part"] == part}
            for source, paths in (("ours", args.ours), ("naive", args.naive))}
    keys = [key for key in read["ours"] if key in read["naive"]]
    answers = {key: read["ours"][key]["tool"] for key in keys}
    runs: dict[str, dict[tuple[str, str], int | None]] = {}
    for name, chosen, fusion in SWAPS:
        if args.only and name not in args.only and name != OURS:
            continue
        ranks = {}
        for key in keys:
            paths = {p: [tool for tool, _ in read[source][key]["paths"].get(path, [])] for p, (source, path) in chosen.items()}
            ranked = fusion(paths)[:K]
            ranks[key] = ranked.index(answers[key]) + 1 if answers[key] in ranked else None
        runs[name] = ranks
    groups = _grouped([read["ours"][key] for key in keys], by_kind=True)
    print(f"{part} part: {len(keys)} queries; each swap against {OURS}\n")
    for name in runs:
        if name != OURS:
            print(_comparison(runs, groups, OURS, name) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("run")
    p.add_argument("--tier", action="append", choices=list(TIER_SETS))
    p.add_argument("--work", type=Path, default=Path("/tmp/bench-naive"), help="where document vectors are kept")
    p.add_argument("--predictions", type=Path)
    p.add_argument("--rankings", type=Path)
    p = commands.add_parser("compare")
    p.add_argument("files", nargs="+", type=Path, help="predictions files (ours and the baseline's)")
    p.add_argument("--a", required=True, help="the run compared against")
    p.add_argument("--b", required=True)
    p.add_argument("--by-kind", action="store_true", help="also per query kind")
    p = commands.add_parser("swap")
    p.add_argument("--ours", action="append", type=Path, required=True, help="rankings of `bench.retrieval --rankings`")
    p.add_argument("--naive", action="append", type=Path, required=True, help="rankings of `naive run --rankings`")
    p.add_argument("--validation", action="store_true", help="the validation part (aggregates only)")
    p.add_argument("--only", action="append", help="only these swaps (beside ours)")
    args = parser.parse_args()
    if args.command == "run":
        args.tier = args.tier or list(TIER_SETS)
    {"run": run, "compare": compare, "swap": swap}[args.command](args)


if __name__ == "__main__":
    main()
