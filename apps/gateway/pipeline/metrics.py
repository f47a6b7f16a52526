"""Counts of what the pipeline noticed, kept in process (the `/metrics` endpoint will export them)."""

from __future__ import annotations

from collections import Counter

Labels = tuple[tuple[str, str], ...]


class Counters:
    def __init__(self) -> None:
        self._counts: Counter[tuple[str, Labels]] = Counter()

    def increment(self, name: str, **labels: str) -> None:
        self._counts[(name, tuple(sorted(labels.items())))] += 1

    def value(self, name: str, **labels: str) -> int:
        """The count of `name` over every label set that includes `labels`."""
        wanted = set(labels.items())
        return sum(count for (key, found), count in self._counts.items() if key == name and wanted <= set(found))

    def items(self) -> list[tuple[str, Labels, int]]:
        return sorted((name, labels, count) for (name, labels), count in self._counts.items())
