"""The `size` built-in: results over the cap refused, or truncated to at most the cap in every MCP
result shape (a tool's content, a resource's contents, a prompt's messages, an error), cut between
characters and escapes, with a visible marker; non-text blocks dropped and counted; a structured
result never cut."""

from __future__ import annotations

import copy
import random
import re
from typing import Any

import orjson
import pytest

from apps.kernel.interceptors import InterceptorSpec, interceptor_check, size
from apps.kernel.interceptors.base import PASS, Decision, Payload, Subject

MARKER = re.compile(r"\n\[… truncated by the gateway: showing ([\d,]+) of ([\d,]+) bytes\]$")

# A log-search tool's answer: many lines, some multi-byte (names, currency, emoji).
LOG_LINES = [
    f"2024-05-0{1 + i % 9}T10:{i % 60:02d}:00Z INFO payment {1000 + i} settled: {i * 3.5:.2f} € for "
    f"{['Zoë Brontë', 'José Núñez', '王小明', 'Ølaf Åberg'][i % 4]} {'✅' if i % 3 else '🧾'}"
    for i in range(400)
]
LOG_TEXT = "\n".join(LOG_LINES)


def _inspector(max_bytes: int, action: str = "truncate") -> Any:
    settings = {"max_bytes": max_bytes, "action": action}
    assert size.settings_check(settings) == []
    return size.build(settings)


def _subject(value: Any, method: str = "tools/call", *, pretty: bool = False) -> Subject:
    text = orjson.dumps(value, option=orjson.OPT_INDENT_2 if pretty else 0).decode()
    return Subject("result", method, "search_logs", Payload(text=text))


def _bytes(value: Any) -> int:
    return len(orjson.dumps(value))


def _rewritten(decision: Decision, cap: int) -> Any:
    assert decision.action == "rewrite", decision
    assert decision.payload is not None
    assert len(decision.payload.text.encode()) <= cap
    assert orjson.loads(decision.payload.text) == decision.payload.value
    return decision.payload.value


def _tool(*blocks: dict[str, Any], **result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 31, "result": {"content": list(blocks), **result}}


def _marker_numbers(text: str) -> tuple[int, int]:
    found = MARKER.search(text)
    assert found is not None, text[-120:]
    return int(found.group(1).replace(",", "")), int(found.group(2).replace(",", ""))


# Settings.

@pytest.mark.parametrize(("settings", "field", "message"), [
    ({"max_bytes": 255}, "settings.max_bytes", "max_bytes must be a whole number from 256 to 50,000,000"),
    ({"max_bytes": 50_000_001}, "settings.max_bytes", "max_bytes must be a whole number"),
    ({"max_bytes": 1000.5}, "settings.max_bytes", "max_bytes must be a whole number"),
    ({"max_bytes": True}, "settings.max_bytes", "max_bytes must be a whole number"),
    ({"max_bytes": "100kb"}, "settings.max_bytes", "max_bytes must be a whole number"),
    ({"action": "drop"}, "settings.action", "action must be truncate or refuse"),
    ({"max": 1000}, "settings.max", "unknown setting 'max'"),
    ([], "settings", "settings must be an object"),
])
def test_settings_problems(settings: Any, field: str, message: str) -> None:
    problems = size.settings_check(settings)
    assert problems and problems[0].field == field and message in problems[0].message


def test_defaults_and_a_good_spec() -> None:
    assert dict(size.DEFAULTS) == {"max_bytes": 100_000, "action": "truncate"}
    assert size.PHASES == ("result",)
    assert size.settings_check({}) == []
    assert interceptor_check(InterceptorSpec("cap", "size", phases=("result",), settings={"max_bytes": 256})) == []
    assert interceptor_check(InterceptorSpec("cap", "size", phases=("request",))) != []


# Under the cap.

def test_a_result_at_most_the_cap_passes() -> None:
    value = _tool({"type": "text", "text": "ünïcödé " * 40})
    exact = _bytes(value)
    assert _inspector(exact).inspect(_subject(value)) is PASS
    assert _inspector(exact - 1).inspect(_subject(value)).action == "rewrite"


