"""The full-text path's ranking: BM25F over the tool index's own `tsvector`s (docs/tool-search.md,
"How a search runs"). Pure: no I/O, no Django.

PostgreSQL's `ts_rank` counts how often and where a query's words occur, but not how rare they are:
a tool matching "security" and "group" outranks one matching "ingress", which 3 tools hold where
500 hold "group". BM25 weighs each word by its rarity among the tenant's tools (idf) and each tool's
text by its length; the fields the index keeps apart (name A, service B, parameters C, description
D: `indexing.py`) count as `FIELD_WEIGHTS` occurrences each. Measured against `ts_rank` on the
tuning part and held on validation (BENCHMARKS.md, "Full text ranked by BM25").

Words are the lexemes PostgreSQL's `english` configuration makes (the index's `tsvector`s, and the
query's `to_tsvector`), so stemming and stop words stay the database's."""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from typing import Generic, TypeVar

import numpy as np

K = TypeVar("K", bound=Hashable)

#: Occurrences of a word in the name (A), the service (B), the parameters (C), the description (D).
FIELD_WEIGHTS = (2.0, 1.0, 1.0, 1.0)
K1 = 1.2
B = 0.75
#: A word in more than this share of a tenant's tools cannot pick candidates, only rank them:
#: "list" or "amazon" alone would match thousands of tools.
COMMON_SHARE = 0.1

# `'lexeme':1A,5B,9` — positions, each with its weight's letter (none for D); '' escapes a quote.
_ENTRY = re.compile(r"'((?:[^']|'')*)'(?::([0-9A-D,]+))?")


def tsvector_terms(text: str) -> dict[str, tuple[int, int, int, int]]:
    """A `tsvector` as PostgreSQL prints it, as each lexeme's occurrences per weight (A, B, C, D).
    A lexeme without positions (a stripped vector) counts once, as D."""
    terms: dict[str, tuple[int, int, int, int]] = {}
    for lexeme, positions in _ENTRY.findall(text):
        counts = [0, 0, 0, 0]
        if positions:
            for position in positions.split(","):
                counts["ABCD".index(position[-1]) if position[-1] in "ABC" else 3] += 1
        else:
            counts[3] = 1
        terms[lexeme.replace("''", "'")] = (counts[0], counts[1], counts[2], counts[3])
    return terms


class TextIndex(Generic[K]):
    """BM25F over one tenant's tools, built once per index version. Postings are kept as arrays
    (12 bytes a tool's word: `cloud3k`'s 3,714 tools take 3.6 MB, built in 0.23 s)."""

    def __init__(self, documents: Iterable[tuple[K, Mapping[str, tuple[int, int, int, int]]]], *,
                 weights: Sequence[float] = FIELD_WEIGHTS, k1: float = K1, b: float = B) -> None:
        keys: list[K] = []
        lengths: list[float] = []
        postings: dict[str, tuple[list[int], list[float]]] = {}
        for at, (key, terms) in enumerate(documents):
            keys.append(key)
            length = 0.0
            for lexeme, counts in terms.items():
                weighted = sum(w * c for w, c in zip(weights, counts, strict=True))
                if weighted <= 0:
                    continue
                length += weighted
                docs, tfs = postings.setdefault(lexeme, ([], []))
                docs.append(at)
                tfs.append(weighted)
            lengths.append(length)
        self.keys = keys
        self.position = {key: at for at, key in enumerate(keys)}
        size = len(keys)
        self._k1 = k1
        average = (sum(lengths) / size) if size else 0.0
        self._norm = k1 * (1 - b + b * np.asarray(lengths, dtype=np.float64) / (average or 1.0))
        self._postings = {lexeme: (np.asarray(docs, dtype=np.int32), np.asarray(tfs, dtype=np.float64))
                          for lexeme, (docs, tfs) in postings.items()}
        self._idf = {lexeme: math.log(1 + (size - len(docs) + 0.5) / (len(docs) + 0.5))
                     for lexeme, (docs, _) in postings.items()}
        #: Each tool's place among the keys in order: equal scores are ordered by key.
        self.order = np.empty(size, dtype=np.int64)
        self.order[sorted(range(size), key=keys.__getitem__)] = np.arange(size)
        self.common = frozenset(lexeme for lexeme, (docs, _) in postings.items() if len(docs) > COMMON_SHARE * size)

    def __len__(self) -> int:
        return len(self.keys)

    def mask(self, keys: Iterable[K]) -> np.ndarray:
        """Which tools are among `keys` (unknown keys are left out)."""
        allowed = np.zeros(len(self.keys), dtype=bool)
        allowed[[self.position[key] for key in keys if key in self.position]] = True
        return allowed

    def rank(self, lexemes: Collection[str], *, picking: Collection[str], allowed: np.ndarray | None,
             depth: int) -> list[tuple[K, float]]:
        """The `depth` best tools holding any of `picking` (and allowed), scored over all of
        `lexemes`, best first; ties by key."""
        candidate = np.zeros(len(self.keys), dtype=bool)
        for lexeme in picking:
            found = self._postings.get(lexeme)
            if found is not None:
                candidate[found[0]] = True
        if allowed is not None:
            candidate &= allowed
        chosen = np.flatnonzero(candidate)
        if not chosen.size:
            return []
        scores = np.zeros(len(self.keys), dtype=np.float64)
        for lexeme in set(lexemes):
            found = self._postings.get(lexeme)
            if found is not None:
                docs, tfs = found
                scores[docs] += self._idf[lexeme] * tfs * (self._k1 + 1) / (tfs + self._norm[docs])
        best = chosen[np.lexsort((self.order[chosen], -scores[chosen]))][:depth]
        return [(self.keys[at], float(scores[at])) for at in best]
