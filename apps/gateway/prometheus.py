"""Prometheus metrics of a gateway process (docs/observability.md, "Metrics").

The pipeline records into plain `Counters` (apps/gateway/pipeline/metrics.py), one per `Gateway`
(one per event loop). Nothing here runs per call except `request_observe`: the collector reads
every gateway's counters when `/metrics` is scraped, adds what lives in Redis (active sessions,
the worker heartbeat, index build durations, replicas marked down: one pipelined round trip) and
names it all."""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import redis
from django.conf import settings
from prometheus_client import CollectorRegistry, PlatformCollector, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from apps.common.health import WORKER_HEARTBEAT_KEY, heartbeat_age
from apps.common.replica_health import REPLICA_HEALTH_KEY, replicas_down
from apps.common.task_metrics import TASK_BUCKETS, TASK_DURATIONS_KEY, task_durations_parse
from apps.gateway.adapters.redis_session_store import sessions_usable_count
from apps.gateway.pipeline.metrics import LATENCY_BUCKETS, Counters, LabelCap, Labels, RequestNote, current_request

log = logging.getLogger(__name__)

PREFIX = "mcp_gateway_"

#: JSON-RPC methods of the MCP revisions the gateway speaks (and its own extensions): the `method`
#: label takes these values only; any other method a client sends is `other`.
KNOWN_METHODS = frozenset({
    "initialize", "ping", "server/discover", "subscriptions/listen", "completion/complete", "logging/setLevel",
    "tools/list", "tools/call", "resources/list", "resources/templates/list", "resources/read",
    "resources/subscribe", "resources/unsubscribe", "prompts/list", "prompts/get",
    "tasks/get", "tasks/result", "tasks/list", "tasks/cancel",
    "roots/list", "sampling/createMessage", "elicitation/create",
    "notifications/initialized", "notifications/cancelled", "notifications/progress",
    "notifications/roots/list_changed", "notifications/message",
})
_HTTP_METHODS = frozenset({"GET", "POST", "DELETE"})

#: JSON-RPC error codes by the class the `outcome` label names.
_CODE_CLASSES = {
    -32700: "parse_error",
    -32600: "invalid_request",
    -32601: "method_not_found",
    -32602: "invalid_params",
    -32603: "internal_error",
    -32003: "policy_denied",
    -32004: "backend_unavailable",
    -32005: "rate_limited",
    -32006: "interceptor_refused",
    -32020: "header_mismatch",
    -32021: "missing_client_capability",
    -32022: "unsupported_protocol_version",
}


def error_class(code: int) -> str:
    """The `outcome` label of a JSON-RPC error: its name for the codes above, else its range."""
    known = _CODE_CLASSES.get(code)
    if known is not None:
        return known
    return "server_error" if -32099 <= code <= -32000 else "application_error"


def request_outcome(status: int, note: RequestNote) -> str:
    """`ok`, the class of the JSON-RPC error answered, or `http_<status>` for an HTTP error."""
    if note.error is not None:
        return error_class(note.error)
    return "ok" if status < 400 else f"http_{status}"


def request_method(note: RequestNote, http_method: str) -> str:
    """The `method` label: the JSON-RPC method, or `http:<verb>` for requests that carry no single
    one (stream GETs, session DELETEs, batches, bodies that do not parse)."""
    if note.method:
        return note.method if note.method in KNOWN_METHODS else "other"
    return f"http:{http_method}" if http_method in _HTTP_METHODS else "http:other"


def request_observe(counters: Counters, note: RequestNote, *, http_method: str, status: int, seconds: float) -> None:
    """One request to the MCP endpoint, answered with `status` after `seconds`."""
    counters.observe("requests", seconds, method=request_method(note, http_method), outcome=request_outcome(status, note))


@functools.cache
def metric_label_caps() -> dict[str, LabelCap]:
    """The label caps of this process, shared by all its gateways (GATEWAY_METRICS_MAX_*)."""
    return {
        "tool": LabelCap(settings.GATEWAY_METRICS_MAX_TOOLS, per_group=settings.GATEWAY_METRICS_MAX_TOOLS_PER_TENANT),
        "backend": LabelCap(settings.GATEWAY_METRICS_MAX_BACKENDS),
    }