def test_bytes_are_counted_in_utf8_not_characters() -> None:
    value = _tool({"type": "text", "text": "😀" * 200})  # 200 characters, 800 bytes
    assert len(orjson.dumps(value).decode()) < 700 < _bytes(value)
    assert _inspector(700).inspect(_subject(value)).action == "rewrite"


def test_the_default_cap_passes_a_typical_result() -> None:
    assert size.build(size.DEFAULTS).inspect(_subject(_tool({"type": "text", "text": LOG_LINES[0]}))) is PASS


# Refuse.

def test_refuse_says_how_large_and_the_cap() -> None:
    value = _tool({"type": "text", "text": LOG_TEXT})
    decision = _inspector(10_000, "refuse").inspect(_subject(value))
    assert decision.action == "refuse"
    assert decision.reason == f"the result is {_bytes(value):,} bytes, over this host's cap of 10,000"


# Truncate: a tool's content.

def test_one_text_block_is_cut_to_fit_with_a_marker() -> None:
    value = _tool({"type": "text", "text": LOG_TEXT}, isError=False)
    before = copy.deepcopy(value)
    decision = _inspector(4096).inspect(_subject(value))
    out = _rewritten(decision, 4096)
    assert decision.findings == ("truncated",)
    assert value == before  # not mutated
    text = out["result"]["content"][0]["text"]
    shown, total = _marker_numbers(text)
    kept = MARKER.sub("", text)
    assert LOG_TEXT.startswith(kept)
    assert (shown, total) == (len(kept.encode()), len(LOG_TEXT.encode()))
    assert out["result"]["isError"] is False
    assert out["id"] == 31 and out["jsonrpc"] == "2.0"
    assert 4096 - 200 < len(decision.payload.text.encode())  # type: ignore[union-attr] # it fills the cap, not half


@pytest.mark.parametrize("char", ["é", "€", "😀", "王"])
def test_the_cut_is_between_characters(char: str) -> None:
    text = ("x" + char) * 3000
    for cap in range(900, 940):  # every offset within a character falls at the cut once
        out = _rewritten(_inspector(cap).inspect(_subject(_tool({"type": "text", "text": text}))), cap)
        kept = MARKER.sub("", out["result"]["content"][0]["text"])
        assert text.startswith(kept) and kept


def test_the_cut_is_between_escapes() -> None:
    # Quotes, backslashes, newlines and control characters take 2 to 6 bytes each in JSON.
    text = 'say "hi"\\ \n\t\x01\x1f done; ' * 300
    for cap in range(600, 660):
        out = _rewritten(_inspector(cap).inspect(_subject(_tool({"type": "text", "text": text}))), cap)
        assert text.startswith(MARKER.sub("", out["result"]["content"][0]["text"]))


def test_the_cap_holds_for_random_results_of_every_shape() -> None:
    rng = random.Random(20240531)
    alphabet = ["a", "b", " ", "é", "€", "😀", "\n", '"', "\\", "\x01", "\u2028"]
    for _ in range(300):
        cap = rng.choice([400, 700, 1500, 5000])
        shape = rng.choice(["content", "contents", "messages"])
        blocks: list[Any] = []
        for n in range(rng.randint(1, 6)):
            text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 3000)))
            data = "QUJD" * rng.randint(5, 800)
            is_text = rng.random() < 0.6
            if shape == "content":
                blocks.append({"type": "text", "text": text} if is_text else
                              {"type": "image", "data": data, "mimeType": "image/png"})
            elif shape == "contents":
                blocks.append({"uri": f"file:///srv/{n}.txt", "mimeType": "text/plain", "text": text} if is_text else
                              {"uri": f"file:///srv/{n}.bin", "blob": data})
            else:
                blocks.append({"role": rng.choice(["user", "assistant"]), "content":
                               {"type": "text", "text": text} if is_text else
                               {"type": "image", "data": data, "mimeType": "image/png"}})
        value = {"jsonrpc": "2.0", "id": 1, "result": {shape: blocks}}
        decision = _inspector(cap).inspect(_subject(value))
        if _bytes(value) <= cap:
            assert decision is PASS
        else:
            assert decision.action in ("rewrite", "refuse")
            if decision.action == "rewrite":
                _rewritten(decision, cap)
            else:
                assert cap == 400  # only a cap this small leaves no room for the markers


