"""What the pipeline noticed, kept in process: counts and latency histograms, and a note of the
request being handled. The core knows no metrics library; `apps/gateway/prometheus.py` turns these
into Prometheus metrics when `/metrics` is scraped.

Recording is meant for the call path: one dict update (a histogram also a bisect), no lock. The
reader copies the dicts (atomic under the GIL) and may see a histogram one update behind."""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass

Labels = tuple[tuple[str, str], ...]

#: Upper bounds (seconds) of every latency histogram's buckets; the last bucket is +Inf.
LATENCY_BUCKETS: tuple[float, ...] = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)
#: The label value that stands for every value past a label's cap.
OTHER = "other"


class LabelCap:
    """At most `limit` distinct values of one label (say, tool names: a catalog holds thousands);
    values first seen after that are reported as `other`. With `per_group`, each group (a tenant)
    brings at most that many values of its own, so one group's junk cannot take the others' place.
    Share one between the `Counters` of a process so the cap holds per process."""

    def __init__(self, limit: int, per_group: int | None = None) -> None:
        self.limit = limit
        self.per_group = per_group
        self._seen: set[str] = set()
        self._groups: dict[str, set[str]] = {}

    def __len__(self) -> int:
        return len(self._seen)

    def __call__(self, value: str, group: str = "") -> str:
        if self.per_group is None:
            if value in self._seen:
                return value
            if len(self._seen) >= self.limit:
                return OTHER
            self._seen.add(value)  # two threads may both add past the limit: off by a few at most
            return value
        own = self._groups.get(group)
        if own is not None and value in own:
            return value
        if (own is not None and len(own) >= self.per_group) or (value not in self._seen and len(self._seen) >= self.limit):
            return OTHER
        self._groups.setdefault(group, set()).add(value)
        self._seen.add(value)
        return value


class Counters:
    def __init__(self, caps: Mapping[str, LabelCap] | None = None) -> None:
        self._counts: Counter[tuple[str, Labels]] = Counter()
        #: Per label set: a count per bucket of LATENCY_BUCKETS, then +Inf, then the sum.
        self._histograms: dict[tuple[str, Labels], list[float]] = {}
        self._caps = dict(caps or {})

    def bounded(self, label: str, value: str, group: str = "") -> str:
        """`value` as label `label` may take it: itself, or `other` past the label's cap (for
        `group`, when the cap counts per group)."""
        cap = self._caps.get(label)
        return value if cap is None else cap(value, group)

    # Keys keep the labels in the caller's order (sorting them costs more than the update); the
    # readers below merge label sets that differ only in order.
    def increment(self, name: str, **labels: str) -> None:
        self._counts[(name, tuple(labels.items()))] += 1

    def observe(self, name: str, seconds: float, **labels: str) -> None:
        """One observation of a duration (seconds) into the histogram `name`."""
        key = (name, tuple(labels.items()))
        buckets = self._histograms.get(key)
        if buckets is None:
            buckets = self._histograms[key] = [0.0] * (len(LATENCY_BUCKETS) + 2)
        buckets[bisect_left(LATENCY_BUCKETS, seconds)] += 1
        buckets[-1] += seconds

    def value(self, name: str, **labels: str) -> int:
        """The count of `name` over every label set that includes `labels`."""
        wanted = set(labels.items())
        return sum(count for (key, found), count in self._counts.items() if key == name and wanted <= set(found))

    def items(self) -> list[tuple[str, Labels, int]]:
        """Each count: name, labels (sorted by name), count."""
        merged: Counter[tuple[str, Labels]] = Counter()
        for (name, labels), count in self._counts.copy().items():
            merged[(name, tuple(sorted(labels)))] += count
        return sorted((name, labels, count) for (name, labels), count in merged.items())

    def histograms(self) -> list[tuple[str, Labels, list[float]]]:
        """Each histogram: name, labels (sorted by name), and its per-bucket counts followed by the sum."""
        merged: dict[tuple[str, Labels], list[float]] = {}
        for (name, labels), buckets in self._histograms.copy().items():
            key = (name, tuple(sorted(labels)))
            found = merged.get(key)
            merged[key] = list(buckets) if found is None else [a + b for a, b in zip(found, buckets, strict=True)]
        return sorted((name, labels, buckets) for (name, labels), buckets in merged.items())


@dataclass(slots=True)
class RequestNote:
    """What the pipeline learnt of the request it is handling, for the transport's request metrics:
    its JSON-RPC method and the first JSON-RPC error code it answered with."""

    method: str = ""
    error: int | None = None


#: The note of the request the current task handles; the transport sets a fresh one per request.
current_request: ContextVar[RequestNote | None] = ContextVar("mcp_gateway_request_note", default=None)


def note_method(method: str | None) -> None:
    note = current_request.get()
    if note is not None and method:
        note.method = method


def note_error(code: int | None) -> None:
    note = current_request.get()
    if note is not None and note.error is None and code is not None:
        note.error = code
