"""Reciprocal Rank Fusion (Cormack, Clarke and Büttcher, SIGIR 2009). Pure.

Each retrieval path ranks its candidates; a candidate's fused score is the sum over the paths of
1 / (k + its rank there), with ranks counted from 1. The constant dampens the top ranks so that a
candidate both paths place well beats one that only one path places first. Ties — equal scores,
which small candidate lists make common — are broken by the best rank any path gave, then by the
key itself, so that a search is deterministic."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)

#: Not the paper's 60: with it, a tool one path ranks first and the other misses (1/61) falls below
#: every tool both paths rank within their first 62, and paraphrases, which only the dense path
#: understands, lost their answer; with 30, within their first 32. 30 gained 9 and lost 1 of 2,419
#: development queries over four query sets and pools (`BENCHMARKS.md`).
RRF_K = 30


@dataclass(frozen=True, slots=True)
class Fused(Generic[K]):
    key: K
    score: float
    ranks: Mapping[str, int]  # path → rank (1-based) in the paths that found it


def rrf(rankings: Mapping[str, Sequence[K]], *, k: int = RRF_K) -> list[Fused[K]]:
    """The union of `rankings` (path name → keys, best first; a key at most once per path),
    best first."""
    ranks: dict[K, dict[str, int]] = {}
    for path, keys in rankings.items():
        for rank, key in enumerate(keys, start=1):
            ranks.setdefault(key, {})[path] = rank
    fused = [Fused(key, sum(1.0 / (k + rank) for rank in by_path.values()), by_path) for key, by_path in ranks.items()]
    fused.sort(key=lambda f: (-f.score, min(f.ranks.values()), f.key))  # type: ignore[type-var]
    return fused
