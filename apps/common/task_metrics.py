"""Durations of index builds in Celery workers, kept in Redis so that every gateway's `/metrics`
can export them (workers serve no HTTP). One hash holds, per task and outcome, a count per
bucket of TASK_BUCKETS (+Inf last) and the sum, plus each task's last successful finish."""

from __future__ import annotations

import contextlib
import logging
import time
from bisect import bisect_left
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import redis

from apps.common.redis import redis_client

log = logging.getLogger(__name__)

TASK_DURATIONS_KEY = "gw:metrics:task-durations"
#: Upper bounds (seconds) of the buckets: a build takes from a fraction of a second (nothing
#: changed) to many minutes (a catalog of thousands of tools embedded on a CPU).
TASK_BUCKETS: tuple[float, ...] = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)


@dataclass(frozen=True, slots=True)
class TaskDurations:
    #: (task, outcome) -> per-bucket counts (+Inf last) and the sum of seconds
    histograms: dict[tuple[str, str], tuple[list[float], float]]
    #: task -> unix time of the last successful finish
    last_success: dict[str, float]


def task_duration_record(*, task: str, seconds: float, ok: bool, at: float | None = None) -> None:
    """Add one run of `task` (names without `|`). A Redis failure is logged, never raised: metrics
    must not fail the work they measure."""
    outcome = "ok" if ok else "error"
    bucket = bisect_left(TASK_BUCKETS, seconds)
    try:
        with redis_client().pipeline(transaction=False) as pipe:
            pipe.hincrby(TASK_DURATIONS_KEY, f"{task}|{outcome}|{bucket}", 1)
            pipe.hincrbyfloat(TASK_DURATIONS_KEY, f"{task}|{outcome}|sum", seconds)
            if ok:
                pipe.hset(TASK_DURATIONS_KEY, f"{task}|last_success", repr(time.time() if at is None else at))
            pipe.execute()
    except (redis.RedisError, OSError) as exc:
        log.warning("could not record the duration of %s: %s", task, exc)


@contextlib.contextmanager
def task_timed(task: str) -> Iterator[None]:
    """Record how long the block took and whether it raised (the exception goes on)."""
    started = time.perf_counter()
    try:
        yield
    except BaseException:
        task_duration_record(task=task, seconds=time.perf_counter() - started, ok=False)
        raise
    task_duration_record(task=task, seconds=time.perf_counter() - started, ok=True)


def task_durations_parse(raw: Mapping[bytes | str, bytes | str]) -> TaskDurations:
    """The hash as read (HGETALL); fields that do not parse are skipped."""
    histograms: dict[tuple[str, str], tuple[list[float], float]] = {}
    last: dict[str, float] = {}
    size = len(TASK_BUCKETS) + 1
    for field, value in raw.items():
        name = field.decode() if isinstance(field, bytes) else field
        parts = name.split("|")
        try:
            number = float(value)
        except ValueError:
            continue
        if len(parts) == 2 and parts[1] == "last_success":
            last[parts[0]] = number
            continue
        if len(parts) != 3:
            continue
        task, outcome, slot = parts
        buckets, total = histograms.get((task, outcome), ([0.0] * size, 0.0))
        if slot == "sum":
            total = number
        elif slot.isdigit() and int(slot) < size:
            buckets[int(slot)] = number
        else:
            continue
        histograms[(task, outcome)] = (buckets, total)
    return TaskDurations(histograms, last)
