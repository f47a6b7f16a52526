"""Fusing the retrieval paths' rankings (pure): Reciprocal Rank Fusion (Cormack, Clarke and
Büttcher, SIGIR 2009), with each path's first few kept near the top.

Each retrieval path ranks its candidates; a candidate's fused score is the sum over the paths of
1 / (k + its rank there), with ranks counted from 1. The constant dampens the top ranks so that a
candidate both paths place well beats one that only one path places first. Ties — equal scores,
which small candidate lists make common — are broken by the best rank any path gave, then by the
key itself, so that a search is deterministic.

RRF alone buries what only one path understands: a tool the dense path ranks 2nd and full text
misses scores 1/32, below every tool both paths rank within their first 33 — a paraphrase's answer
under a crowd of tools that share a word with the query. `fuse` keeps each path's first
`PROTECTED` within the fused first `HEAD` (docs/tool-search.md, "How a search runs").

The same fusion, weighted, joins the query's fused ranking with those of the calling agent's other
phrasings of its need (`fuse_also`): each counts less than the query, and only the query's first
few are kept near the top, so what the query alone ranks first is never pushed out by them."""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)

#: Not the paper's 60: with it, a tool one path ranks first and the other misses (1/61) falls below
#: every tool both paths rank within their first 62, and paraphrases, which only the dense path
#: understands, lost their answer; with 30, within their first 32. 30 gained 9 and lost 1 of 2,419
#: development queries over four query sets and pools (`BENCHMARKS.md`); checked again on the
#: tuning part alone, with `fuse`: 20 and 30 rank alike, 10 and 60 trade queries both ways.
RRF_K = 30


@dataclass(frozen=True, slots=True)
class Fused(Generic[K]):
    key: K
    score: float
    ranks: Mapping[str, int]  # path → rank (1-based) in the paths that found it


def rrf(
    rankings: Mapping[str, Sequence[K]], *, k: int = RRF_K, weights: Mapping[str, float] | None = None
) -> list[Fused[K]]:
    """The union of `rankings` (path name → keys, best first; a key at most once per path),
    best first. `weights`: what a path's 1 / (k + rank) is multiplied by (1 for a path not named)."""
    weights = weights or {}
    ranks: dict[K, dict[str, int]] = {}
    for path, keys in rankings.items():
        for rank, key in enumerate(keys, start=1):
            ranks.setdefault(key, {})[path] = rank
    fused = [Fused(key, sum(weights.get(path, 1.0) / (k + rank) for path, rank in by_path.items()), by_path)
             for key, by_path in ranks.items()]
    fused.sort(key=lambda f: (-f.score, min(f.ranks.values()), f.key))  # type: ignore[type-var]
    return fused


#: Each path's first this many are kept in the fused first `HEAD`: measured on the tuning part
#: of the development data (`BENCHMARKS.md`, retrieval), 2 and 5 gained the most at R@5 and R@15
#: and lost the fewest (keeping only each path's first: fewer gains; its first 3: losses; within
#: the fused first 10: no gain at R@5), and held on the validation part.
PROTECTED = 2
HEAD = 5


def fuse(
    rankings: Mapping[str, Sequence[K]],
    *,
    k: int = RRF_K,
    weights: Mapping[str, float] | None = None,
    protect: Collection[str] | None = None,
) -> list[Fused[K]]:
    """`rrf` of `rankings` (with `weights`), except that every key a path of `protect` (default:
    every path) ranks within its first `PROTECTED` is within the fused first `HEAD` (or, when more
    keys are so protected, among the first of them): a protected key RRF places lower takes the
    place of the last unprotected key of the head. The head keeps RRF's order, and so does the rest."""
    fused = rrf(rankings, k=k, weights=weights)
    protected = {key for path, keys in rankings.items() if protect is None or path in protect
                 for key in keys[:PROTECTED]}
    late = [f for f in fused[HEAD:] if f.key in protected]
    if not late:
        return fused
    head = fused[:HEAD]
    evicted: set[K] = set()
    for f in reversed(head):
        if len(evicted) == len(late):
            break
        if f.key not in protected:
            evicted.add(f.key)
    order = {f.key: i for i, f in enumerate(fused)}
    first = sorted([f for f in head if f.key not in evicted] + late, key=lambda f: order[f.key])
    chosen = {f.key for f in first}
    return first + [f for f in fused if f.key not in chosen]


#: What an alternative phrasing's ranking counts for in `fuse_also`, against the query's 1. On the
#: tuning part, with the agent phrasings of `bench/retrieval/data/alternatives.jsonl`, recall rose
#: with the weight and flattened from 0.5 to 0.9 (R@5 0.87–0.91, R@15 0.98–1.0 of 54 queries); the
#: middle of that keeps an alternative clearly below the query (`BENCHMARKS.md`, retrieval).
ALSO_WEIGHT = 0.75
QUERY, ALSO = "query", "also"


def fuse_also(query: Sequence[K], alternatives: Sequence[Sequence[K]], *, weight: float = ALSO_WEIGHT) -> list[Fused[K]]:
    """The query's fused ranking joined with those of other phrasings of the same need (each as
    `fuse` ranks it), best first: `fuse` with each alternative weighted `weight` and only the
    query's first `PROTECTED` protected, so none of them leaves the first `HEAD` because of the
    alternatives. `Fused.ranks` names the query `QUERY` and the alternatives `also1`, `also2`, …"""
    rankings: dict[str, Sequence[K]] = {QUERY: query}
    rankings.update((f"{ALSO}{i}", keys) for i, keys in enumerate(alternatives, start=1))
    return fuse(rankings, weights={path: weight for path in rankings if path != QUERY}, protect=(QUERY,))
