"""Building blocks of the conformance fixture server (see `tests.backends.conformance_server`).

The fixture exposes exactly the tool, resource and prompt names that the official
`@modelcontextprotocol/conformance` server scenarios call, split by concern:

* `media`       - tiny deterministic PNG/WAV payloads.
* `event_store` - in-memory SSE event store (resumability / SSE polling scenarios).
* `interaction` - era-aware helpers: a server->client request on legacy sessions,
                  an `InputRequiredResult` round trip on the 2026-07-28 wire.
* `legacy`      - handshake-era methods MCPServer does not wire (logging/setLevel,
                  resources/subscribe, resources/unsubscribe).
* `tools`       - content, progress, logging, sampling, elicitation, SSE and
                  list-change tools.
* `mrtr`        - the 2026-07-28 multi-round-trip (`input-required-result-*`) tools/prompt.
* `catalog`     - resources, resource templates, prompts and completion.
* `tasks`       - the 2026-07-28 tasks extension (SEP-2663): its tools, tasks/get,
                  tasks/update, tasks/cancel and an in-memory task store.
"""
