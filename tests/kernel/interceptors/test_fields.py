"""The `fields` built-in: its JSONPath subset, rules applied to a call's arguments, to a tool's
structured result and to the JSON text blocks that mirror it (of every MCP result shape), deny
patterns that refuse or mask, and the input never mutated."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from apps.kernel.interceptors import InterceptorSpec, fields, interceptor_check
from apps.kernel.interceptors.base import PASS, Decision, Payload, Subject
from apps.kernel.interceptors.fields import PathError, Step, path_parse

MASK = "[REDACTED:field]"

# A CRM tool's customer lookup, as a server that mirrors structuredContent into a text block sends it.
CUSTOMER: dict[str, Any] = {
    "customer": {
        "id": "cus_Q81",
        "name": "Maria Oliveira",
        "ssn": "123-45-6789",
        "login": {"user": "moliveira", "password": "hunter2!", "mfa": {"password": "backup-code-7731"}},
    },
    "orders": [
        {"id": "ord_1", "total": 129.9, "card": {"last4": "4242", "cvv": "123"}},
        {"id": "ord_2", "total": 18.5, "card": {"last4": "0005", "cvv": "987"}},
    ],
    "notes": ["called on 2024-03-02", "prefers e-mail"],
    "x-internal score": 0.82,
}


def _inspector(*rules: tuple[str, str], deny: list[str] | None = None, deny_action: str = "refuse") -> Any:
    settings = {"rules": [{"path": p, "action": a} for p, a in rules], "deny": deny or [], "deny_action": deny_action}
    assert fields.settings_check(settings) == []
    return fields.build(settings)


def _tool_result(structured: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 7, "result": {
        "content": [{"type": "text", "text": orjson.dumps(structured).decode()}],
        "structuredContent": structured,
    }}


def _result(value: dict[str, Any], method: str = "tools/call") -> Subject:
    return Subject("result", method, "crm_lookup", Payload(value=value))


def _rewritten(decision: Decision) -> Any:
    assert decision.action == "rewrite", decision
    assert decision.payload is not None
    return decision.payload.value


# The path subset.

@pytest.mark.parametrize(("path", "steps"), [
    ("$.a.b", (Step("key", "a"), Step("key", "b"))),
    ("$.items[*].ssn", (Step("key", "items"), Step("all"), Step("key", "ssn"))),
    ("$.a[0]", (Step("key", "a"), Step("index", 0))),
    ("$.rows[12].id", (Step("key", "rows"), Step("index", 12), Step("key", "id"))),
    ("$..password", (Step("descend", "password"),)),
    ("$..['api key'].value", (Step("descend", "api key"), Step("key", "value"))),
    ("$['odd key']", (Step("key", "odd key"),)),
    ('$["it\'s"]', (Step("key", "it's"),)),
    ("$['say \\'hi\\'']", (Step("key", "say 'hi'"),)),
    ("$.x-api-key", (Step("key", "x-api-key"),)),
    ("$.*", (Step("all"),)),
    ("$.a.*.b", (Step("key", "a"), Step("all"), Step("key", "b"))),
])
def test_paths_parse(path: str, steps: tuple[Step, ...]) -> None:
    assert path_parse(path) == steps


@pytest.mark.parametrize(("path", "message"), [
    ("a.b", "a path starts with $"),
    ("$", "the path $ is the whole value"),
    ("$.", "'.' at character 2 must be followed by a key name"),
    ("$.a.", "'.' at character 4 must be followed by a key name"),
    ("$..", "'..' at character 2 must be followed by a key name or ['key']"),
    ("$.a[-1]", "negative indexes and slices are not supported"),
    ("$.a[0:2]", "'[' at character 4 must hold an index"),
    ("$['a", "the quoted key at character 2 is never closed with ']"),
    ("$['a'x", "the quoted key at character 2 must be closed with ']"),
    ("$.a b", "unexpected ' ' at character 4"),
    ("$.a.b c", "unexpected ' ' at character 6"),
])
def test_paths_outside_the_subset_are_refused_with_where_and_why(path: str, message: str) -> None:
    with pytest.raises(PathError) as raised:
        path_parse(path)
    assert message in str(raised.value)


# Settings.

@pytest.mark.parametrize(("settings", "field", "message"), [
    ({}, "settings", "settings must have rules or deny patterns"),
    ({"rules": [], "deny": []}, "settings", "settings must have rules or deny patterns"),
    ({"rules": "$.a"}, "settings.rules", "rules must be a list"),
    ({"rules": [{"path": "$.a"}]}, "settings.rules", "rule 1 must be"),
    ({"rules": [{"path": "$.a", "action": "drop", "why": "x"}]}, "settings.rules", "with nothing else"),
    ({"rules": [{"path": "$.a", "action": "drop"}, {"path": "$.b", "action": "hash"}]}, "settings.rules",
     "rule 2: action must be drop or mask"),
    ({"rules": [{"path": "$.a[x]", "action": "drop"}]}, "settings.rules", "rule 1: path '$.a[x]': '[' at character 4"),
    ({"rules": [{"path": "", "action": "drop"}]}, "settings.rules", "rule 1: path must be a JSONPath"),
    ({"rules": [{"path": "$." + "a" * 600, "action": "drop"}]}, "settings.rules", "at most 500 characters"),
    ({"rules": [{"path": "$.a", "action": "drop"}] * 101}, "settings.rules", "at most 100 rules"),
    ({"deny": "secret"}, "settings.deny", "deny must be a list"),
    ({"deny": ["ok", ""]}, "settings.deny", "deny pattern 2 must be a non-empty string"),
    ({"deny": ["ok", "(unclosed"]}, "settings.deny", "deny pattern 2 is not a valid regular expression: missing )"),
    ({"deny": ["a*"]}, "settings.deny", "deny pattern 1 matches the empty string"),
    ({"deny": ["x|"]}, "settings.deny", "deny pattern 1 matches the empty string"),
    ({"deny": ["a" * 1001]}, "settings.deny", "deny pattern 1 is longer than 1000 characters"),
    ({"deny": ["a"] * 101}, "settings.deny", "at most 100 deny patterns"),
    ({"deny": ["a"], "deny_action": "drop"}, "settings.deny_action", "deny_action must be refuse or mask"),
    ({"deny": ["a"], "action": "drop"}, "settings.action", "unknown setting 'action'"),
])
def test_settings_problems(settings: dict[str, Any], field: str, message: str) -> None:
    problems = fields.settings_check(settings)
    assert problems, settings
    assert problems[0].field == field
    assert message in problems[0].message


def test_good_settings_pass_the_interceptor_check() -> None:
    spec = InterceptorSpec("strip-pii", "fields", settings={
        "rules": [{"path": "$..ssn", "action": "drop"}, {"path": "$.orders[*].card.cvv", "action": "mask"}],
        "deny": [r"(?i)internal use only", r"\bACME-\d{6}\b"], "deny_action": "mask"})
    assert interceptor_check(spec) == []
    assert fields.PHASES == ("request", "result")
    assert dict(fields.DEFAULTS) == {"rules": [], "deny": [], "deny_action": "refuse"}


# Rules on a tool's result.

def test_nested_paths_drop_and_mask_in_structured_content_and_its_text_mirror() -> None:
    inspector = _inspector(("$.customer.ssn", "drop"), ("$.customer.login.password", "mask"))
    value = _tool_result(CUSTOMER)
    decision = inspector.inspect(_result(value))
    out = _rewritten(decision)
    assert decision.findings == ("field:$.customer.ssn", "field:$.customer.login.password")
    structured = out["result"]["structuredContent"]
    assert "ssn" not in structured["customer"]
    assert structured["customer"]["login"]["password"] == MASK
    assert structured["customer"]["login"]["mfa"] == {"password": "backup-code-7731"}  # not this path
    assert structured["customer"]["name"] == "Maria Oliveira"
    mirror = out["result"]["content"][0]["text"]
    assert orjson.loads(mirror) == structured
    assert mirror == orjson.dumps(structured).decode()  # compact
    assert "123-45-6789" not in orjson.dumps(out).decode() and "hunter2!" not in orjson.dumps(out).decode()


def test_array_wildcard_and_index() -> None:
    inspector = _inspector(("$.orders[*].card.cvv", "drop"), ("$.notes[0]", "drop"))
    decision = inspector.inspect(_result(_tool_result(CUSTOMER)))
    structured = _rewritten(decision)["result"]["structuredContent"]
    assert [order["card"] for order in structured["orders"]] == [{"last4": "4242"}, {"last4": "0005"}]
    assert structured["notes"] == ["prefers e-mail"]  # the element removed, the next moved up


def test_masking_array_elements_and_every_value() -> None:
    decision = _inspector(("$.orders[1]", "mask"), ("$.customer.login.*", "mask")).inspect(
        _result(_tool_result(CUSTOMER)))
    structured = _rewritten(decision)["result"]["structuredContent"]
    assert structured["orders"][0]["id"] == "ord_1"
    assert structured["orders"][1] == MASK
    assert structured["customer"]["login"] == {"user": MASK, "password": MASK, "mfa": MASK}


def test_recursive_descent_reaches_every_depth() -> None:
    decision = _inspector(("$..password", "mask"), ("$..cvv", "drop")).inspect(_result(_tool_result(CUSTOMER)))
    out = _rewritten(decision)
    text = orjson.dumps(out).decode()
    for secret in ("hunter2!", "backup-code-7731", '"cvv"', "987"):
        assert secret not in text
    login = out["result"]["structuredContent"]["customer"]["login"]
    assert login["password"] == MASK
    assert login["mfa"] == {"password": MASK}


def test_recursive_descent_then_a_path_inside_each_match() -> None:
    value = _tool_result({"a": {"card": {"cvv": "1", "last4": "1111"}},
                          "b": [{"card": {"cvv": "2", "last4": "2222"}}, {"card": "none"}]})
    structured = _rewritten(_inspector(("$..card.cvv", "drop")).inspect(_result(value)))["result"]["structuredContent"]
    assert structured == {"a": {"card": {"last4": "1111"}}, "b": [{"card": {"last4": "2222"}}, {"card": "none"}]}


def test_quoted_keys() -> None:
    decision = _inspector(("$['x-internal score']", "drop")).inspect(_result(_tool_result(CUSTOMER)))
    assert "x-internal score" not in _rewritten(decision)["result"]["structuredContent"]


def test_a_path_that_names_nothing_passes() -> None:
    inspector = _inspector(("$.customer.passport", "drop"), ("$.orders[5]", "mask"), ("$.notes.id", "drop"),
                           ("$..iban", "mask"))
    assert inspector.inspect(_result(_tool_result(CUSTOMER))) is PASS


def test_text_blocks_that_are_not_json_are_left_alone() -> None:
    value = {"jsonrpc": "2.0", "id": 1, "result": {"content": [
        {"type": "text", "text": "Customer Maria Oliveira, ssn on file."},
        {"type": "text", "text": "{not json, ssn: 1}"},
        {"type": "text", "text": '"ssn"'},
        {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
    ]}}
    assert _inspector(("$..ssn", "drop")).inspect(_result(value)) is PASS


def test_a_json_text_block_alone_is_rewritten_and_others_kept_as_sent() -> None:
    pretty = orjson.dumps({"user": "moliveira", "password": "hunter2!"}, option=orjson.OPT_INDENT_2).decode()
    untouched = orjson.dumps({"user": "x"}, option=orjson.OPT_INDENT_2).decode()
    value = {"jsonrpc": "2.0", "id": 1, "result": {"content": [
        {"type": "text", "text": "Here is the record:"},
        {"type": "text", "text": "\n  " + pretty},
        {"type": "text", "text": untouched},
    ]}}
    out = _rewritten(_inspector(("$.password", "drop")).inspect(_result(value)))
    blocks = out["result"]["content"]
    assert blocks[0] is value["result"]["content"][0]
    assert blocks[1]["text"] == '{"user":"moliveira"}'
    assert blocks[2]["text"] == untouched  # pretty as sent: nothing to change in it


def test_an_array_text_block() -> None:
    value = {"jsonrpc": "2.0", "id": 1, "result": {"content": [
        {"type": "text", "text": '[{"email":"a@example.com","plan":"pro"},{"email":"b@example.com","plan":"free"}]'}]}}
    out = _rewritten(_inspector(("$[*].email", "mask")).inspect(_result(value)))
    assert orjson.loads(out["result"]["content"][0]["text"]) == [{"email": MASK, "plan": "pro"},
                                                                  {"email": MASK, "plan": "free"}]


def test_resource_contents_and_embedded_resources() -> None:
    config = orjson.dumps({"db": {"host": "db.internal", "password": "s3cr3t-pw"}}).decode()
    read = {"jsonrpc": "2.0", "id": 2, "result": {"contents": [
        {"uri": "file:///srv/app/config.json", "mimeType": "application/json", "text": config},
        {"uri": "file:///srv/app/logo.png", "blob": "iVBORw0KGgo="}]}}
    out = _rewritten(_inspector(("$.db.password", "mask")).inspect(_result(read, "resources/read")))
    assert orjson.loads(out["result"]["contents"][0]["text"])["db"] == {"host": "db.internal", "password": MASK}
    assert out["result"]["contents"][0]["uri"] == "file:///srv/app/config.json"
    assert out["result"]["contents"][1] == read["result"]["contents"][1]

    embedded = {"jsonrpc": "2.0", "id": 3, "result": {"content": [
        {"type": "resource", "resource": {"uri": "file:///srv/app/config.json", "text": config}}]}}
    out = _rewritten(_inspector(("$..password", "drop")).inspect(_result(embedded)))
    assert "s3cr3t-pw" not in out["result"]["content"][0]["resource"]["text"]


def test_prompt_messages() -> None:
    record = orjson.dumps({"patient": "J. Doe", "ssn": "078-05-1120", "allergies": ["penicillin"]}).decode()
    got = {"jsonrpc": "2.0", "id": 4, "result": {"description": "triage", "messages": [
        {"role": "user", "content": {"type": "text", "text": "Summarize this record:"}},
        {"role": "user", "content": {"type": "text", "text": record}}]}}
    out = _rewritten(_inspector(("$.ssn", "drop")).inspect(_result(got, "prompts/get")))
    assert orjson.loads(out["result"]["messages"][1]["content"]["text"]) == {"patient": "J. Doe",
                                                                           "allergies": ["penicillin"]}
    assert out["result"]["messages"][1]["role"] == "user"
    assert out["result"]["description"] == "triage"


def test_an_error_response_has_no_fields_to_apply_rules_to() -> None:
    error = {"jsonrpc": "2.0", "id": 5, "error": {"code": -32000, "message": "failed", "data": {"ssn": "1"}}}
    assert _inspector(("$.ssn", "drop"), ("$..ssn", "drop")).inspect(_result(error)) is PASS


def test_the_input_is_never_mutated() -> None:
    value = _tool_result(CUSTOMER)
    before = copy.deepcopy(value)
    inspector = _inspector(("$..password", "mask"), ("$.orders[*].card", "drop"), ("$.notes[1]", "drop"),
                           ("$.customer.*", "mask"))
    out = _rewritten(inspector.inspect(_result(value)))
    assert value == before
    assert CUSTOMER == before["result"]["structuredContent"]
    assert out != before
    # And what did not change is shared, not copied: a rewrite costs what it changes.
    unchanged = _rewritten(_inspector(("$.customer.ssn", "drop")).inspect(_result(value)))
    assert unchanged["result"]["structuredContent"]["orders"] is value["result"]["structuredContent"]["orders"]


# Rules on a call's request.

def test_request_rules_apply_to_the_arguments() -> None:
    params = {"name": "create_ticket", "arguments": {
        "title": "Refund", "reporter": {"email": "maria@example.com", "phone": "+351 912 345 678"},
        "attachments": [{"name": "id.jpg", "data": "…"}]}}
    before = copy.deepcopy(params)
    inspector = _inspector(("$.reporter.phone", "drop"), ("$.attachments[*].data", "mask"))
    decision = inspector.inspect(Subject("request", "tools/call", "create_ticket", Payload(value=params)))
    out = _rewritten(decision)
    assert out == {"name": "create_ticket", "arguments": {
        "title": "Refund", "reporter": {"email": "maria@example.com"},
        "attachments": [{"name": "id.jpg", "data": MASK}]}}
    assert params == before
    assert decision.findings == ("field:$.reporter.phone", "field:$.attachments[*].data")


def test_request_paths_are_relative_to_the_arguments_not_the_params() -> None:
    params = {"name": "summarize", "arguments": {"name": "Q3 report", "text": "…"}}
    inspector = _inspector(("$.name", "drop"))
    out = _rewritten(inspector.inspect(Subject("request", "prompts/get", "summarize", Payload(value=params))))
    assert out == {"name": "summarize", "arguments": {"text": "…"}}


def test_a_resource_read_request_has_no_arguments() -> None:
    params = {"uri": "file:///etc/hosts"}
    assert _inspector(("$.uri", "drop")).inspect(Subject("request", "resources/read", "file:///etc/hosts",
                                                         Payload(value=params))) is PASS


# Deny patterns.

INTERNAL = {"jsonrpc": "2.0", "id": 9, "result": {"content": [{"type": "text", "text": (
    "Q3 plan (INTERNAL USE ONLY): migrate billing to ledger v2; contact ops@acme.example, ticket ACME-004512.")}]}}


def test_a_deny_match_refuses_naming_the_pattern_by_number_never_the_text() -> None:
    inspector = _inspector(deny=[r"\bpayroll\b", r"(?i)internal use only", r"ACME-\d{6}"])
    decision = inspector.inspect(_result(INTERNAL))
    assert decision.action == "refuse"
    assert decision.reason == "deny patterns 2, 3 matched the result"
    assert decision.findings == ("deny:2", "deny:3")
    assert "INTERNAL" not in decision.reason and "004512" not in decision.reason


def test_a_deny_match_on_the_request() -> None:
    params = {"name": "run_sql", "arguments": {"query": "DROP TABLE customers;"}}
    decision = _inspector(deny=[r"(?i)\bdrop\s+table\b"]).inspect(
        Subject("request", "tools/call", "run_sql", Payload(value=params)))
    assert (decision.action, decision.reason) == ("refuse", "deny pattern 1 matched the request")


def test_deny_mask_replaces_each_match() -> None:
    decision = _inspector(deny=[r"(?i)internal use only", r"ACME-\d{6}"], deny_action="mask").inspect(
        _result(INTERNAL))
    text = _rewritten(decision)["result"]["content"][0]["text"]
    assert text == ("Q3 plan ([REDACTED:deny]): migrate billing to ledger v2; contact ops@acme.example, "
                    "ticket [REDACTED:deny].")
    assert decision.findings == ("deny:1", "deny:2")


def test_deny_mask_refuses_a_match_that_spans_json_syntax() -> None:
    value = {"jsonrpc": "2.0", "id": 1, "result": {"structuredContent": {"tier": "internal", "x": 1}, "content": []}}
    decision = _inspector(deny=[r'"tier":"internal"'], deny_action="mask").inspect(_result(value))
    assert decision.action == "refuse"
    assert "cannot be masked" in decision.reason


def test_deny_patterns_see_what_the_rules_leave() -> None:
    # The field that carries the denied text is dropped first: nothing is left to deny.
    value = _tool_result({"summary": "ok", "debug": "INTERNAL USE ONLY stack trace"})
    decision = _inspector(("$.debug", "drop"), deny=[r"(?i)internal use only"]).inspect(_result(value))
    assert _rewritten(decision)["result"]["structuredContent"] == {"summary": "ok"}
    assert decision.findings == ("field:$.debug",)


def test_deny_patterns_that_do_not_match_pass() -> None:
    assert _inspector(deny=[r"\bpayroll\b", r"(?i)salary"]).inspect(_result(INTERNAL)) is PASS


def test_deny_patterns_see_the_json_text_with_its_escapes() -> None:
    value = {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": 'say "hi"\nbye'}]}}
    assert _inspector(deny=[r'say \\"hi\\"\\nbye']).inspect(_result(value)).action == "refuse"
    assert _inspector(deny=[r'say "hi"']).inspect(_result(value)) is PASS


def test_a_deny_pattern_with_a_long_counted_repeat_is_refused() -> None:
    [problem] = fields.settings_check({"deny": ["ok.{0,1000}", r"secret.{0,2000}key", r"literal\{5000}"]})
    assert problem.message == ("deny pattern 2 repeats something more than 1000 times ({n,m}); "
                               "use + or * instead")


def test_a_deny_pattern_sees_escaped_characters_as_the_characters_they_are() -> None:
    inspector = fields.build({**fields.DEFAULTS, "deny": [r"internal\.corp"]})
    text = '{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"see internal\\u002ecorp"}]}}'
    decision = inspector.inspect(Subject("result", "tools/call", "t", Payload(text=text)))
    assert decision.action == "refuse" and decision.findings == ("deny:1",)


@pytest.mark.parametrize("pattern", [r"(x+x+)+y", r"(a+)+", r"(?:\w{2,})*z"])
def test_a_deny_pattern_that_can_backtrack_exponentially_is_refused(pattern: str) -> None:
    [problem] = fields.settings_check({"deny": [pattern]})
    assert "repeats a group that itself repeats" in problem.message


@pytest.mark.parametrize("pattern", [r"(abc)+", r"secret-(\d+)", r"(a|b)+c", r"\(x+\)+"])
def test_a_deny_pattern_with_groups_that_do_not_nest_repeats_is_taken(pattern: str) -> None:
    assert fields.settings_check({"deny": [pattern]}) == []