#: Pipeline histograms: Prometheus name, help, label names.
_HISTOGRAMS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "requests": ("request_duration_seconds",
                 "Requests to the MCP endpoint by JSON-RPC method and outcome, until the response head "
                 "(_count is the number of requests)", ("method", "outcome")),
    "calls": ("tool_call_duration_seconds",
              "Routed calls (tools/call, resources/read, prompts/get, tool_search) by method, tool (the exposed "
              "name; the resource URI or prompt name for those methods), backend and outcome, until answered",
              ("method", "tool", "backend", "outcome")),
}
#: Pipeline counters: Prometheus name (without _total), help, label names.
_COUNTERS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "upstream_errors": ("upstream_errors",
                        "Routed calls a backend did not answer, by backend and kind (timeout | unavailable | bad_reply | busy)",
                        ("backend", "kind")),
    "rate_limited": ("rate_limit_refusals", "Calls refused by a rate limit, by the limit's scope (key | team)",
                     ("scope",)),
    "over_budget": ("budget_refusals", "Calls refused by a budget, by scope and period (day | month)",
                    ("scope", "period")),
    "rate_limit_unchecked": ("rate_limit_unchecked", "Calls whose rate limits could not be checked (Redis "
                             "unreachable)", ()),
    "interceptions": ("interceptions", "Interceptor decisions other than a plain pass, by kind (secrets | "
                      "personal_data | fields | size | injection | webhook), phase (request | result) and action "
                      "(rewrite | refuse | flag | failed_open | failed_closed; a webhook's pass too)",
                      ("kind", "phase", "action")),
    "budget_unchecked": ("budget_unchecked", "Calls whose budgets could not be checked (Redis unreachable)", ()),
    "cache": ("cache_lookups", "Lookups in the gateway's in-process caches by cache (snapshot | session | "
              "merged_list | backend_list | tool_search) and result (hit | miss)", ("cache", "result")),
    "session_messages": ("session_messages", "Messages for a session's stream, by route: local (this instance owns "
                         "the stream) or relayed (sent to the owning instance through Redis)", ("route",)),
    "sse_streams": ("sse_streams", "HTTP+SSE (2024-11-05) streams opened, by whether they resumed a session",
                    ("resumed",)),
    "list_backend_omitted": ("list_backend_omitted", "Backends left out of a merged list, by list method, backend "
                             "and reason (timeout | too_large: over GATEWAY_BACKEND_MAX_TOOLS or "
                             "GATEWAY_BACKEND_MAX_LIST_BYTES | error)", ("method", "backend", "reason")),
}


def _bucket_pairs(bounds: Iterable[float], counts: list[float]) -> list[tuple[str, float]]:
    """Cumulative Prometheus buckets from per-bucket counts (the last one +Inf)."""
    pairs = []
    total = 0.0
    for bound, count in zip([*bounds, math.inf], counts, strict=True):
        total += count
        pairs.append(("+Inf" if bound == math.inf else repr(float(bound)), total))
    return pairs