def test_blocks_are_kept_in_order_while_they_fit_and_the_rest_dropped() -> None:
    first, second, third = "Found 3 matching files.", "A" * 3000, "tail of the listing"
    value = _tool({"type": "text", "text": first}, {"type": "text", "text": second}, {"type": "text", "text": third})
    out = _rewritten(_inspector(1024).inspect(_subject(value)), 1024)
    blocks = out["result"]["content"]
    assert len(blocks) == 2
    assert blocks[0] == {"type": "text", "text": first}
    shown, total = _marker_numbers(blocks[1]["text"])
    assert total == len(first) + len(second) + len(third)
    assert shown == len(first) + len(MARKER.sub("", blocks[1]["text"]))


def test_the_marker_goes_on_the_last_text_kept_when_the_next_does_not_fit_at_all() -> None:
    value = _tool({"type": "text", "text": "A" * 700}, {"type": "text", "text": "B" * 2000})
    cap = _bytes(_tool({"type": "text", "text": "A" * 700})) + 20
    out = _rewritten(_inspector(cap).inspect(_subject(value)), cap)
    [only] = out["result"]["content"]
    assert re.fullmatch(r"A+", MARKER.sub("", only["text"]))
    assert _marker_numbers(only["text"]) == (len(MARKER.sub("", only["text"])), 2700)


def test_non_text_blocks_past_the_budget_are_dropped_and_counted() -> None:
    screenshot = {"type": "image", "data": "iVBORw0KGgo" * 2000, "mimeType": "image/png"}
    icon = {"type": "image", "data": "R0lGODlhAQABAAAAACw=", "mimeType": "image/gif"}
    audio = {"type": "audio", "data": "UklGRiQAAABXQVZF" * 500, "mimeType": "audio/wav"}
    page = {"type": "resource", "resource": {"uri": "https://example.com/", "mimeType": "text/html",
                                             "text": "<html>" + "x" * 5000 + "</html>"}}
    value = _tool({"type": "text", "text": "Screenshot of https://example.com taken."}, icon, screenshot, audio, page,
                  {"type": "text", "text": "Page title: Example Domain"})
    out = _rewritten(_inspector(2048).inspect(_subject(value)), 2048)
    blocks = out["result"]["content"]
    assert blocks[0]["text"] == "Screenshot of https://example.com taken."
    assert blocks[1] == icon  # it fits: kept, in its place
    assert blocks[2] == {"type": "text", "text": "Page title: Example Domain"}  # a later text that fits is kept
    assert blocks[3] == {"type": "text", "text": "[… 3 non-text blocks dropped by the gateway: over this host's "
                                                 "size cap]"}
    assert len(blocks) == 4
    assert not any(MARKER.search(b.get("text", "")) for b in blocks)  # all the text is there: no text marker


def test_only_non_text_blocks() -> None:
    value = _tool(*[{"type": "image", "data": "A" * 5000, "mimeType": "image/png"}] * 2)
    out = _rewritten(_inspector(1000).inspect(_subject(value)), 1000)
    assert out["result"]["content"] == [{"type": "text", "text": "[… 2 non-text blocks dropped by the gateway: over "
                                                                  "this host's size cap]"}]


# Truncate: a resource's contents, a prompt's messages.

def test_resource_contents() -> None:
    csv = "id,name,city\n" + "\n".join(f"{i},Cliente {i},São Paulo" for i in range(2000))
    value = {"jsonrpc": "2.0", "id": 2, "result": {"contents": [
        {"uri": "file:///exports/customers.csv", "mimeType": "text/csv", "text": csv},
        {"uri": "file:///exports/customers.xlsx", "blob": "UEsDBBQ" * 3000}]}}
    out = _rewritten(_inspector(3000).inspect(_subject(value, "resources/read")), 3000)
    contents = out["result"]["contents"]
    assert contents[0]["uri"] == "file:///exports/customers.csv" and contents[0]["mimeType"] == "text/csv"
    assert csv.startswith(MARKER.sub("", contents[0]["text"]))
    assert _marker_numbers(contents[0]["text"])[1] == len(csv.encode())
    assert contents[1] == {"uri": "file:///exports/customers.xlsx", "mimeType": "text/plain",
                           "text": "[… 1 non-text block dropped by the gateway: over this host's size cap]"}


