"""The pipeline's in-process metrics: histograms, label caps, the request note; and their export
covering every gateway of a process."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from apps.gateway.pipeline.metrics import (
    LATENCY_BUCKETS,
    OTHER,
    Counters,
    LabelCap,
    RequestNote,
    current_request,
    note_error,
    note_method,
)
from apps.gateway.prometheus import GatewayCollector, error_class, request_method, request_outcome


def test_a_histogram_counts_each_observation_in_the_first_bucket_that_holds_it() -> None:
    counters = Counters()
    for seconds in (0.0005, 0.001, 0.0011, 42.0, 61.0):
        counters.observe("calls", seconds, tool="add")
    [(name, labels, buckets)] = counters.histograms()
    assert (name, labels) == ("calls", (("tool", "add"),))
    assert len(buckets) == len(LATENCY_BUCKETS) + 2
    assert buckets[0] == 2 and buckets[1] == 1  # le=0.001 holds 0.001 itself
    assert buckets[LATENCY_BUCKETS.index(60.0)] == 1 and buckets[-2] == 1  # 61 s: only +Inf
    assert buckets[-1] == 0.0005 + 0.001 + 0.0011 + 42.0 + 61.0


def test_a_label_cap_is_shared_and_sends_the_rest_to_other() -> None:
    cap = LabelCap(2)
    one, two = Counters(caps={"tool": cap}), Counters(caps={"tool": cap})
    assert [one.bounded("tool", "a"), two.bounded("tool", "b"), one.bounded("tool", "c")] == ["a", "b", OTHER]
    assert two.bounded("tool", "a") == "a" and len(cap) == 2
    assert one.bounded("backend", "anything") == "anything"  # no cap on that label


def test_a_label_cap_per_group_keeps_each_groups_own_values() -> None:
    cap = LabelCap(5, per_group=2)
    counters = Counters(caps={"tool": cap})
    junk = [counters.bounded("tool", f"junk{i}", "1") for i in range(10)]
    assert junk == ["junk0", "junk1", *[OTHER] * 8]  # tenant 1 fills its own share only
    assert [counters.bounded("tool", name, "2") for name in ("add", "echo", "more")] == ["add", "echo", OTHER]
    assert counters.bounded("tool", "junk0", "3") == "junk0"  # a value another group brought costs nothing
    assert [counters.bounded("tool", name, "3") for name in ("x", "y")] == ["x", OTHER]  # 5 in all, at most
    assert len(cap) == 5


def test_the_note_belongs_to_the_task_that_set_it() -> None:
    async def request(method: str, code: int | None) -> RequestNote:
        note = RequestNote()
        current_request.set(note)
        await asyncio.sleep(0)
        note_method(method)
        note_error(code)
        note_error(-32603)  # the first error is the one answered
        return note

    async def both() -> list[RequestNote]:
        return await asyncio.gather(request("tools/call", -32005), request("ping", None))

    limited, pinged = asyncio.run(both())
    assert (limited.method, limited.error) == ("tools/call", -32005)
    assert (pinged.method, pinged.error) == ("ping", -32603)
    note_method("outside any request")  # no note: nothing to do, nothing raised


def test_request_labels() -> None:
    assert request_outcome(200, RequestNote("tools/call")) == "ok"
    assert request_outcome(200, RequestNote("tools/call", -32602)) == "invalid_params"
    assert request_outcome(401, RequestNote()) == "http_401"
    assert [error_class(c) for c in (-32005, -32042, 7)] == ["rate_limited", "server_error", "application_error"]
    assert request_method(RequestNote("tools/call"), "POST") == "tools/call"
    assert request_method(RequestNote("x/" * 50), "POST") == "other"  # clients choose methods: bounded
    # `_meta` keys of tool_search answers are no methods anyone sends.
    assert request_method(RequestNote("gateway/prerequisites"), "POST") == "other"
    assert request_method(RequestNote(), "GET") == "http:GET" and request_method(RequestNote(), "PATCH") == "http:other"


def test_the_export_adds_up_every_gateway_of_the_process() -> None:
    loops = [Counters(), Counters()]  # one gateway per event loop
    for counters in loops:
        counters.increment("rate_limited", scope="team")
        counters.observe("requests", 0.002, method="ping", outcome="ok")
    loops[1].increment("something_new", kind="x")
    registry = CollectorRegistry()
    registry.register(GatewayCollector(lambda: loops, None))
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(generate_latest(registry).decode()) for s in family.samples}
    assert samples[("mcp_gateway_rate_limit_refusals_total", (("scope", "team"),))] == 2
    assert samples[("mcp_gateway_request_duration_seconds_count", (("method", "ping"), ("outcome", "ok")))] == 2
    assert samples[("mcp_gateway_request_duration_seconds_bucket", (("le", "0.0025"), ("method", "ping"),
                                                                     ("outcome", "ok")))] == 2
    assert samples[("mcp_gateway_something_new_total", (("kind", "x"),))] == 1
    assert not any(name == "mcp_gateway_redis_up" for name, _ in samples)  # Redis left out


def test_label_sets_given_in_another_order_are_one_series() -> None:
    counters = Counters()
    counters.increment("cache", cache="session", result="hit")
    counters.increment("cache", result="hit", cache="session")
    counters.observe("calls", 0.5, tool="a", outcome="ok")
    counters.observe("calls", 0.5, outcome="ok", tool="a")
    assert counters.items() == [("cache", (("cache", "session"), ("result", "hit")), 2)]
    [(_, labels, buckets)] = counters.histograms()
    assert labels == (("outcome", "ok"), ("tool", "a")) and sum(buckets[:-1]) == 2 and buckets[-1] == 1.0
    assert counters.value("cache", result="hit") == 2
