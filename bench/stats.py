"""What the benchmarks compute from their samples."""

from __future__ import annotations

from collections.abc import Sequence


def percentile(values: Sequence[float], pct: float) -> float:
    """The nearest-rank `pct` percentile (NaN for no values)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * pct / 100))] if ordered else float("nan")