def test_prompt_messages() -> None:
    diff = "diff --git a/app.py b/app.py\n" + "+    print('olá mundo')\n" * 1000
    value = {"jsonrpc": "2.0", "id": 3, "result": {"description": "code review", "messages": [
        {"role": "user", "content": {"type": "text", "text": "Review this change:"}},
        {"role": "user", "content": {"type": "text", "text": diff}},
        {"role": "assistant", "content": {"type": "image", "data": "iVBOR" * 2000, "mimeType": "image/png"}}]}}
    out = _rewritten(_inspector(2500).inspect(_subject(value, "prompts/get")), 2500)
    messages = out["result"]["messages"]
    assert messages[0] == value["result"]["messages"][0]
    assert messages[1]["role"] == "user" and diff.startswith(MARKER.sub("", messages[1]["content"]["text"]))
    assert messages[2] == {"role": "assistant", "content": {
        "type": "text", "text": "[… 1 non-text block dropped by the gateway: over this host's size cap]"}}
    assert out["result"]["description"] == "code review"


# A structured result.

def test_structured_content_is_kept_whole_and_its_text_mirror_cut() -> None:
    rows = [{"sku": f"SKU-{i:05d}", "qty": i % 17} for i in range(60)]
    structured = {"rows": rows}
    value = _tool({"type": "text", "text": orjson.dumps(structured, option=orjson.OPT_INDENT_2).decode()},
                  structuredContent=structured)
    cap = _bytes(structured) + 600
    out = _rewritten(_inspector(cap).inspect(_subject(value)), cap)
    assert out["result"]["structuredContent"] == structured
    assert MARKER.search(out["result"]["content"][0]["text"])


def test_structured_content_alone_over_the_cap_refuses() -> None:
    structured = {"rows": [{"sku": f"SKU-{i:05d}", "qty": i} for i in range(500)]}
    value = _tool({"type": "text", "text": "500 rows"}, structuredContent=structured)
    decision = _inspector(5000).inspect(_subject(value))
    assert decision.action == "refuse"
    assert decision.reason == (f"the result is {_bytes(value):,} bytes, over this host's cap of 5,000, and its "
                               f"structuredContent alone is {_bytes(structured):,} bytes: it cannot be cut (a part "
                               "would no longer match the tool's output schema)")


def test_a_result_whose_size_is_not_in_its_blocks_refuses() -> None:
    value = _tool({"type": "text", "text": "ok"}, _meta={"trace": "t" * 5000})
    decision = _inspector(1000).inspect(_subject(value))
    assert decision.action == "refuse"
    assert decision.reason.endswith("and what is over is not its text: it cannot be cut to fit")


# An error response, and formatting.

def test_an_error_over_the_cap_has_its_message_cut_and_data_dropped() -> None:
    message = "upstream said: " + "Traceback (most recent call last): …\n" * 400
    value = {"jsonrpc": "2.0", "id": 4, "error": {"code": -32603, "message": message, "data": {"log": "x" * 9000}}}
    before = copy.deepcopy(value)
    out = _rewritten(_inspector(1200).inspect(_subject(value)), 1200)
    error = out["error"]
    assert error["code"] == -32603 and "data" not in error
    assert message.startswith(MARKER.sub("", error["message"]))
    assert _marker_numbers(error["message"])[1] == len(message.encode())
    assert value == before


def test_an_error_over_only_by_its_data_keeps_its_message() -> None:
    value = {"jsonrpc": "2.0", "id": 4, "error": {"code": -32000, "message": "Rate limited", "data": "x" * 5000}}
    out = _rewritten(_inspector(1000).inspect(_subject(value)), 1000)
    assert out["error"] == {"code": -32000, "message": "Rate limited"}


def test_a_result_over_the_cap_only_by_its_whitespace_is_made_compact() -> None:
    value = _tool({"type": "text", "text": "short"}, structuredContent={"a": list(range(100))})
    subject = _subject(value, pretty=True)
    cap = _bytes(value) + 10
    assert len(subject.payload.text.encode()) > cap
    decision = _inspector(cap).inspect(subject)
    assert _rewritten(decision, cap) == value
    assert decision.findings == ("compacted",)
