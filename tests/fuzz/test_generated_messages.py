"""What mcp-fuzzer 0.7.0 cannot reach, fuzzed with Hypothesis: 2026-07-28 stateless requests
(its client always opens a 2025-11-25 session), the legacy HTTP+SSE transport (it has no
`GET /sse` handshake), and bodies that are not JSON at all (it always sends valid JSON).

Messages are generated, not hand-picked: any JSON value where the protocol expects an object, ids
and methods of every type, names of real and unknown tools, hostile `_meta`, headers that disagree
with the body. Derandomized, so every run sends the same ones. The answers go through the same
recording proxy and are judged by the same rules as the mcp-fuzzer run (tests/fuzz/judge.py): any
5xx, JSON-RPC -32603, leaked exception text, a gateway that died or logged a traceback fails."""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.conftest import RESULTS, Target
from tests.fuzz.judge import exchange_problems, log_problems, read_exchanges
from tests.processes import stop

pytestmark = pytest.mark.slow

EXAMPLES = 150
FUZZ = settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
                suppress_health_check=list(HealthCheck))
MODERN = "2026-07-28"
MODERN_META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {},
               "io.modelcontextprotocol/clientInfo": {"name": "fuzz", "version": "1"}}
#: Real names on the fuzzed host and near misses; not the tools that wait as long as they are told
#: (demo-countdown, svc-waitFor), whose only answer is the backend timeout.
TOOLS = ("tool_search", "demo-add", "demo-echo", "demo-utc_now", "svc-getPet", "svc-echo", "add", "demo-", "-", "")
METHODS = ("initialize", "ping", "tools/list", "tools/call", "resources/list", "resources/read",
           "resources/templates/list", "prompts/list", "prompts/get", "completion/complete", "logging/setLevel",
           "subscriptions/listen", "server/discover", "notifications/initialized", "notifications/cancelled",
           "notifications/progress", "sampling/createMessage")

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**63, max_value=2**64) | st.floats(allow_nan=False)
    | st.text(max_size=40),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=16,
)
ids = st.none() | st.integers() | st.text(max_size=12) | st.floats(allow_nan=False) | json_values
methods = st.sampled_from(METHODS) | st.text(max_size=30) | json_values
#: Hostile `_meta` entries, as an object.
meta_entries = st.fixed_dictionaries({}, optional={
    "io.modelcontextprotocol/protocolVersion": st.sampled_from([MODERN, "2025-11-25", "1999-01-01"]) | json_values,
    "io.modelcontextprotocol/clientCapabilities": json_values,
    "io.modelcontextprotocol/clientInfo": json_values,
    "traceparent": st.text(max_size=60) | st.just("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
    "progressToken": json_values,
})
metas = st.just(MODERN_META) | json_values | meta_entries


def _params(meta: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Params a method may take, each value well typed or hostile, with `_meta` from `meta`."""
    return st.fixed_dictionaries({"_meta": meta}, optional={
        "name": st.sampled_from(TOOLS) | json_values,
        "arguments": st.dictionaries(st.sampled_from(["a", "b", "query", "text", "petId", "limit", "x"]), json_values,
                                     max_size=4) | json_values,
        "uri": st.text(max_size=40) | json_values,
        "cursor": st.text(max_size=40) | json_values,
        "level": st.sampled_from(["debug", "info", "emergency"]) | json_values,
        "notifications": json_values,
        "requestId": ids,
        "ref": json_values,
        "argument": json_values,
    })


#: Envelopes that pass the JSON-RPC checks, so what they carry reaches routing, policy and backends.
requests = st.fixed_dictionaries({
    "jsonrpc": st.just("2.0"), "method": st.sampled_from(METHODS),
    "id": st.integers(min_value=0, max_value=2**53) | st.text(min_size=1, max_size=8),
})
#: Anything at all shaped like an object: wrong versions, ids and methods of every type.
malformed = st.fixed_dictionaries(
    {"method": methods},
    optional={"jsonrpc": st.sampled_from(["2.0", "1.0"]) | json_values, "id": ids, "params": json_values},
)
modern_messages = st.one_of(
    st.builds(lambda envelope, params: {**envelope, "params": params}, requests,
              _params(st.just(MODERN_META) | st.builds(lambda extra: {**MODERN_META, **extra}, meta_entries))),
    st.builds(lambda envelope, params: {**envelope, "params": params}, requests, _params(metas)),
    malformed,
)
session_messages = st.one_of(
    st.builds(lambda envelope, params: {**envelope, "params": params}, requests, _params(json_values)),
    st.builds(lambda envelope, params: {**envelope, "params": params}, requests, _params(st.just({}))),
    malformed,
)
bodies = st.binary(max_size=300) | st.text(max_size=300).map(str.encode) | json_values.map(
    lambda value: json.dumps(value).encode())


def _modern_headers(key: str, message: dict[str, Any], draw_header: str | None) -> dict[str, str]:
    method = message.get("method")
    headers = {"authorization": f"Bearer {key}", "content-type": "application/json",
               "accept": "application/json, text/event-stream", "mcp-protocol-version": MODERN,
               "mcp-method": method if isinstance(method, str) and method.isascii() and method.isprintable() else "x"}
    name = (message.get("params") or {}).get("name") if isinstance(message.get("params"), dict) else None
    if isinstance(name, str) and name.isascii() and name.isprintable():
        headers["mcp-name"] = name
    if draw_header is not None:  # a header that disagrees with the body
        headers["mcp-method"] = draw_header
    return headers


class _Drain:
    """Reads an event stream to its end on a thread, so answers never back up on the gateway."""

    def __init__(self, response: httpx.Response) -> None:
        self.text: list[str] = []
        self.endpoint = threading.Event()
        self.endpoint_path = ""
        self._thread = threading.Thread(target=self._read, args=(response,), daemon=True)
        self._thread.start()

    def _read(self, response: httpx.Response) -> None:
        event = ""
        try:
            for line in response.iter_lines():
                self.text.append(line)
                if line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:") and event == "endpoint" and not self.endpoint.is_set():
                    self.endpoint_path = line[5:].strip()
                    self.endpoint.set()
        except httpx.HTTPError:
            pass  # closed by the test

    def join(self) -> None:
        self._thread.join(timeout=10)


def test_generated_messages_find_nothing(target: Target) -> None:
    client = httpx.Client(timeout=30)
    base = target.url.split("/mcp/", 1)[0]
    auth = {"authorization": f"Bearer {target.key}"}

    @FUZZ
    @given(message=modern_messages, header=st.none() | st.sampled_from(["tools/list", "ping", "x"]))
    def stateless(message: dict[str, Any], header: str | None) -> None:
        body = json.dumps(message).encode()
        client.post(target.url, content=body, headers=_modern_headers(target.key, message, header))

    @FUZZ
    @given(body=bodies, version=st.sampled_from([MODERN, "2025-11-25", "garbage"]))
    def raw(body: bytes, version: str) -> None:
        client.post(target.url, content=body, headers={**auth, "content-type": "application/json",
                                                       "accept": "application/json, text/event-stream",
                                                       "mcp-protocol-version": version, "mcp-method": "tools/call"})

    stateless()
    raw()

    # Legacy HTTP+SSE: one session, initialized properly, then generated messages and bodies.
    with client.stream("GET", f"{target.url}/sse", headers=auth, timeout=httpx.Timeout(30, read=None)) as response:
        assert response.status_code == 200, response.read()
        stream = _Drain(response)
        assert stream.endpoint.wait(10), "no endpoint event on the HTTP+SSE stream"
        endpoint = f"{base}{stream.endpoint_path}"
        initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}}}
        assert client.post(endpoint, json=initialize, headers=auth).status_code == 202
        client.post(endpoint, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=auth)

        @FUZZ
        @given(message=session_messages | bodies)
        def over_sse(message: dict[str, Any] | bytes) -> None:
            body = message if isinstance(message, bytes) else json.dumps(message).encode()
            client.post(endpoint, content=body, headers={**auth, "content-type": "application/json"})

        over_sse()
        answered = client.post(endpoint, json={"jsonrpc": "2.0", "id": "last", "method": "ping"}, headers=auth)
        assert answered.status_code == 202  # the session survived everything before it
        response.close()
    stream.join()
    client.close()

    stop(target.proxy)  # it records an exchange once it is over: all are written when it has stopped
    exchanges = read_exchanges(target.exchanges)
    assert len(exchanges) > 3 * EXAMPLES
    # The stream as this client read it, whole (the proxy keeps the first 256 KB of each exchange).
    exchanges.append({"method": "GET", "path": "/sse (as read)", "status": 200, "content_type": "text/event-stream",
                      "request": "", "body": "\n".join(stream.text), "truncated": False, "completed": True,
                      "error": None})
    assert '"id": "last"' in "\n".join(stream.text) or '"id":"last"' in "\n".join(stream.text)
    # The demo backend (the official SDK's server) answers some generated requests itself with
    # -32603 "Internal server error" (a prompt fetched without its arguments); the gateway relays a
    # backend's error unchanged and never words its own that way.
    problems = [problem for problem in exchange_problems(exchanges)
                if not ("-32603" in problem and '"message":"Internal server error"' in problem)]
    if target.gateway.poll() is not None:
        problems.append(f"the gateway exited with code {target.gateway.returncode} during the fuzzing")
    problems += log_problems(target.gateway_log.read_text(encoding="utf-8", errors="replace"))
    assert not problems, f"{len(problems)} finding(s) (exchanges in {RESULTS}):\n" + "\n".join(problems)