class GatewayCollector(Collector):
    """Everything `/metrics` reports of the gateway; `sources` returns the counters of every
    gateway in the process, `redis_client` a synchronous client (None: leave Redis out)."""

    def __init__(self, sources: Callable[[], Iterable[Counters]], redis_client: Callable[[], Any] | None) -> None:
        self._sources = sources
        self._redis = redis_client

    def collect(self) -> Iterator[Metric]:
        counts: dict[tuple[str, Labels], float] = {}
        histograms: dict[tuple[str, Labels], list[float]] = {}
        for counters in self._sources():
            for name, labels, value in counters.items():
                counts[(name, labels)] = counts.get((name, labels), 0) + value
            for name, labels, buckets in counters.histograms():
                found = histograms.get((name, labels))
                histograms[(name, labels)] = buckets if found is None else [a + b for a, b in zip(found, buckets, strict=True)]
        yield from self._pipeline_histograms(histograms)
        yield from self._pipeline_counters(counts)
        label_values = GaugeMetricFamily(
            PREFIX + "metric_label_values", "Distinct values a capped label has taken in this process; past "
            "GATEWAY_METRICS_MAX_<LABEL>S further values are reported as \"other\"", labels=["label"])
        for label, cap in metric_label_caps().items():
            label_values.add_metric([label], len(cap))
        yield label_values
        if self._redis is not None:
            yield from self._from_redis()

    def _pipeline_histograms(self, histograms: dict[tuple[str, Labels], list[float]]) -> Iterator[Metric]:
        families = {
            name: (HistogramMetricFamily(PREFIX + prom, help_text, labels=list(names)), names)
            for name, (prom, help_text, names) in _HISTOGRAMS.items()
        }
        for (name, labels), buckets in sorted(histograms.items()):
            if name not in families:  # a histogram the pipeline gained without a name here: still exported
                names = tuple(key for key, _ in labels)
                families[name] = (HistogramMetricFamily(PREFIX + f"{name}_seconds", f"Pipeline histogram {name!r}",
                                                        labels=list(names)), names)
            family, names = families[name]
            values = dict(labels)
            family.add_metric([values.get(n, "") for n in names], _bucket_pairs(LATENCY_BUCKETS, buckets[:-1]),
                              buckets[-1])
        yield from (family for family, _ in families.values())

    def _pipeline_counters(self, counts: dict[tuple[str, Labels], float]) -> Iterator[Metric]:
        families = {
            name: (CounterMetricFamily(PREFIX + prom, help_text, labels=list(names)), names)
            for name, (prom, help_text, names) in _COUNTERS.items()
        }
        for (name, labels), value in sorted(counts.items()):
            if name not in families:  # a counter the pipeline gained without a name here: still exported
                names = tuple(key for key, _ in labels)
                families[name] = (CounterMetricFamily(PREFIX + name, f"Pipeline counter {name!r}", labels=list(names)), names)
            family, names = families[name]
            values = dict(labels)
            family.add_metric([values.get(n, "") for n in names], value)
        yield from (family for family, _ in families.values())

    def _from_redis(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(PREFIX + "redis_up", "1 if this scrape could read the shared state in Redis")
        now = time.time()
        try:
            with self._redis().pipeline(transaction=False) as pipe:  # type: ignore[misc]
                counts = sessions_usable_count(pipe, now=now, ttl_seconds=settings.GATEWAY_SESSION_TTL_SECONDS)
                pipe.get(WORKER_HEARTBEAT_KEY)
                pipe.hgetall(TASK_DURATIONS_KEY)
                pipe.hgetall(REPLICA_HEALTH_KEY)
                *answers, beat, durations, health = pipe.execute()
                sessions = sum(answers[:counts])
        except (redis.RedisError, OSError) as exc:
            log.warning("metrics: Redis could not be read: %s", exc)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield GaugeMetricFamily(PREFIX + "active_sessions", "Legacy (session-based) downstream sessions used within "
                                "their idle lifetime, "
                                "across all instances (every instance reports the same number)", value=sessions)
        yield GaugeMetricFamily(PREFIX + "worker_heartbeat_age_seconds", "Seconds since a Celery worker last ran the "
                                "heartbeat task scheduled by beat (+Inf: never)", value=heartbeat_age(beat, now=now))
        yield GaugeMetricFamily(PREFIX + "replicas_down", "Backend replicas the gateway instances have marked down "
                                "and route nothing to (one that finds a replica down tells the others), across all "
                                "instances", value=len(replicas_down(health, now=now)))
        builds = HistogramMetricFamily(
            PREFIX + "index_build_duration_seconds", "Index builds in Celery workers by task (tool_index: a "
            "backend's tool_search entries; spec_compile: an OpenAPI spec's tools) and outcome (ok | error), "
            "across all workers", labels=["task", "outcome"])
        last = GaugeMetricFamily(PREFIX + "index_build_last_success_timestamp_seconds",
                                 "Unix time the last successful build of each task finished", labels=["task"])
        parsed = task_durations_parse(durations)
        for (task, outcome), (buckets, total) in sorted(parsed.histograms.items()):
            builds.add_metric([task, outcome], _bucket_pairs(TASK_BUCKETS, buckets), total)
        for task, at in sorted(parsed.last_success.items()):
            last.add_metric([task], at)
        yield builds
        yield last


def registry(sources: Callable[[], Iterable[Counters]], redis_client: Callable[[], Any] | None) -> CollectorRegistry:
    """A registry with the gateway's metrics and the process's own (CPU, memory, open files)."""
    found = CollectorRegistry(auto_describe=False)
    found.register(GatewayCollector(sources, redis_client))
    ProcessCollector(namespace=PREFIX.rstrip("_"), registry=found)
    PlatformCollector(registry=found)
    return found


class RequestMeter:
    """Times one request to the MCP endpoint for the transport: made when it arrives (it gives the
    pipeline a fresh `RequestNote`), `answered()` when the response head is ready, `done()` once
    it is sent (a stream's errors are noted by then)."""

    __slots__ = ("_http_method", "_note", "_started", "_seconds")

    def __init__(self, http_method: str) -> None:
        self._http_method = http_method
        self._started = time.perf_counter()
        self._seconds: float | None = None
        self._note = RequestNote()
        current_request.set(self._note)

    def answered(self) -> None:
        self._seconds = time.perf_counter() - self._started

    def done(self, counters: Counters, status: int) -> None:
        seconds = time.perf_counter() - self._started if self._seconds is None else self._seconds
        request_observe(counters, self._note, http_method=self._http_method, status=status, seconds=seconds)
